// A small classifier whose parameters are laid out so that shard
// boundaries split both decay and no_weight_decay parameters at 2 and 3
// ranks (per-block units, parameters flattened in declaration order):
//   h.0 (30 elements): w [0,12) b [12,18) g [18,24) beta [24,30);
//     2 ranks split b at 15, 3 ranks split w at 10 and g at 20;
//   h.1 (42): w [0,36) b [36,42); 2 ranks split w at 21;
//   root (28): out.w [0,24) out.b [24,28).
// Global batch 6, so that 1, 2 and 3 ranks get equal rows.
fsdp.param @h.0.w : tensor<6x2xf32> init <normal, std = 0.5>
fsdp.param @h.0.b : tensor<6xf32> init <zeros> no_weight_decay
fsdp.param @h.0.g : tensor<6xf32> init <ones> no_weight_decay
fsdp.param @h.0.beta : tensor<6xf32> init <zeros> no_weight_decay
fsdp.param @h.1.w : tensor<6x6xf32> init <normal, std = 0.4>
fsdp.param @h.1.b : tensor<6xf32> init <zeros> no_weight_decay
fsdp.param @out.w : tensor<4x6xf32> init <normal, std = 0.4>
fsdp.param @out.b : tensor<4xf32> init <zeros> no_weight_decay
func.func @forward(%x: tensor<6x2xf32>, %t: tensor<6xi32>) -> tensor<f32> attributes {fsdp.forward} {
  %w0 = fsdp.load @h.0.w : tensor<6x2xf32>
  %b0 = fsdp.load @h.0.b : tensor<6xf32>
  %g0 = fsdp.load @h.0.g : tensor<6xf32>
  %beta0 = fsdp.load @h.0.beta : tensor<6xf32>
  %y0 = fsdp.linear %x, %w0, %b0 : (tensor<6x2xf32>, tensor<6x2xf32>, tensor<6xf32>) -> tensor<6x6xf32>
  %n0, %mean0, %rstd0 = fsdp.layer_norm %y0, %g0, %beta0 : (tensor<6x6xf32>, tensor<6xf32>, tensor<6xf32>) -> (tensor<6x6xf32>, tensor<6xf32>, tensor<6xf32>)
  %r0 = fsdp.relu %n0 : tensor<6x6xf32>
  %w1 = fsdp.load @h.1.w : tensor<6x6xf32>
  %b1 = fsdp.load @h.1.b : tensor<6xf32>
  %y1 = fsdp.linear %r0, %w1, %b1 : (tensor<6x6xf32>, tensor<6x6xf32>, tensor<6xf32>) -> tensor<6x6xf32>
  %r1 = fsdp.gelu %y1 : tensor<6x6xf32>
  %w2 = fsdp.load @out.w : tensor<4x6xf32>
  %b2 = fsdp.load @out.b : tensor<4xf32>
  %y2 = fsdp.linear %r1, %w2, %b2 : (tensor<6x6xf32>, tensor<4x6xf32>, tensor<4xf32>) -> tensor<6x4xf32>
  %l = fsdp.cross_entropy %y2, %t : (tensor<6x4xf32>, tensor<6xi32>) -> tensor<f32>
  return %l : tensor<f32>
}
