// Per-block wrapping takes a block index only from an all-digit name
// component: "fc1", "ln_2" and "l2norm" are module names, not blocks.
// RUN: fsdp-opt %s --fsdp-wrap | FileCheck %s
// CHECK-DAG: fsdp.unit @root params [@fc1.w, @l2norm.w]
// CHECK-DAG: fsdp.unit @h.0 params [@h.0.ln_2.w]
// CHECK-NOT: fsdp.unit @fc1
// CHECK-NOT: fsdp.unit @l2norm
fsdp.param @fc1.w : tensor<6x5xf32> init <normal, std = 0.5>
fsdp.param @h.0.ln_2.w : tensor<6x6xf32> init <normal, std = 0.5>
fsdp.param @l2norm.w : tensor<3x6xf32> init <normal, std = 0.5>
func.func @forward(%x: tensor<4x5xf32>, %t: tensor<4xi32>) -> tensor<f32> attributes {fsdp.forward} {
  %w0 = fsdp.load @fc1.w : tensor<6x5xf32>
  %w1 = fsdp.load @h.0.ln_2.w : tensor<6x6xf32>
  %w2 = fsdp.load @l2norm.w : tensor<3x6xf32>
  %h0 = fsdp.linear %x, %w0 : (tensor<4x5xf32>, tensor<6x5xf32>) -> tensor<4x6xf32>
  %h1 = fsdp.linear %h0, %w1 : (tensor<4x6xf32>, tensor<6x6xf32>) -> tensor<4x6xf32>
  %y = fsdp.linear %h1, %w2 : (tensor<4x6xf32>, tensor<3x6xf32>) -> tensor<4x3xf32>
  %l = fsdp.cross_entropy %y, %t : (tensor<4x3xf32>, tensor<4xi32>) -> tensor<f32>
  return %l : tensor<f32>
}
