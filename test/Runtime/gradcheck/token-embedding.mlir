// fsdp.embedding without a position table (Llama's token embedding) and an
// untied head, through the runtime: the backward is
// fsdp.token_embedding_backward.
// RUN: fsdp-opt %s --fsdp-train-pipeline -o %t.plan
// RUN: fsdp-gradcheck %t.plan | FileCheck %s
// RUN: fsdp-opt %s --fsdp-wrap --fsdp-autodiff | FileCheck %s --check-prefix=IR
// CHECK: gradcheck: wte {{.*}} ok
// CHECK: gradcheck: head {{.*}} ok
// CHECK: gradcheck: 2 passed, 0 failed
// IR: fsdp.token_embedding_backward %{{.*}}, %{{.*}} : (tensor<2x4x6xf32>, tensor<2x4xi32>) -> tensor<11x6xf32>
fsdp.param @wte : tensor<11x6xf32> init <normal, std = 0.5>
fsdp.param @head : tensor<11x6xf32> init <normal, std = 0.5>
func.func @forward(%tok: tensor<2x4xi32>, %t: tensor<2x4xi32>) -> tensor<f32> attributes {fsdp.forward} {
  %wte = fsdp.load @wte : tensor<11x6xf32>
  %x = fsdp.embedding %tok, %wte : (tensor<2x4xi32>, tensor<11x6xf32>) -> tensor<2x4x6xf32>
  %w = fsdp.load @head : tensor<11x6xf32>
  %y = fsdp.linear %x, %w : (tensor<2x4x6xf32>, tensor<11x6xf32>) -> tensor<2x4x11xf32>
  %l = fsdp.cross_entropy %y, %t : (tensor<2x4x11xf32>, tensor<2x4xi32>) -> tensor<f32>
  return %l : tensor<f32>
}
