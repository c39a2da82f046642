// A mixture-of-experts block (docs/moe.md) with the load-balancing loss:
// a router over 4 experts choosing 2 a token (softmax, not renormalised),
// the pairs sorted by expert, each expert a SwiGLU of its own weights
// through grouped linears, the rows combined back by the router's
// weights, and the balancing loss over two layers' statistics (the same
// router logits twice, so that the sum's gradient passes through) added to
// the cross-entropy; through the runtime. The router's gradient then has
// three sources: the combine's weights and both statistics.
// RUN: fsdp-opt %s --fsdp-train-pipeline -o %t.plan
// RUN: fsdp-gradcheck %t.plan | FileCheck %s
// CHECK: gradcheck: w_in {{.*}} ok
// CHECK: gradcheck: w_router {{.*}} ok
// CHECK: gradcheck: w_gate {{.*}} ok
// CHECK: gradcheck: w_up {{.*}} ok
// CHECK: gradcheck: w_down {{.*}} ok
// CHECK: gradcheck: 6 passed, 0 failed
fsdp.param @w_in : tensor<6x6xf32> init <normal, std = 0.5>
fsdp.param @w_router : tensor<4x6xf32> init <normal, std = 1.0>
fsdp.param @w_gate : tensor<4x8x6xf32> init <normal, std = 0.8>
fsdp.param @w_up : tensor<4x8x6xf32> init <normal, std = 0.5>
fsdp.param @w_down : tensor<4x6x8xf32> init <normal, std = 0.5>
fsdp.param @w_out : tensor<5x6xf32> init <normal, std = 0.5>
func.func @forward(%x: tensor<2x3x6xf32>, %t: tensor<2x3xi32>) -> tensor<f32> attributes {fsdp.forward} {
  %wi = fsdp.load @w_in : tensor<6x6xf32>
  %wr = fsdp.load @w_router : tensor<4x6xf32>
  %wg = fsdp.load @w_gate : tensor<4x8x6xf32>
  %wu = fsdp.load @w_up : tensor<4x8x6xf32>
  %wd = fsdp.load @w_down : tensor<4x6x8xf32>
  %wo = fsdp.load @w_out : tensor<5x6xf32>
  %h = fsdp.linear %x, %wi : (tensor<2x3x6xf32>, tensor<6x6xf32>) -> tensor<2x3x6xf32>
  %logits = fsdp.linear %h, %wr : (tensor<2x3x6xf32>, tensor<4x6xf32>) -> tensor<2x3x4xf32>
  %w, %e = fsdp.moe_router %logits {normalize = false} : (tensor<2x3x4xf32>) -> (tensor<2x3x2xf32>, tensor<2x3x2xi32>)
  %order, %position, %offsets = fsdp.moe_sort %e {num_experts = 4} : (tensor<2x3x2xi32>) -> (tensor<2x3x2xi32>, tensor<2x3x2xi32>, tensor<5xi32>)
  %xs = fsdp.moe_permute %h, %order : (tensor<2x3x6xf32>, tensor<2x3x2xi32>) -> tensor<12x6xf32>
  %gate = fsdp.moe_grouped_linear %xs, %wg, %offsets : (tensor<12x6xf32>, tensor<4x8x6xf32>, tensor<5xi32>) -> tensor<12x8xf32>
  %up = fsdp.moe_grouped_linear %xs, %wu, %offsets : (tensor<12x6xf32>, tensor<4x8x6xf32>, tensor<5xi32>) -> tensor<12x8xf32>
  %a = fsdp.swiglu %gate, %up : (tensor<12x8xf32>, tensor<12x8xf32>) -> tensor<12x8xf32>
  %ys = fsdp.moe_grouped_linear %a, %wd, %offsets : (tensor<12x8xf32>, tensor<4x6x8xf32>, tensor<5xi32>) -> tensor<12x6xf32>
  %y = fsdp.moe_combine %ys, %w, %position : (tensor<12x6xf32>, tensor<2x3x2xf32>, tensor<2x3x2xi32>) -> tensor<2x3x6xf32>
  %r = fsdp.add %h, %y : tensor<2x3x6xf32>
  %o = fsdp.linear %r, %wo : (tensor<2x3x6xf32>, tensor<5x6xf32>) -> tensor<2x3x5xf32>
  %ce = fsdp.cross_entropy %o, %t : (tensor<2x3x5xf32>, tensor<2x3xi32>) -> tensor<f32>
  %s0 = fsdp.moe_aux_stats %logits, %e : (tensor<2x3x4xf32>, tensor<2x3x2xi32>) -> tensor<2x4xf32>
  %s1 = fsdp.moe_aux_stats %logits, %e, %s0 : (tensor<2x3x4xf32>, tensor<2x3x2xi32>, tensor<2x4xf32>) -> tensor<2x4xf32>
  %l = fsdp.moe_aux_loss %s1, %ce {top_k = 2 : i64, coef = 20.0 : f64} : (tensor<2x4xf32>, tensor<f32>) -> tensor<f32>
  return %l : tensor<f32>
}
