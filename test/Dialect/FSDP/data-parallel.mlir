// RUN: fsdp-opt %s -split-input-file --fsdp-mesh=shard=4 --fsdp-data-parallel | FileCheck %s
// RUN: fsdp-opt %s -split-input-file --fsdp-mesh=shard=1 --fsdp-data-parallel | FileCheck %s --check-prefix=ONE
// A second run changes nothing (@forward is marked fsdp.batch_split):
// RUN: fsdp-opt %s -split-input-file --fsdp-mesh=shard=4 --fsdp-data-parallel --fsdp-data-parallel | FileCheck %s

// The global batch 8 becomes 2 rows per rank, in inputs and in every value
// computed from them; parameters keep their shapes; the loss stays a scalar.
// CHECK: module attributes {fsdp.mesh = #fsdp.mesh<["shard" = 4]>}
// CHECK-LABEL: func.func @forward(%{{.*}}: tensor<2x6xf32>, %{{.*}}: tensor<2xi32>) -> tensor<f32> attributes {fsdp.batch_split, fsdp.forward}
// CHECK: fsdp.compute @l forward ins(%{{.*}} : tensor<2x6xf32>) -> tensor<2x5xf32>
// CHECK:   fsdp.load @w : tensor<5x6xf32>
// CHECK:   fsdp.linear %{{.*}} : (tensor<2x6xf32>, tensor<5x6xf32>) -> tensor<2x5xf32>
// CHECK:   fsdp.layer_norm {{.*}} -> (tensor<2x5xf32>, tensor<2xf32>, tensor<2xf32>)
// CHECK: fsdp.cross_entropy %{{.*}} : (tensor<2x5xf32>, tensor<2xi32>) -> tensor<f32>
// ONE: module attributes {fsdp.mesh = #fsdp.mesh<["shard" = 1]>}
// ONE: func.func @forward(%{{.*}}: tensor<8x6xf32>, %{{.*}}: tensor<8xi32>)
fsdp.param @w : tensor<5x6xf32> init <normal, std = 0.5>
fsdp.param @g : tensor<5xf32> init <ones>
fsdp.param @b : tensor<5xf32> init <zeros>
fsdp.unit @l params [@w, @g, @b]
func.func @forward(%x: tensor<8x6xf32>, %t: tensor<8xi32>) -> tensor<f32> attributes {fsdp.forward} {
  %y:3 = fsdp.compute @l forward ins(%x : tensor<8x6xf32>) -> tensor<8x5xf32>, tensor<8xf32>, tensor<8xf32> {
  ^bb0(%a: tensor<8x6xf32>):
    %w = fsdp.load @w : tensor<5x6xf32>
    %g = fsdp.load @g : tensor<5xf32>
    %b = fsdp.load @b : tensor<5xf32>
    %h = fsdp.linear %a, %w : (tensor<8x6xf32>, tensor<5x6xf32>) -> tensor<8x5xf32>
    %n, %m, %r = fsdp.layer_norm %h, %g, %b : (tensor<8x5xf32>, tensor<5xf32>, tensor<5xf32>) -> (tensor<8x5xf32>, tensor<8xf32>, tensor<8xf32>)
    fsdp.yield %n, %m, %r : tensor<8x5xf32>, tensor<8xf32>, tensor<8xf32>
  }
  %l = fsdp.cross_entropy %y#0, %t : (tensor<8x5xf32>, tensor<8xi32>) -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// A GPT-style model: tokens B x T, attention probabilities B x H x T x T.
// CHECK-LABEL: func.func @forward(%{{.*}}: tensor<1x3xi32>, %{{.*}}: tensor<1x3xi32>)
// CHECK: fsdp.embedding {{.*}} -> tensor<1x3x6xf32>
// CHECK: fsdp.attention {{.*}} -> (tensor<1x3x2xf32>, tensor<1x1x3x3xf32>)
fsdp.param @wte : tensor<7x6xf32> init <normal, std = 0.02>
fsdp.param @wpe : tensor<3x6xf32> init <normal, std = 0.02>
fsdp.param @wo : tensor<7x2xf32> init <normal, std = 0.02>
func.func @forward(%tok: tensor<4x3xi32>, %t: tensor<4x3xi32>) -> tensor<f32> attributes {fsdp.forward} {
  %wte = fsdp.load @wte : tensor<7x6xf32>
  %wpe = fsdp.load @wpe : tensor<3x6xf32>
  %wo = fsdp.load @wo : tensor<7x2xf32>
  %x = fsdp.embedding %tok, %wte, %wpe : (tensor<4x3xi32>, tensor<7x6xf32>, tensor<3x6xf32>) -> tensor<4x3x6xf32>
  %a, %p = fsdp.attention %x {heads = 1 : i64} : (tensor<4x3x6xf32>) -> (tensor<4x3x2xf32>, tensor<4x1x3x3xf32>)
  %y = fsdp.linear %a, %wo : (tensor<4x3x2xf32>, tensor<7x2xf32>) -> tensor<4x3x7xf32>
  %l = fsdp.cross_entropy %y, %t : (tensor<4x3x7xf32>, tensor<4x3xi32>) -> tensor<f32>
  return %l : tensor<f32>
}
