// RUN: fsdp-opt %s -split-input-file --fsdp-mesh=shard=2 --fsdp-autodiff --fsdp-shard | FileCheck %s

// A two-layer MLP: the exact order of collectives, frees and compute.
// Unit @l0 has 8x4 + 8 = 40 elements (shards of 20), unit @l1 3x8 + 3 = 27
// (P not divisible by N: shards of 13 and 14; the shard tensors hold 14).
fsdp.param @l0.w : tensor<8x4xf32> init <normal, std = 0.5>
fsdp.param @l0.b : tensor<8xf32> init <zeros> no_weight_decay
fsdp.param @l1.w : tensor<3x8xf32> init <normal, std = 0.5>
fsdp.param @l1.b : tensor<3xf32> init <zeros> no_weight_decay
fsdp.unit @l0 params [@l0.w, @l0.b]
fsdp.unit @l1 params [@l1.w, @l1.b]

// CHECK: module attributes {fsdp.mesh = #fsdp.mesh<["shard" = 2]>}
// CHECK-LABEL: func.func @train_step(
// CHECK:      %[[G0:.*]] = fsdp.all_gather @l0 : tensor<40xf32>
// CHECK-NEXT: %[[H0:.*]] = fsdp.compute @l0 forward ins(%{{.*}}, %[[G0]] : tensor<2x4xf32>, tensor<40xf32>) -> tensor<2x8xf32> {
// CHECK-NEXT: ^bb0(%{{.*}}: tensor<2x4xf32>, %[[P0:.*]]: tensor<40xf32>):
// CHECK-NEXT:   %[[W0:.*]] = fsdp.view %[[P0]][0] : tensor<40xf32> -> tensor<8x4xf32>
// CHECK-NEXT:   %[[B0:.*]] = fsdp.view %[[P0]][32] : tensor<40xf32> -> tensor<8xf32>
// CHECK-NEXT:   fsdp.linear %{{.*}}, %[[W0]], %[[B0]]
// CHECK:      fsdp.free %[[G0]] : tensor<40xf32>
// CHECK-NEXT: fsdp.relu
// CHECK-NEXT: %[[G1:.*]] = fsdp.all_gather @l1 : tensor<27xf32>
// CHECK-NEXT: fsdp.compute @l1 forward
// CHECK:      fsdp.free %[[G1]] : tensor<27xf32>
// CHECK-NEXT: fsdp.cross_entropy
// CHECK-NEXT: arith.constant
// CHECK-NEXT: fsdp.cross_entropy_backward
// Backward of @l1: gather again, compute, pack, reduce-scatter, free both.
// CHECK-NEXT: %[[G1B:.*]] = fsdp.all_gather @l1 : tensor<27xf32>
// CHECK-NEXT: %[[D1:.*]]:3 = fsdp.compute @l1 backward
// CHECK:      %[[F1:.*]] = fsdp.pack %[[D1]]#1, %[[D1]]#2 : (tensor<3x8xf32>, tensor<3xf32>) -> tensor<27xf32>
// CHECK-NEXT: %[[S1:.*]] = fsdp.reduce_scatter %[[F1]] @l1 : tensor<27xf32> -> tensor<14xf32>
// CHECK-NEXT: fsdp.free %[[F1]] : tensor<27xf32>
// CHECK-NEXT: fsdp.free %[[G1B]] : tensor<27xf32>
// CHECK-NEXT: fsdp.relu_backward
// CHECK-NEXT: %[[G0B:.*]] = fsdp.all_gather @l0 : tensor<40xf32>
// CHECK-NEXT: %[[D0:.*]]:2 = fsdp.compute @l0 backward
// CHECK:      %[[F0:.*]] = fsdp.pack %[[D0]]#0, %[[D0]]#1 : (tensor<8x4xf32>, tensor<8xf32>) -> tensor<40xf32>
// CHECK-NEXT: %[[S0:.*]] = fsdp.reduce_scatter %[[F0]] @l0 : tensor<40xf32> -> tensor<20xf32>
// CHECK-NEXT: fsdp.free %[[F0]] : tensor<40xf32>
// CHECK-NEXT: fsdp.free %[[G0B]] : tensor<40xf32>
// Local AdamW on each shard; no-decay parameters are handled per element.
// CHECK-NEXT: fsdp.adamw_shard @l0, %[[S0]], %{{.*}} {{{.*}}weight_decay = 1.000000e-01 : f32} : tensor<20xf32>
// CHECK-NEXT: fsdp.adamw_shard @l1, %[[S1]], %{{.*}} {{{.*}}weight_decay = 1.000000e-01 : f32} : tensor<14xf32>
// CHECK-NEXT: return
func.func @forward(%x: tensor<2x4xf32>, %t: tensor<2xi32>) -> tensor<f32> attributes {fsdp.forward} {
  %0 = fsdp.compute @l0 forward ins(%x : tensor<2x4xf32>) -> tensor<2x8xf32> {
  ^bb0(%a: tensor<2x4xf32>):
    %w = fsdp.load @l0.w : tensor<8x4xf32>
    %b = fsdp.load @l0.b : tensor<8xf32>
    %y = fsdp.linear %a, %w, %b : (tensor<2x4xf32>, tensor<8x4xf32>, tensor<8xf32>) -> tensor<2x8xf32>
    fsdp.yield %y : tensor<2x8xf32>
  }
  %1 = fsdp.relu %0 : tensor<2x8xf32>
  %2 = fsdp.compute @l1 forward ins(%1 : tensor<2x8xf32>) -> tensor<2x3xf32> {
  ^bb0(%a: tensor<2x8xf32>):
    %w = fsdp.load @l1.w : tensor<3x8xf32>
    %b = fsdp.load @l1.b : tensor<3xf32>
    %y = fsdp.linear %a, %w, %b : (tensor<2x8xf32>, tensor<3x8xf32>, tensor<3xf32>) -> tensor<2x3xf32>
    fsdp.yield %y : tensor<2x3xf32>
  }
  %3 = fsdp.cross_entropy %2, %t : (tensor<2x3xf32>, tensor<2xi32>) -> tensor<f32>
  return %3 : tensor<f32>
}

// -----

// A unit smaller than the world: 1 element over 2 ranks (rank 0 holds
// nothing, rank 1 one element; the shard tensors hold one). A parameter the
// loss ignores still gets its zero gradient packed and reduced.
fsdp.param @s : tensor<1xf32> init <ones> no_weight_decay
fsdp.param @w : tensor<2x2xf32> init <normal, std = 0.5>
fsdp.unit @tiny params [@s]
fsdp.unit @main params [@w]
// CHECK-LABEL: func.func @train_step(
// CHECK:      %[[ZERO:.*]] = arith.constant dense<0.000000e+00> : tensor<1xf32>
// CHECK-NEXT: %[[F:.*]] = fsdp.pack %[[ZERO]] : (tensor<1xf32>) -> tensor<1xf32>
// CHECK-NEXT: %[[S:.*]] = fsdp.reduce_scatter %[[F]] @tiny : tensor<1xf32> -> tensor<1xf32>
// CHECK: fsdp.adamw_shard @tiny, %[[S]], %{{.*}} {{{.*}}weight_decay = 0.000000e+00 : f32} : tensor<1xf32>
// CHECK: fsdp.adamw_shard @main, %{{.*}} : tensor<2xf32>
func.func @forward(%x: tensor<2x2xf32>, %t: tensor<2xi32>) -> tensor<f32> attributes {fsdp.forward} {
  %s = fsdp.compute @tiny forward -> tensor<1xf32> {
    %v = fsdp.load @s : tensor<1xf32>
    fsdp.yield %v : tensor<1xf32>
  }
  %0 = fsdp.compute @main forward ins(%x : tensor<2x2xf32>) -> tensor<2x2xf32> {
  ^bb0(%a: tensor<2x2xf32>):
    %w = fsdp.load @w : tensor<2x2xf32>
    %y = fsdp.linear %a, %w : (tensor<2x2xf32>, tensor<2x2xf32>) -> tensor<2x2xf32>
    fsdp.yield %y : tensor<2x2xf32>
  }
  %l = fsdp.cross_entropy %0, %t : (tensor<2x2xf32>, tensor<2xi32>) -> tensor<f32>
  return %l : tensor<f32>
}
