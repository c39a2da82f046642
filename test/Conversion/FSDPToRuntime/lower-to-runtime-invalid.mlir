// RUN: not fsdp-opt %s -split-input-file --fsdp-lower-to-runtime 2>&1 | FileCheck %s

// CHECK: error: fsdp-lower-to-runtime: no single-block function marked fsdp.train_step (run --fsdp-autodiff first)
func.func @forward(%l: tensor<f32>) -> tensor<f32> attributes {fsdp.forward} {
  return %l : tensor<f32>
}

// -----

// CHECK: error: 'arith.mulf' op has no runtime kernel
func.func @train_step(%x: tensor<4xf32>, %step: i64) -> tensor<f32> attributes {fsdp.train_step} {
  %y = arith.mulf %x, %x : tensor<4xf32>
  %t = arith.constant dense<0> : tensor<i32>
  %l = fsdp.cross_entropy %y, %t : (tensor<4xf32>, tensor<i32>) -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// CHECK: error: 'arith.constant' op only float splat constants lower to the runtime
func.func @train_step(%x: tensor<4xf32>, %step: i64) -> tensor<f32> attributes {fsdp.train_step} {
  %t = arith.constant dense<0> : tensor<i32>
  %l = fsdp.cross_entropy %x, %t : (tensor<4xf32>, tensor<i32>) -> tensor<f32>
  return %l : tensor<f32>
}
