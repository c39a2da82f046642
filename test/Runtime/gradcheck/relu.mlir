// fsdp.relu between two linears, through the runtime.
// RUN: fsdp-opt %s --fsdp-train-pipeline -o %t.plan
// RUN: fsdp-gradcheck %t.plan | FileCheck %s
// CHECK: gradcheck: 2 passed, 0 failed
fsdp.param @w0 : tensor<7x6xf32> init <normal, std = 0.5>
fsdp.param @w1 : tensor<5x7xf32> init <normal, std = 0.5>
func.func @forward(%x: tensor<4x6xf32>, %t: tensor<4xi32>) -> tensor<f32> attributes {fsdp.forward} {
  %w0 = fsdp.load @w0 : tensor<7x6xf32>
  %w1 = fsdp.load @w1 : tensor<5x7xf32>
  %h = fsdp.linear %x, %w0 : (tensor<4x6xf32>, tensor<7x6xf32>) -> tensor<4x7xf32>
  %a = fsdp.relu %h : tensor<4x7xf32>
  %y = fsdp.linear %a, %w1 : (tensor<4x7xf32>, tensor<5x7xf32>) -> tensor<4x5xf32>
  %l = fsdp.cross_entropy %y, %t : (tensor<4x5xf32>, tensor<4xi32>) -> tensor<f32>
  return %l : tensor<f32>
}
