// fsdp.rms_norm (rank-3 input), through the runtime.
// RUN: fsdp-opt %s --fsdp-train-pipeline -o %t.plan
// RUN: fsdp-gradcheck %t.plan | FileCheck %s
// CHECK: gradcheck: w0 {{.*}} ok
// CHECK: gradcheck: g {{.*}} ok
// CHECK: gradcheck: 3 passed, 0 failed
fsdp.param @w0 : tensor<8x6xf32> init <normal, std = 0.5>
fsdp.param @g : tensor<8xf32> init <normal, std = 1.0>
fsdp.param @w1 : tensor<5x8xf32> init <normal, std = 0.5>
func.func @forward(%x: tensor<2x3x6xf32>, %t: tensor<2x3xi32>) -> tensor<f32> attributes {fsdp.forward} {
  %w0 = fsdp.load @w0 : tensor<8x6xf32>
  %g = fsdp.load @g : tensor<8xf32>
  %w1 = fsdp.load @w1 : tensor<5x8xf32>
  %h = fsdp.linear %x, %w0 : (tensor<2x3x6xf32>, tensor<8x6xf32>) -> tensor<2x3x8xf32>
  %n, %rstd = fsdp.rms_norm %h, %g {epsilon = 1.0e-5 : f32} : (tensor<2x3x8xf32>, tensor<8xf32>) -> (tensor<2x3x8xf32>, tensor<2x3xf32>)
  %y = fsdp.linear %n, %w1 : (tensor<2x3x8xf32>, tensor<5x8xf32>) -> tensor<2x3x5xf32>
  %l = fsdp.cross_entropy %y, %t : (tensor<2x3x5xf32>, tensor<2x3xi32>) -> tensor<f32>
  return %l : tensor<f32>
}
