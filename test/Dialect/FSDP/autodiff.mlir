// RUN: fsdp-opt %s -split-input-file --fsdp-autodiff="lr=0.01 beta1=0.8 beta2=0.9 eps=1.0e-6 weight-decay=0.5" | FileCheck %s

// A two-layer MLP, wrapped per layer. The backward is pinned op by op: the
// loss seed, cross-entropy backward outside every unit, then each unit's
// backward region in reverse order, reloading only the weights it needs and
// yielding the unit's parameter gradients; then one AdamW per parameter in
// declaration order, with no weight decay for no_weight_decay parameters.
fsdp.param @layers.0.w : tensor<8x4xf32> init <normal, std = 0.5>
fsdp.param @layers.0.b : tensor<8xf32> init <zeros> no_weight_decay
fsdp.param @layers.1.w : tensor<3x8xf32> init <normal, std = 0.5>
fsdp.param @layers.1.b : tensor<3xf32> init <zeros> no_weight_decay
fsdp.unit @layers.0 params [@layers.0.w, @layers.0.b]
fsdp.unit @layers.1 params [@layers.1.w, @layers.1.b]

// The forward is kept unchanged.
// CHECK-LABEL: func.func @forward(
// CHECK-SAME: attributes {fsdp.forward}
func.func @forward(%x: tensor<2x4xf32>, %t: tensor<2xi32>) -> tensor<f32> attributes {fsdp.forward} {
  %0 = fsdp.compute @layers.0 forward ins(%x : tensor<2x4xf32>) -> tensor<2x8xf32> {
  ^bb0(%a: tensor<2x4xf32>):
    %w = fsdp.load @layers.0.w : tensor<8x4xf32>
    %b = fsdp.load @layers.0.b : tensor<8xf32>
    %y = fsdp.linear %a, %w, %b : (tensor<2x4xf32>, tensor<8x4xf32>, tensor<8xf32>) -> tensor<2x8xf32>
    fsdp.yield %y : tensor<2x8xf32>
  }
  %1 = fsdp.relu %0 : tensor<2x8xf32>
  %2 = fsdp.compute @layers.1 forward ins(%1 : tensor<2x8xf32>) -> tensor<2x3xf32> {
  ^bb0(%a: tensor<2x8xf32>):
    %w = fsdp.load @layers.1.w : tensor<3x8xf32>
    %b = fsdp.load @layers.1.b : tensor<3xf32>
    %y = fsdp.linear %a, %w, %b : (tensor<2x8xf32>, tensor<3x8xf32>, tensor<3xf32>) -> tensor<2x3xf32>
    fsdp.yield %y : tensor<2x3xf32>
  }
  %3 = fsdp.cross_entropy %2, %t : (tensor<2x3xf32>, tensor<2xi32>) -> tensor<f32>
  return %3 : tensor<f32>
}

// CHECK-LABEL: func.func @train_step(
// CHECK-SAME: %[[X:[a-z0-9]+]]: tensor<2x4xf32>, %[[T:[a-z0-9]+]]: tensor<2xi32>, %[[STEP:[a-z0-9]+]]: i64) -> tensor<f32> attributes {fsdp.train_step}
// CHECK:      %[[H0:.*]] = fsdp.compute @layers.0 forward ins(%[[X]] : tensor<2x4xf32>) -> tensor<2x8xf32>
// CHECK:      %[[R:.*]] = fsdp.relu %[[H0]]
// CHECK:      %[[H1:.*]] = fsdp.compute @layers.1 forward ins(%[[R]] : tensor<2x8xf32>) -> tensor<2x3xf32>
// CHECK:      %[[LOSS:.*]] = fsdp.cross_entropy %[[H1]], %[[T]]
// CHECK-NEXT: %[[ONE:.*]] = arith.constant dense<1.000000e+00> : tensor<f32>
// CHECK-NEXT: %[[DL:.*]] = fsdp.cross_entropy_backward %[[ONE]], %[[H1]], %[[T]]
// CHECK-NEXT: %[[G1:.*]]:3 = fsdp.compute @layers.1 backward ins(%[[DL]], %[[R]] : tensor<2x3xf32>, tensor<2x8xf32>) -> tensor<2x8xf32>, tensor<3x8xf32>, tensor<3xf32> {
// CHECK-NEXT: ^bb0(%[[DY:.*]]: tensor<2x3xf32>, %[[IN:.*]]: tensor<2x8xf32>):
// CHECK-NEXT:   %[[W1:.*]] = fsdp.load @layers.1.w : tensor<3x8xf32>
// CHECK-NEXT:   %[[DX:.*]] = fsdp.linear_grad_input %[[DY]], %[[W1]]
// CHECK-NEXT:   %[[DW:.*]] = fsdp.linear_grad_weight %[[DY]], %[[IN]]
// CHECK-NEXT:   %[[DB:.*]] = fsdp.bias_grad %[[DY]]
// CHECK-NEXT:   fsdp.yield %[[DX]], %[[DW]], %[[DB]]
// CHECK-NEXT: }
// CHECK-NEXT: %[[DR:.*]] = fsdp.relu_backward %[[G1]]#0, %[[H0]]
// The input's gradient is not needed: layer 0's backward has no grad_input.
// CHECK-NEXT: %[[G0:.*]]:2 = fsdp.compute @layers.0 backward ins(%[[DR]], %[[X]] : tensor<2x8xf32>, tensor<2x4xf32>) -> tensor<8x4xf32>, tensor<8xf32> {
// CHECK-NEXT: ^bb0(%[[DY0:.*]]: tensor<2x8xf32>, %[[IN0:.*]]: tensor<2x4xf32>):
// CHECK-NEXT:   %[[DW0:.*]] = fsdp.linear_grad_weight %[[DY0]], %[[IN0]]
// CHECK-NEXT:   %[[DB0:.*]] = fsdp.bias_grad %[[DY0]]
// CHECK-NEXT:   fsdp.yield %[[DW0]], %[[DB0]]
// CHECK-NEXT: }
// CHECK-NEXT: fsdp.adamw @layers.0.w, %[[G0]]#0, %[[STEP]] {beta1 = 8.000000e-01 : f32, beta2 = 0.899999976 : f32, eps = 9.99999997E-7 : f32, lr = 0.00999999977 : f32, weight_decay = 5.000000e-01 : f32} : tensor<8x4xf32>
// CHECK-NEXT: fsdp.adamw @layers.0.b, %[[G0]]#1, %[[STEP]] {{{.*}}weight_decay = 0.000000e+00 : f32} : tensor<8xf32>
// CHECK-NEXT: fsdp.adamw @layers.1.w, %[[G1]]#1, %[[STEP]] {{{.*}}weight_decay = 5.000000e-01 : f32} : tensor<3x8xf32>
// CHECK-NEXT: fsdp.adamw @layers.1.b, %[[G1]]#2, %[[STEP]] {{{.*}}weight_decay = 0.000000e+00 : f32} : tensor<3xf32>
// CHECK-NEXT: return %[[LOSS]] : tensor<f32>

// -----

// Tied weights: @wte is loaded by two regions of the root unit; its two
// gradient contributions are summed inside the last backward region of the
// unit. A parameter the loss does not depend on gets a zero gradient.
fsdp.param @wte : tensor<16x8xf32> init <normal, std = 0.02>
fsdp.param @wpe : tensor<4x8xf32> init <normal, std = 0.02>
fsdp.param @unused : tensor<2x2xf32> init <normal, std = 0.02>
fsdp.unit @root params [@wte, @wpe, @unused]

// CHECK-LABEL: func.func @train_step(
// CHECK:      %[[HEAD:.*]]:2 = fsdp.compute @root backward
// CHECK:        fsdp.linear_grad_input
// CHECK:        fsdp.linear_grad_weight
// CHECK:      %[[DG:.*]] = fsdp.gelu_backward %[[HEAD]]#0
// CHECK-NEXT: %[[EMB:.*]]:2 = fsdp.compute @root backward ins(%[[DG]], %{{.*}}, %[[HEAD]]#1 :
// CHECK-NEXT: ^bb0(%[[DX:.*]]: tensor<2x4x8xf32>, %[[TOK:.*]]: tensor<2x4xi32>, %[[PARTIAL:.*]]: tensor<16x8xf32>):
// CHECK-NEXT:   %[[DWTE:.*]], %[[DWPE:.*]] = fsdp.embedding_backward %[[DX]], %[[TOK]]
// CHECK-NEXT:   %[[SUM:.*]] = fsdp.add %[[PARTIAL]], %[[DWTE]] : tensor<16x8xf32>
// CHECK-NEXT:   fsdp.yield %[[DWPE]], %[[SUM]]
// CHECK:      fsdp.adamw @wte, %[[EMB]]#1
// CHECK-NEXT: fsdp.adamw @wpe, %[[EMB]]#0
// CHECK-NEXT: %[[ZERO:.*]] = arith.constant dense<0.000000e+00> : tensor<2x2xf32>
// CHECK-NEXT: fsdp.adamw @unused, %[[ZERO]]
func.func @forward(%tok: tensor<2x4xi32>, %t: tensor<2x4xi32>) -> tensor<f32> attributes {fsdp.forward} {
  %x = fsdp.compute @root forward ins(%tok : tensor<2x4xi32>) -> tensor<2x4x8xf32> {
  ^bb0(%a: tensor<2x4xi32>):
    %wte = fsdp.load @wte : tensor<16x8xf32>
    %wpe = fsdp.load @wpe : tensor<4x8xf32>
    %e = fsdp.embedding %a, %wte, %wpe : (tensor<2x4xi32>, tensor<16x8xf32>, tensor<4x8xf32>) -> tensor<2x4x8xf32>
    fsdp.yield %e : tensor<2x4x8xf32>
  }
  %g = fsdp.gelu %x : tensor<2x4x8xf32>
  %logits = fsdp.compute @root forward ins(%g : tensor<2x4x8xf32>) -> tensor<2x4x16xf32> {
  ^bb0(%a: tensor<2x4x8xf32>):
    %wte = fsdp.load @wte : tensor<16x8xf32>
    %y = fsdp.linear %a, %wte : (tensor<2x4x8xf32>, tensor<16x8xf32>) -> tensor<2x4x16xf32>
    fsdp.yield %y : tensor<2x4x16xf32>
  }
  %l = fsdp.cross_entropy %logits, %t : (tensor<2x4x16xf32>, tensor<2x4xi32>) -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// Without units, autodiff works on the flat forward and forms no regions.
fsdp.param @w : tensor<3x4xf32> init <normal, std = 0.02>
// CHECK-LABEL: func.func @train_step(
// CHECK-NOT:  fsdp.compute
// CHECK:      fsdp.cross_entropy_backward
// CHECK-NEXT: fsdp.linear_grad_weight
// CHECK-NEXT: fsdp.adamw @w
func.func @forward(%x: tensor<2x4xf32>, %t: tensor<2xi32>) -> tensor<f32> attributes {fsdp.forward} {
  %w = fsdp.load @w : tensor<3x4xf32>
  %y = fsdp.linear %x, %w : (tensor<2x4xf32>, tensor<3x4xf32>) -> tensor<2x3xf32>
  %l = fsdp.cross_entropy %y, %t : (tensor<2x3xf32>, tensor<2xi32>) -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// A cast in the model (a bf16 layer after an f32 one): its gradient is the
// incoming gradient cast back to the source's type.
fsdp.param @a : tensor<4x4xf32> init <normal, std = 0.5>
fsdp.param @w : tensor<4x4xbf16> init <normal, std = 0.5>
fsdp.unit @f params [@a]
fsdp.unit @u params [@w]
// CHECK-LABEL: func.func @train_step(
// CHECK:      fsdp.compute @u backward
// CHECK:        fsdp.linear_grad_input %{{.*}} : (tensor<2x4xbf16>, tensor<4x4xbf16>) -> tensor<2x4xbf16>
// CHECK:      %[[D:.*]] = fsdp.cast %{{.*}} : tensor<2x4xbf16> -> tensor<2x4xf32>
// CHECK-NEXT: fsdp.compute @f backward ins(%[[D]]
func.func @forward(%x: tensor<2x4xf32>, %t: tensor<2xi32>) -> tensor<f32> attributes {fsdp.forward} {
  %h = fsdp.compute @f forward ins(%x : tensor<2x4xf32>) -> tensor<2x4xf32> {
  ^bb0(%a: tensor<2x4xf32>):
    %w = fsdp.load @a : tensor<4x4xf32>
    %y = fsdp.linear %a, %w : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
    fsdp.yield %y : tensor<2x4xf32>
  }
  %c = fsdp.cast %h : tensor<2x4xf32> -> tensor<2x4xbf16>
  %0 = fsdp.compute @u forward ins(%c : tensor<2x4xbf16>) -> tensor<2x4xbf16> {
  ^bb0(%a: tensor<2x4xbf16>):
    %w = fsdp.load @w : tensor<4x4xbf16>
    %y = fsdp.linear %a, %w : (tensor<2x4xbf16>, tensor<4x4xbf16>) -> tensor<2x4xbf16>
    fsdp.yield %y : tensor<2x4xbf16>
  }
  %1 = fsdp.cross_entropy %0, %t : (tensor<2x4xbf16>, tensor<2xi32>) -> tensor<f32>
  return %1 : tensor<f32>
}
