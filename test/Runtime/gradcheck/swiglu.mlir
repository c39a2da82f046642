// fsdp.swiglu between Llama's gate and up projections (linears without
// bias) and the down projection, through the runtime.
// RUN: fsdp-opt %s --fsdp-train-pipeline -o %t.plan
// RUN: fsdp-gradcheck %t.plan | FileCheck %s
// CHECK: gradcheck: w_gate {{.*}} ok
// CHECK: gradcheck: w_up {{.*}} ok
// CHECK: gradcheck: 3 passed, 0 failed
fsdp.param @w_gate : tensor<8x6xf32> init <normal, std = 0.8>
fsdp.param @w_up : tensor<8x6xf32> init <normal, std = 0.5>
fsdp.param @w_down : tensor<5x8xf32> init <normal, std = 0.5>
func.func @forward(%x: tensor<2x3x6xf32>, %t: tensor<2x3xi32>) -> tensor<f32> attributes {fsdp.forward} {
  %wg = fsdp.load @w_gate : tensor<8x6xf32>
  %wu = fsdp.load @w_up : tensor<8x6xf32>
  %wd = fsdp.load @w_down : tensor<5x8xf32>
  %gate = fsdp.linear %x, %wg : (tensor<2x3x6xf32>, tensor<8x6xf32>) -> tensor<2x3x8xf32>
  %up = fsdp.linear %x, %wu : (tensor<2x3x6xf32>, tensor<8x6xf32>) -> tensor<2x3x8xf32>
  %h = fsdp.swiglu %gate, %up : (tensor<2x3x8xf32>, tensor<2x3x8xf32>) -> tensor<2x3x8xf32>
  %y = fsdp.linear %h, %wd : (tensor<2x3x8xf32>, tensor<5x8xf32>) -> tensor<2x3x5xf32>
  %l = fsdp.cross_entropy %y, %t : (tensor<2x3x5xf32>, tensor<2x3xi32>) -> tensor<f32>
  return %l : tensor<f32>
}
