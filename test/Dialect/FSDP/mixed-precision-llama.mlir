// Llama's ops under --fsdp-mixed-precision: RMS norm's rstd stays f32 (a
// statistic of the kernel table), everything else turns bf16, backward
// included.
// RUN: fsdp-opt %s --fsdp-wrap --fsdp-mesh=shard=2 --fsdp-autodiff --fsdp-shard --fsdp-mixed-precision=param-dtype=bf16 | FileCheck %s
fsdp.param @norm.w : tensor<8xf32> init <ones> no_weight_decay
fsdp.param @qkv.w : tensor<16x8xf32> init <normal, std = 0.5>
fsdp.param @gate.w : tensor<8x16xf32> init <normal, std = 0.5>
fsdp.param @up.w : tensor<8x16xf32> init <normal, std = 0.5>
fsdp.param @head.w : tensor<5x8xf32> init <normal, std = 0.5>

// CHECK-LABEL: func.func @train_step(
// CHECK: fsdp.rms_norm %{{.*}} : (tensor<2x4x8xbf16>, tensor<8xbf16>) -> (tensor<2x4x8xbf16>, tensor<2x4xf32>)
// CHECK: fsdp.rope %{{.*}} {heads = 2 : i64, kv_heads = 1 : i64, theta = 5.000000e+05 : f32} : (tensor<2x4x16xbf16>) -> tensor<2x4x16xbf16>
// CHECK: fsdp.swiglu %{{.*}} : (tensor<2x4x8xbf16>, tensor<2x4x8xbf16>) -> tensor<2x4x8xbf16>
// CHECK: fsdp.swiglu_backward %{{.*}} : (tensor<2x4x8xbf16>, tensor<2x4x8xbf16>, tensor<2x4x8xbf16>) -> (tensor<2x4x8xbf16>, tensor<2x4x8xbf16>)
// CHECK: fsdp.rope_backward %{{.*}} {heads = 2 : i64, kv_heads = 1 : i64, theta = 5.000000e+05 : f32} : (tensor<2x4x16xbf16>) -> tensor<2x4x16xbf16>
// CHECK: fsdp.rms_norm_backward %{{.*}} : (tensor<2x4x8xbf16>, tensor<2x4x8xbf16>, tensor<8xbf16>, tensor<2x4xf32>) -> (tensor<2x4x8xbf16>, tensor<8xbf16>)
func.func @forward(%x: tensor<2x4x8xf32>, %t: tensor<2x4xi32>) -> tensor<f32> attributes {fsdp.forward} {
  %nw = fsdp.load @norm.w : tensor<8xf32>
  %wqkv = fsdp.load @qkv.w : tensor<16x8xf32>
  %wg = fsdp.load @gate.w : tensor<8x16xf32>
  %wu = fsdp.load @up.w : tensor<8x16xf32>
  %wh = fsdp.load @head.w : tensor<5x8xf32>
  %n, %rstd = fsdp.rms_norm %x, %nw : (tensor<2x4x8xf32>, tensor<8xf32>) -> (tensor<2x4x8xf32>, tensor<2x4xf32>)
  // 2 query heads and 1 kv head of 4: 16 columns.
  %qkv = fsdp.linear %n, %wqkv : (tensor<2x4x8xf32>, tensor<16x8xf32>) -> tensor<2x4x16xf32>
  %r = fsdp.rope %qkv {heads = 2 : i64, kv_heads = 1 : i64, theta = 5.0e5 : f32} : (tensor<2x4x16xf32>) -> tensor<2x4x16xf32>
  %q = fsdp.linear %r, %wg : (tensor<2x4x16xf32>, tensor<8x16xf32>) -> tensor<2x4x8xf32>
  %u = fsdp.linear %r, %wu : (tensor<2x4x16xf32>, tensor<8x16xf32>) -> tensor<2x4x8xf32>
  %h = fsdp.swiglu %q, %u : (tensor<2x4x8xf32>, tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
  %y = fsdp.linear %h, %wh : (tensor<2x4x8xf32>, tensor<5x8xf32>) -> tensor<2x4x5xf32>
  %l = fsdp.cross_entropy %y, %t : (tensor<2x4x5xf32>, tensor<2x4xi32>) -> tensor<f32>
  return %l : tensor<f32>
}
