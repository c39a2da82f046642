// fsdp.rope through the runtime, in both layouts: multi-head in front of
// attention (2 heads of 4 in a 24-wide qkv), and grouped (2 query heads,
// 1 kv head of 6, theta 100 so that every pair turns visibly over 3
// positions) into a linear, which sees the v part copied too.
// RUN: fsdp-opt %s --fsdp-train-pipeline -o %t.plan
// RUN: fsdp-gradcheck %t.plan | FileCheck %s
// CHECK: gradcheck: w_qkv {{.*}} ok
// CHECK: gradcheck: 3 passed, 0 failed
fsdp.param @w_qkv : tensor<24x6xf32> init <normal, std = 0.5>
fsdp.param @w_g : tensor<8x24xf32> init <normal, std = 0.5>
fsdp.param @w_out : tensor<5x8xf32> init <normal, std = 0.5>
func.func @forward(%x: tensor<2x3x6xf32>, %t: tensor<2x3xi32>) -> tensor<f32> attributes {fsdp.forward} {
  %wqkv = fsdp.load @w_qkv : tensor<24x6xf32>
  %wg = fsdp.load @w_g : tensor<8x24xf32>
  %wo = fsdp.load @w_out : tensor<5x8xf32>
  %qkv = fsdp.linear %x, %wqkv : (tensor<2x3x6xf32>, tensor<24x6xf32>) -> tensor<2x3x24xf32>
  %r = fsdp.rope %qkv {heads = 2 : i64} : (tensor<2x3x24xf32>) -> tensor<2x3x24xf32>
  %a, %p = fsdp.attention %r {heads = 2 : i64} : (tensor<2x3x24xf32>) -> (tensor<2x3x8xf32>, tensor<2x2x3x3xf32>)
  %rg = fsdp.rope %qkv {heads = 2 : i64, kv_heads = 1 : i64, theta = 100.0 : f32} : (tensor<2x3x24xf32>) -> tensor<2x3x24xf32>
  %b = fsdp.linear %rg, %wg : (tensor<2x3x24xf32>, tensor<8x24xf32>) -> tensor<2x3x8xf32>
  %s = fsdp.add %a, %b : tensor<2x3x8xf32>
  %y = fsdp.linear %s, %wo : (tensor<2x3x8xf32>, tensor<5x8xf32>) -> tensor<2x3x5xf32>
  %l = fsdp.cross_entropy %y, %t : (tensor<2x3x5xf32>, tensor<2x3xi32>) -> tensor<f32>
  return %l : tensor<f32>
}
