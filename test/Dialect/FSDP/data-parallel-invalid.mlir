// RUN: not fsdp-opt %s -split-input-file --fsdp-mesh=shard=3 --fsdp-data-parallel 2>&1 | FileCheck %s

// CHECK: error: fsdp-data-parallel: the global batch 8 is not divisible by world size 3; every rank must get the same number of rows
func.func @forward(%x: tensor<8x6xf32>, %t: tensor<8xi32>) -> tensor<f32> attributes {fsdp.forward} {
  %l = fsdp.cross_entropy %x, %t : (tensor<8x6xf32>, tensor<8xi32>) -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// CHECK: error: fsdp-data-parallel: inputs disagree on the batch (first dimension): 6 and 9
func.func @forward(%x: tensor<6x6xf32>, %t: tensor<9xi32>) -> tensor<f32> {
  %c = arith.constant dense<0.0> : tensor<f32>
  return %c : tensor<f32>
}

// -----

// CHECK: error: fsdp-data-parallel: no single-block function @forward
func.func @model() {
  return
}
