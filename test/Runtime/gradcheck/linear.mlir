// fsdp.linear with a bias (and cross_entropy), through the runtime.
// RUN: fsdp-opt %s --fsdp-train-pipeline -o %t.plan
// RUN: fsdp-gradcheck %t.plan | FileCheck %s
// CHECK: gradcheck: w {{.*}} ok
// CHECK: gradcheck: b {{.*}} ok
// CHECK: gradcheck: 2 passed, 0 failed
fsdp.param @w : tensor<5x6xf32> init <normal, std = 0.5>
fsdp.param @b : tensor<5xf32> init <normal, std = 0.5>
func.func @forward(%x: tensor<4x6xf32>, %t: tensor<4xi32>) -> tensor<f32> attributes {fsdp.forward} {
  %w = fsdp.load @w : tensor<5x6xf32>
  %b = fsdp.load @b : tensor<5xf32>
  %y = fsdp.linear %x, %w, %b : (tensor<4x6xf32>, tensor<5x6xf32>, tensor<5xf32>) -> tensor<4x5xf32>
  %l = fsdp.cross_entropy %y, %t : (tensor<4x5xf32>, tensor<4xi32>) -> tensor<f32>
  return %l : tensor<f32>
}
