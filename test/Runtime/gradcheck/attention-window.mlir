// fsdp.attention with a sliding window (Mistral's): 3 heads seeing 10 keys
// each, and grouped-query (4 heads sharing 2 kv heads) seeing 3, at
// T = 140, through the runtime, in both forms. At T = 140 the blocked
// kernels skip the key blocks wholly outside a query block's window (the
// rows from 128 on never visit keys 0..63), so the skipping is under the
// finite differences too.
// RUN: fsdp-opt %s --fsdp-train-pipeline=attention=materialized -o %t.plan
// RUN: %python %S/../Inputs/plan_tool.py dump %t.plan | FileCheck %s --check-prefix=MAT
// RUN: fsdp-gradcheck %t.plan | FileCheck %s
// RUN: fsdp-opt %s --fsdp-train-pipeline=attention=blocked -o %t.blocked.plan
// RUN: %python %S/../Inputs/plan_tool.py dump %t.blocked.plan | FileCheck %s --check-prefix=BLOCKED
// RUN: fsdp-gradcheck %t.blocked.plan | FileCheck %s
// The plans carry the window as the attention kernels' third parameter.
// MAT: attention {{.*}} params=3,3,10
// MAT: attention {{.*}} params=4,2,3
// MAT: attention_backward {{.*}} params=4,2,3
// MAT: attention_backward {{.*}} params=3,3,10
// BLOCKED: attention_blocked {{.*}} params=3,3,10
// BLOCKED: attention_blocked {{.*}} params=4,2,3
// BLOCKED: attention_backward_blocked {{.*}} params=4,2,3
// BLOCKED: attention_backward_blocked {{.*}} params=3,3,10
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
func.func @forward(%x: tensor<2x140x5xf32>, %t: tensor<2x140xi32>) -> tensor<f32> attributes {fsdp.forward} {
  %w = fsdp.load @qkv : tensor<18x5xf32>
  %b = fsdp.load @qkv_b : tensor<18xf32>
  %o = fsdp.load @out : tensor<7x6xf32>
  %q = fsdp.linear %x, %w, %b : (tensor<2x140x5xf32>, tensor<18x5xf32>, tensor<18xf32>) -> tensor<2x140x18xf32>
  %a, %p = fsdp.attention %q {heads = 3 : i64, window = 10 : i64} : (tensor<2x140x18xf32>) -> (tensor<2x140x6xf32>, tensor<2x3x140x140xf32>)
  %y = fsdp.linear %a, %o : (tensor<2x140x6xf32>, tensor<7x6xf32>) -> tensor<2x140x7xf32>
  %gw = fsdp.load @gqa : tensor<16x5xf32>
  %gb = fsdp.load @gqa_b : tensor<16xf32>
  %go = fsdp.load @gqa_out : tensor<7x8xf32>
  %gq = fsdp.linear %x, %gw, %gb : (tensor<2x140x5xf32>, tensor<16x5xf32>, tensor<16xf32>) -> tensor<2x140x16xf32>
  %ga, %gp = fsdp.attention %gq {heads = 4 : i64, kv_heads = 2 : i64, window = 3 : i64} : (tensor<2x140x16xf32>) -> (tensor<2x140x8xf32>, tensor<2x4x140x140xf32>)
  %gy = fsdp.linear %ga, %go : (tensor<2x140x8xf32>, tensor<7x8xf32>) -> tensor<2x140x7xf32>
  %s = fsdp.add %y, %gy : tensor<2x140x7xf32>
  %l = fsdp.cross_entropy %s, %t : (tensor<2x140x7xf32>, tensor<2x140xi32>) -> tensor<f32>
  return %l : tensor<f32>
}
