// RUN: not fsdp-opt %s -split-input-file --fsdp-shard 2>&1 | FileCheck %s

// CHECK: error: fsdp-shard: no single-block function marked fsdp.train_step (run --fsdp-autodiff first)
func.func @forward(%l: tensor<f32>) -> tensor<f32> attributes {fsdp.forward} {
  return %l : tensor<f32>
}

// -----

// CHECK: error: 'fsdp.param' op is in no unit; fsdp-shard shards units (run --fsdp-wrap first)
fsdp.param @w : tensor<2x2xf32> init <zeros>
func.func @train_step(%l: tensor<f32>, %s: i64) -> tensor<f32> attributes {fsdp.train_step} {
  return %l : tensor<f32>
}

// -----

// CHECK: error: 'fsdp.load' op reads a parameter outside every unit region; after sharding it would not be gathered
fsdp.param @w : tensor<2xf32> init <zeros>
fsdp.unit @u params [@w]
func.func @train_step(%s: i64) -> tensor<f32> attributes {fsdp.train_step} {
  %w = fsdp.load @w : tensor<2xf32>
  %t = arith.constant dense<0> : tensor<i32>
  %l = fsdp.cross_entropy %w, %t : (tensor<2xf32>, tensor<i32>) -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// CHECK: error: 'fsdp.unit' op mixes element types 'f32' and 'bf16'; a flat parameter has one
fsdp.param @a : tensor<2xf32> init <zeros>
fsdp.param @b : tensor<2xbf16> init <zeros>
fsdp.unit @u params [@a, @b]
func.func @train_step(%l: tensor<f32>, %s: i64) -> tensor<f32> attributes {fsdp.train_step} {
  return %l : tensor<f32>
}
