// fsdp.embedding with a head tied to the token table (two gradient
// contributions to @wte), through the runtime.
// RUN: fsdp-opt %s --fsdp-train-pipeline -o %t.plan
// RUN: fsdp-gradcheck %t.plan | FileCheck %s
// CHECK: gradcheck: wte {{.*}} ok
// CHECK: gradcheck: wpe {{.*}} ok
// CHECK: gradcheck: 2 passed, 0 failed
fsdp.param @wte : tensor<11x6xf32> init <normal, std = 0.5>
fsdp.param @wpe : tensor<5x6xf32> init <normal, std = 0.5>
func.func @forward(%tok: tensor<2x4xi32>, %t: tensor<2x4xi32>) -> tensor<f32> attributes {fsdp.forward} {
  %wte = fsdp.load @wte : tensor<11x6xf32>
  %wpe = fsdp.load @wpe : tensor<5x6xf32>
  %x = fsdp.embedding %tok, %wte, %wpe : (tensor<2x4xi32>, tensor<11x6xf32>, tensor<5x6xf32>) -> tensor<2x4x6xf32>
  %y = fsdp.linear %x, %wte : (tensor<2x4x6xf32>, tensor<11x6xf32>) -> tensor<2x4x11xf32>
  %l = fsdp.cross_entropy %y, %t : (tensor<2x4x11xf32>, tensor<2x4xi32>) -> tensor<f32>
  return %l : tensor<f32>
}
