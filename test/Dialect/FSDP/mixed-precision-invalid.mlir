// RUN: not fsdp-opt %s -split-input-file --fsdp-mixed-precision=param-dtype=bf16 2>&1 | FileCheck %s
// RUN: not fsdp-opt %s -split-input-file --fsdp-mixed-precision=param-dtype=f16 2>&1 | FileCheck %s --check-prefix=DTYPE

// CHECK: error: fsdp-mixed-precision: no sharded function marked fsdp.train_step (run --fsdp-shard first)
// DTYPE: error: fsdp-mixed-precision: param-dtype and reduce-dtype expect f32 or bf16, got 'f16' and 'f32'
fsdp.param @w : tensor<2x2xf32> init <zeros>
fsdp.unit @u params [@w]
func.func @train_step(%s: i64) -> tensor<f32> attributes {fsdp.train_step} {
  %w = fsdp.load @w : tensor<2x2xf32>
  %t = arith.constant dense<0> : tensor<2xi32>
  %l = fsdp.cross_entropy %w, %t : (tensor<2x2xf32>, tensor<2xi32>) -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// The master parameters are f32: a model already in bf16 has none.
// CHECK: error: 'fsdp.param' op is 'tensor<2xbf16>': mixed precision keeps f32 master parameters
module attributes {fsdp.mesh = #fsdp.mesh<["shard" = 2]>} {
  fsdp.param @w : tensor<2xbf16> init <zeros>
  fsdp.unit @u params [@w]
  func.func @train_step(%s: i64) -> tensor<f32> attributes {fsdp.train_step} {
    %g = fsdp.all_gather @u : tensor<2xbf16>
    %t = arith.constant dense<0> : tensor<i32>
    %l = fsdp.cross_entropy %g, %t : (tensor<2xbf16>, tensor<i32>) -> tensor<f32>
    fsdp.free %g : tensor<2xbf16>
    return %l : tensor<f32>
  }
}

// -----

// A scheduled step: the casts would land after the starts they feed.
// CHECK: error: 'fsdp.all_gather_start' op is already scheduled: run --fsdp-mixed-precision before --fsdp-schedule
module attributes {fsdp.mesh = #fsdp.mesh<["shard" = 2]>} {
  fsdp.param @w : tensor<2xf32> init <zeros>
  fsdp.unit @u params [@w]
  func.func @train_step(%s: i64) -> tensor<f32> attributes {fsdp.train_step} {
    %tok, %g = fsdp.all_gather_start @u stream 1 : tensor<2xf32>
    fsdp.wait %tok
    %t = arith.constant dense<0> : tensor<i32>
    %l = fsdp.cross_entropy %g, %t : (tensor<2xf32>, tensor<i32>) -> tensor<f32>
    fsdp.free %g : tensor<2xf32>
    return %l : tensor<f32>
  }
}
