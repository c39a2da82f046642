// fsdp.add of two branches (and gradient accumulation into a shared input).
// RUN: fsdp-opt %s --fsdp-train-pipeline -o %t.plan
// RUN: fsdp-gradcheck %t.plan | FileCheck %s
// CHECK: gradcheck: 3 passed, 0 failed
fsdp.param @w0 : tensor<5x6xf32> init <normal, std = 0.5>
fsdp.param @w1 : tensor<5x6xf32> init <normal, std = 0.5>
fsdp.param @w2 : tensor<5x5xf32> init <normal, std = 0.5>
func.func @forward(%x: tensor<4x6xf32>, %t: tensor<4xi32>) -> tensor<f32> attributes {fsdp.forward} {
  %w0 = fsdp.load @w0 : tensor<5x6xf32>
  %w1 = fsdp.load @w1 : tensor<5x6xf32>
  %w2 = fsdp.load @w2 : tensor<5x5xf32>
  %a = fsdp.linear %x, %w0 : (tensor<4x6xf32>, tensor<5x6xf32>) -> tensor<4x5xf32>
  %b = fsdp.linear %x, %w1 : (tensor<4x6xf32>, tensor<5x6xf32>) -> tensor<4x5xf32>
  %s = fsdp.add %a, %b : tensor<4x5xf32>
  %r = fsdp.linear %s, %w2 : (tensor<4x5xf32>, tensor<5x5xf32>) -> tensor<4x5xf32>
  %u = fsdp.add %r, %s : tensor<4x5xf32>
  %l = fsdp.cross_entropy %u, %t : (tensor<4x5xf32>, tensor<4xi32>) -> tensor<f32>
  return %l : tensor<f32>
}
