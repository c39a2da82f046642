// fsdp.attention (causal, 3 heads; and grouped-query, 4 heads sharing 2 kv
// heads), through the runtime, in both forms.
// RUN: fsdp-opt %s --fsdp-train-pipeline=attention=materialized -o %t.plan
// RUN: fsdp-gradcheck %t.plan | FileCheck %s
// RUN: fsdp-opt %s --fsdp-train-pipeline=attention=blocked -o %t.blocked.plan
// RUN: %python %S/../Inputs/plan_tool.py dump %t.blocked.plan | FileCheck %s --check-prefix=BLOCKED
// RUN: fsdp-gradcheck %t.blocked.plan | FileCheck %s
// BLOCKED: attention_blocked
// BLOCKED: attention_blocked {{.*}} params=4,2
// BLOCKED: attention_backward_blocked {{.*}} params=4,2
// BLOCKED: attention_backward_blocked {{.*}} params=3,3
// CHECK-DAG: gradcheck: qkv {{.*}} ok
// CHECK-DAG: gradcheck: gqa {{.*}} ok
// CHECK: gradcheck: 6 passed, 0 failed
fsdp.param @qkv : tensor<18x5xf32> init <normal, std = 0.5>
fsdp.param @qkv_b : tensor<18xf32> init <normal, std = 0.5>
fsdp.param @out : tensor<7x6xf32> init <normal, std = 0.5>
// q: 4 heads of 2 channels, then k and v: 2 heads each (8 + 2 * 2 * 2).
fsdp.param @gqa : tensor<16x5xf32> init <normal, std = 0.5>
fsdp.param @gqa_b : tensor<16xf32> init <normal, std = 0.5>
fsdp.param @gqa_out : tensor<7x8xf32> init <normal, std = 0.5>
func.func @forward(%x: tensor<2x5x5xf32>, %t: tensor<2x5xi32>) -> tensor<f32> attributes {fsdp.forward} {
  %w = fsdp.load @qkv : tensor<18x5xf32>
  %b = fsdp.load @qkv_b : tensor<18xf32>
  %o = fsdp.load @out : tensor<7x6xf32>
  %q = fsdp.linear %x, %w, %b : (tensor<2x5x5xf32>, tensor<18x5xf32>, tensor<18xf32>) -> tensor<2x5x18xf32>
  %a, %p = fsdp.attention %q {heads = 3 : i64} : (tensor<2x5x18xf32>) -> (tensor<2x5x6xf32>, tensor<2x3x5x5xf32>)
  %y = fsdp.linear %a, %o : (tensor<2x5x6xf32>, tensor<7x6xf32>) -> tensor<2x5x7xf32>
  %gw = fsdp.load @gqa : tensor<16x5xf32>
  %gb = fsdp.load @gqa_b : tensor<16xf32>
  %go = fsdp.load @gqa_out : tensor<7x8xf32>
  %gq = fsdp.linear %x, %gw, %gb : (tensor<2x5x5xf32>, tensor<16x5xf32>, tensor<16xf32>) -> tensor<2x5x16xf32>
  %ga, %gp = fsdp.attention %gq {heads = 4 : i64, kv_heads = 2 : i64} : (tensor<2x5x16xf32>) -> (tensor<2x5x8xf32>, tensor<2x4x5x5xf32>)
  %gy = fsdp.linear %ga, %go : (tensor<2x5x8xf32>, tensor<7x8xf32>) -> tensor<2x5x7xf32>
  %s = fsdp.add %y, %gy : tensor<2x5x7xf32>
  %l = fsdp.cross_entropy %s, %t : (tensor<2x5x7xf32>, tensor<2x5xi32>) -> tensor<f32>
  return %l : tensor<f32>
}
