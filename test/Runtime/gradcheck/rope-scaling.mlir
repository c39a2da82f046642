// fsdp.rope with Hugging Face's rope scaling through the runtime: llama3
// at an original context of 2 positions (so that the 6 positions here
// reach its three bands: kept, smoothed, divided by the factor), and yarn
// with an attention factor (which scales the gradient too), both into
// linears; linear scaling in front of attention.
// RUN: fsdp-opt %s --fsdp-train-pipeline -o %t.plan
// RUN: fsdp-gradcheck %t.plan | FileCheck %s
// CHECK: gradcheck: w_qkv {{.*}} ok
// CHECK: gradcheck: 5 passed, 0 failed
fsdp.param @w_qkv : tensor<32x6xf32> init <normal, std = 0.5>
fsdp.param @w_g : tensor<8x32xf32> init <normal, std = 0.5>
fsdp.param @w_h : tensor<8x32xf32> init <normal, std = 0.5>
fsdp.param @w_a : tensor<8x16xf32> init <normal, std = 0.5>
fsdp.param @w_out : tensor<5x8xf32> init <normal, std = 0.5>
func.func @forward(%x: tensor<2x6x6xf32>, %t: tensor<2x6xi32>) -> tensor<f32> attributes {fsdp.forward} {
  %wqkv = fsdp.load @w_qkv : tensor<32x6xf32>
  %wg = fsdp.load @w_g : tensor<8x32xf32>
  %wh = fsdp.load @w_h : tensor<8x32xf32>
  %wa = fsdp.load @w_a : tensor<8x16xf32>
  %wo = fsdp.load @w_out : tensor<5x8xf32>
  %qkv = fsdp.linear %x, %wqkv : (tensor<2x6x6xf32>, tensor<32x6xf32>) -> tensor<2x6x32xf32>
  %r = fsdp.rope %qkv {heads = 2 : i64, kv_heads = 1 : i64, theta = 100.0 : f32, scaling = #fsdp.rope_scaling<linear>, factor = 2.5} : (tensor<2x6x32xf32>) -> tensor<2x6x32xf32>
  %a, %p = fsdp.attention %r {heads = 2 : i64, kv_heads = 1 : i64} : (tensor<2x6x32xf32>) -> (tensor<2x6x16xf32>, tensor<2x2x6x6xf32>)
  %rl = fsdp.rope %qkv {heads = 2 : i64, kv_heads = 1 : i64, theta = 100.0 : f32, scaling = #fsdp.rope_scaling<llama3>, factor = 4.0, original_max_positions = 2} : (tensor<2x6x32xf32>) -> tensor<2x6x32xf32>
  %b = fsdp.linear %rl, %wg : (tensor<2x6x32xf32>, tensor<8x32xf32>) -> tensor<2x6x8xf32>
  %ry = fsdp.rope %qkv {heads = 2 : i64, kv_heads = 1 : i64, theta = 100.0 : f32, scaling = #fsdp.rope_scaling<yarn>, factor = 4.0, attention_factor = 1.25, correction_low = 1.0, correction_high = 3.0} : (tensor<2x6x32xf32>) -> tensor<2x6x32xf32>
  %c = fsdp.linear %ry, %wh : (tensor<2x6x32xf32>, tensor<8x32xf32>) -> tensor<2x6x8xf32>
  %a8 = fsdp.linear %a, %wa : (tensor<2x6x16xf32>, tensor<8x16xf32>) -> tensor<2x6x8xf32>
  %s0 = fsdp.add %b, %c : tensor<2x6x8xf32>
  %s1 = fsdp.add %s0, %a8 : tensor<2x6x8xf32>
  %y0 = fsdp.linear %s1, %wo : (tensor<2x6x8xf32>, tensor<5x8xf32>) -> tensor<2x6x5xf32>
  %l = fsdp.cross_entropy %y0, %t : (tensor<2x6x5xf32>, tensor<2x6xi32>) -> tensor<f32>
  return %l : tensor<f32>
}
