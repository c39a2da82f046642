// fsdp.attention (causal, 3 heads), through the runtime, in both forms.
// RUN: fsdp-opt %s --fsdp-train-pipeline=attention=materialized -o %t.plan
// RUN: fsdp-gradcheck %t.plan | FileCheck %s
// RUN: fsdp-opt %s --fsdp-train-pipeline=attention=blocked -o %t.blocked.plan
// RUN: %python %S/../Inputs/plan_tool.py dump %t.blocked.plan | FileCheck %s --check-prefix=BLOCKED
// RUN: fsdp-gradcheck %t.blocked.plan | FileCheck %s
// BLOCKED: attention_blocked
// BLOCKED: attention_backward_blocked
// CHECK: gradcheck: qkv {{.*}} ok
// CHECK: gradcheck: 3 passed, 0 failed
fsdp.param @qkv : tensor<18x5xf32> init <normal, std = 0.5>
fsdp.param @qkv_b : tensor<18xf32> init <normal, std = 0.5>
fsdp.param @out : tensor<7x6xf32> init <normal, std = 0.5>
func.func @forward(%x: tensor<2x5x5xf32>, %t: tensor<2x5xi32>) -> tensor<f32> attributes {fsdp.forward} {
  %w = fsdp.load @qkv : tensor<18x5xf32>
  %b = fsdp.load @qkv_b : tensor<18xf32>
  %o = fsdp.load @out : tensor<7x6xf32>
  %q = fsdp.linear %x, %w, %b : (tensor<2x5x5xf32>, tensor<18x5xf32>, tensor<18xf32>) -> tensor<2x5x18xf32>
  %a, %p = fsdp.attention %q {heads = 3 : i64} : (tensor<2x5x18xf32>) -> (tensor<2x5x6xf32>, tensor<2x3x5x5xf32>)
  %y = fsdp.linear %a, %o : (tensor<2x5x6xf32>, tensor<7x6xf32>) -> tensor<2x5x7xf32>
  %l = fsdp.cross_entropy %y, %t : (tensor<2x5x7xf32>, tensor<2x5xi32>) -> tensor<f32>
  return %l : tensor<f32>
}
