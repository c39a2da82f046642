// DeepSeek-V3's form of the mixture-of-experts block (docs/moe.md): a
// sigmoid router whose per-expert selection bias chooses but never weighs
// (no gradient: its slot holds its load signal, and gradcheck skips it),
// the chosen sigmoids renormalised and scaled by 2.5, and a shared expert
// over every token beside the routed ones; through the runtime.
// RUN: fsdp-opt %s --fsdp-train-pipeline -o %t.plan
// RUN: fsdp-gradcheck %t.plan | FileCheck %s
// CHECK: gradcheck: w_router {{.*}} ok
// CHECK: gradcheck: bias selection bias: no gradient, skipped
// CHECK: gradcheck: w_gate {{.*}} ok
// CHECK: gradcheck: w_shared_gate {{.*}} ok
// CHECK: gradcheck: 9 passed, 0 failed
fsdp.param @w_in : tensor<6x6xf32> init <normal, std = 0.5>
fsdp.param @w_router : tensor<4x6xf32> init <normal, std = 1.0>
fsdp.param @bias : tensor<4xf32> init <normal, std = 0.3> no_weight_decay selection_bias 1.000000e-03
fsdp.param @w_gate : tensor<4x8x6xf32> init <normal, std = 0.8>
fsdp.param @w_up : tensor<4x8x6xf32> init <normal, std = 0.5>
fsdp.param @w_down : tensor<4x6x8xf32> init <normal, std = 0.5>
fsdp.param @w_shared_gate : tensor<8x6xf32> init <normal, std = 0.8>
fsdp.param @w_shared_up : tensor<8x6xf32> init <normal, std = 0.5>
fsdp.param @w_shared_down : tensor<6x8xf32> init <normal, std = 0.5>
fsdp.param @w_out : tensor<5x6xf32> init <normal, std = 0.5>
func.func @forward(%x: tensor<2x3x6xf32>, %t: tensor<2x3xi32>) -> tensor<f32> attributes {fsdp.forward} {
  %wi = fsdp.load @w_in : tensor<6x6xf32>
  %wr = fsdp.load @w_router : tensor<4x6xf32>
  %b = fsdp.load @bias : tensor<4xf32>
  %wg = fsdp.load @w_gate : tensor<4x8x6xf32>
  %wu = fsdp.load @w_up : tensor<4x8x6xf32>
  %wd = fsdp.load @w_down : tensor<4x6x8xf32>
  %sg = fsdp.load @w_shared_gate : tensor<8x6xf32>
  %su = fsdp.load @w_shared_up : tensor<8x6xf32>
  %sd = fsdp.load @w_shared_down : tensor<6x8xf32>
  %wo = fsdp.load @w_out : tensor<5x6xf32>
  %h = fsdp.linear %x, %wi : (tensor<2x3x6xf32>, tensor<6x6xf32>) -> tensor<2x3x6xf32>
  %logits = fsdp.linear %h, %wr : (tensor<2x3x6xf32>, tensor<4x6xf32>) -> tensor<2x3x4xf32>
  %w, %e = fsdp.moe_router %logits, %b {scoring = #fsdp.moe_scoring<sigmoid>, scale = 2.5 : f64} : (tensor<2x3x4xf32>, tensor<4xf32>) -> (tensor<2x3x2xf32>, tensor<2x3x2xi32>)
  %order, %position, %offsets = fsdp.moe_sort %e {num_experts = 4} : (tensor<2x3x2xi32>) -> (tensor<2x3x2xi32>, tensor<2x3x2xi32>, tensor<5xi32>)
  %xs = fsdp.moe_permute %h, %order : (tensor<2x3x6xf32>, tensor<2x3x2xi32>) -> tensor<12x6xf32>
  %gate = fsdp.moe_grouped_linear %xs, %wg, %offsets : (tensor<12x6xf32>, tensor<4x8x6xf32>, tensor<5xi32>) -> tensor<12x8xf32>
  %up = fsdp.moe_grouped_linear %xs, %wu, %offsets : (tensor<12x6xf32>, tensor<4x8x6xf32>, tensor<5xi32>) -> tensor<12x8xf32>
  %a = fsdp.swiglu %gate, %up : (tensor<12x8xf32>, tensor<12x8xf32>) -> tensor<12x8xf32>
  %ys = fsdp.moe_grouped_linear %a, %wd, %offsets : (tensor<12x8xf32>, tensor<4x6x8xf32>, tensor<5xi32>) -> tensor<12x6xf32>
  %y = fsdp.moe_combine %ys, %w, %position : (tensor<12x6xf32>, tensor<2x3x2xf32>, tensor<2x3x2xi32>) -> tensor<2x3x6xf32>
  %g2 = fsdp.linear %h, %sg : (tensor<2x3x6xf32>, tensor<8x6xf32>) -> tensor<2x3x8xf32>
  %u2 = fsdp.linear %h, %su : (tensor<2x3x6xf32>, tensor<8x6xf32>) -> tensor<2x3x8xf32>
  %a2 = fsdp.swiglu %g2, %u2 : (tensor<2x3x8xf32>, tensor<2x3x8xf32>) -> tensor<2x3x8xf32>
  %s = fsdp.linear %a2, %sd : (tensor<2x3x8xf32>, tensor<6x8xf32>) -> tensor<2x3x6xf32>
  %ys2 = fsdp.add %y, %s : tensor<2x3x6xf32>
  %r = fsdp.add %h, %ys2 : tensor<2x3x6xf32>
  %o = fsdp.linear %r, %wo : (tensor<2x3x6xf32>, tensor<5x6xf32>) -> tensor<2x3x5xf32>
  %l = fsdp.cross_entropy %o, %t : (tensor<2x3x5xf32>, tensor<2x3xi32>) -> tensor<f32>
  return %l : tensor<f32>
}
