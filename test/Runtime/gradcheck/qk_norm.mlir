// fsdp.qk_norm (Qwen3's q_norm and k_norm) through the runtime: 2 query
// heads and 1 kv head of 4 in a 16-wide qkv (grouped), its gains drawn
// away from one so that each one's gradient is visible, into attention
// (which reads q and k) and into a linear (which reads every column, the
// copied v part too).
// RUN: fsdp-opt %s --fsdp-train-pipeline -o %t.plan
// RUN: fsdp-gradcheck %t.plan | FileCheck %s
// CHECK: gradcheck: w_qkv {{.*}} ok
// CHECK: gradcheck: qn {{.*}} ok
// CHECK: gradcheck: kn {{.*}} ok
// CHECK: gradcheck: 5 passed, 0 failed
fsdp.param @w_qkv : tensor<16x6xf32> init <normal, std = 0.5>
fsdp.param @qn : tensor<4xf32> init <normal, std = 1.0>
fsdp.param @kn : tensor<4xf32> init <normal, std = 1.0>
fsdp.param @w_g : tensor<8x16xf32> init <normal, std = 0.5>
fsdp.param @w_out : tensor<5x8xf32> init <normal, std = 0.5>
func.func @forward(%x: tensor<2x3x6xf32>, %t: tensor<2x3xi32>) -> tensor<f32> attributes {fsdp.forward} {
  %wqkv = fsdp.load @w_qkv : tensor<16x6xf32>
  %qn = fsdp.load @qn : tensor<4xf32>
  %kn = fsdp.load @kn : tensor<4xf32>
  %wg = fsdp.load @w_g : tensor<8x16xf32>
  %wo = fsdp.load @w_out : tensor<5x8xf32>
  %qkv = fsdp.linear %x, %wqkv : (tensor<2x3x6xf32>, tensor<16x6xf32>) -> tensor<2x3x16xf32>
  %n, %rstd = fsdp.qk_norm %qkv, %qn, %kn {heads = 2 : i64, kv_heads = 1 : i64, epsilon = 1.0e-5 : f32} : (tensor<2x3x16xf32>, tensor<4xf32>, tensor<4xf32>) -> (tensor<2x3x16xf32>, tensor<2x3x3xf32>)
  %a, %p = fsdp.attention %n {heads = 2 : i64, kv_heads = 1 : i64} : (tensor<2x3x16xf32>) -> (tensor<2x3x8xf32>, tensor<2x2x3x3xf32>)
  %b = fsdp.linear %n, %wg : (tensor<2x3x16xf32>, tensor<8x16xf32>) -> tensor<2x3x8xf32>
  %s = fsdp.add %a, %b : tensor<2x3x8xf32>
  %y = fsdp.linear %s, %wo : (tensor<2x3x8xf32>, tensor<5x8xf32>) -> tensor<2x3x5xf32>
  %l = fsdp.cross_entropy %y, %t : (tensor<2x3x5xf32>, tensor<2x3xi32>) -> tensor<f32>
  return %l : tensor<f32>
}
