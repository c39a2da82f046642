// RUN: fsdp-opt %s -split-input-file --fsdp-mesh="shard=4 expert=4" --fsdp-data-parallel --fsdp-expert-parallel -verify-diagnostics
// RUN: not fsdp-opt %s -split-input-file --fsdp-mesh="shard=4 expert=4" --fsdp-expert-parallel="overflow=drop" 2>&1 | FileCheck %s --check-prefix=DROPLESS
// RUN: not fsdp-opt %s -split-input-file --fsdp-mesh="shard=4 expert=4" --fsdp-expert-parallel="capacity-factor=1 overflow=truncate" 2>&1 | FileCheck %s --check-prefix=OVERFLOW
// RUN: not fsdp-opt %s -split-input-file --fsdp-mesh="shard=4 expert=4" --fsdp-expert-parallel="capacity-factor=-1" 2>&1 | FileCheck %s --check-prefix=FACTOR
// DROPLESS: error: fsdp-expert-parallel: overflow=drop needs a capacity factor (the worst-case bound is never exceeded: nothing would drop)
// OVERFLOW: error: fsdp-expert-parallel: overflow must be fail or drop, got 'truncate'
// FACTOR: error: fsdp-expert-parallel: capacity-factor must be 0 (the worst case) or positive and finite, got -1

// Expert groups of 4 cannot split 6 experts.
fsdp.param @w : tensor<6x8x6xf32> init <normal, std = 0.5>
fsdp.unit @u params [@w]
func.func @forward(%x: tensor<4x3x6xf32>, %logits: tensor<4x3x6xf32>, %t: tensor<4x3xi32>) -> tensor<f32> attributes {fsdp.forward} {
  %l = fsdp.compute @u forward ins(%x, %logits, %t : tensor<4x3x6xf32>, tensor<4x3x6xf32>, tensor<4x3xi32>) -> tensor<f32> {
  ^bb0(%a: tensor<4x3x6xf32>, %z: tensor<4x3x6xf32>, %tt: tensor<4x3xi32>):
    %w = fsdp.load @w : tensor<6x8x6xf32>
    %g, %e = fsdp.moe_router %z : (tensor<4x3x6xf32>) -> (tensor<4x3x2xf32>, tensor<4x3x2xi32>)
    // expected-error @+1 {{'fsdp.moe_sort' op sorts over 6 experts, which expert groups of 4 ranks cannot split evenly}}
    %order, %position, %offsets = fsdp.moe_sort %e {num_experts = 6} : (tensor<4x3x2xi32>) -> (tensor<4x3x2xi32>, tensor<4x3x2xi32>, tensor<7xi32>)
    %xs = fsdp.moe_permute %a, %order : (tensor<4x3x6xf32>, tensor<4x3x2xi32>) -> tensor<24x6xf32>
    %h = fsdp.moe_grouped_linear %xs, %w, %offsets : (tensor<24x6xf32>, tensor<6x8x6xf32>, tensor<7xi32>) -> tensor<24x8xf32>
    %c = arith.constant dense<0.0> : tensor<f32>
    fsdp.yield %c : tensor<f32>
  }
  return %l : tensor<f32>
}

// -----

// An expert axis on a model without experts is a mistake, not a no-op.
// expected-error @below {{fsdp-expert-parallel: the mesh has expert groups of 4 ranks, but the model has no mixture-of-experts layer}}
module {
func.func @forward(%x: tensor<4x6xf32>, %t: tensor<4xi32>) -> tensor<f32> attributes {fsdp.forward} {
  %l = fsdp.cross_entropy %x, %t : (tensor<4x6xf32>, tensor<4xi32>) -> tensor<f32>
  return %l : tensor<f32>
}
}

// -----

// A value the experts read from outside (here a second input's rows)
// cannot travel with the exchange.
fsdp.param @w : tensor<4x8x6xf32> init <normal, std = 0.5>
fsdp.unit @u params [@w]
func.func @forward(%x: tensor<4x3x6xf32>, %logits: tensor<4x3x4xf32>, %t: tensor<4x3xi32>) -> tensor<f32> attributes {fsdp.forward} {
  %l = fsdp.compute @u forward ins(%x, %logits : tensor<4x3x6xf32>, tensor<4x3x4xf32>) -> tensor<f32> {
  ^bb0(%a: tensor<4x3x6xf32>, %z: tensor<4x3x4xf32>):
    %w = fsdp.load @w : tensor<4x8x6xf32>
    %g, %e = fsdp.moe_router %z : (tensor<4x3x4xf32>) -> (tensor<4x3x2xf32>, tensor<4x3x2xi32>)
    %order, %position, %offsets = fsdp.moe_sort %e {num_experts = 4} : (tensor<4x3x2xi32>) -> (tensor<4x3x2xi32>, tensor<4x3x2xi32>, tensor<5xi32>)
    %xs = fsdp.moe_permute %a, %order : (tensor<4x3x6xf32>, tensor<4x3x2xi32>) -> tensor<24x6xf32>
    %other = fsdp.moe_permute %a, %position : (tensor<4x3x6xf32>, tensor<4x3x2xi32>) -> tensor<24x6xf32>
    %h = fsdp.moe_grouped_linear %xs, %w, %offsets : (tensor<24x6xf32>, tensor<4x8x6xf32>, tensor<5xi32>) -> tensor<24x8xf32>
    // expected-error @+1 {{'fsdp.moe_grouped_linear' op reads a value from outside its layer's experts other than the permuted rows, the offsets and the weights; expert parallelism cannot send it along}}
    %h2 = fsdp.moe_grouped_linear %other, %w, %offsets : (tensor<24x6xf32>, tensor<4x8x6xf32>, tensor<5xi32>) -> tensor<24x8xf32>
    %c = arith.constant dense<0.0> : tensor<f32>
    fsdp.yield %c : tensor<f32>
  }
  return %l : tensor<f32>
}

// -----

// Offsets feed only grouped linears.
fsdp.param @w : tensor<4x8x6xf32> init <normal, std = 0.5>
fsdp.unit @u params [@w]
func.func @forward(%x: tensor<4x3x6xf32>, %logits: tensor<4x3x4xf32>, %t: tensor<4x3xi32>) -> tensor<f32> attributes {fsdp.forward} {
  %l = fsdp.compute @u forward ins(%x, %logits : tensor<4x3x6xf32>, tensor<4x3x4xf32>) -> tensor<f32> {
  ^bb0(%a: tensor<4x3x6xf32>, %z: tensor<4x3x4xf32>):
    %g, %e = fsdp.moe_router %z : (tensor<4x3x4xf32>) -> (tensor<4x3x2xf32>, tensor<4x3x2xi32>)
    %order, %position, %offsets = fsdp.moe_sort %e {num_experts = 4} : (tensor<4x3x2xi32>) -> (tensor<4x3x2xi32>, tensor<4x3x2xi32>, tensor<5xi32>)
    // expected-error @+1 {{'fsdp.moe_expert_counts' op reads a sort's offsets; --fsdp-expert-parallel knows only grouped linears there}}
    %n = fsdp.moe_expert_counts %offsets : (tensor<5xi32>) -> tensor<4x1xi32>
    %c = arith.constant dense<0.0> : tensor<f32>
    fsdp.yield %c : tensor<f32>
  }
  return %l : tensor<f32>
}
