// A one-block Llama-shaped model over bytes (RMSNorm, rope, attention,
// SwiGLU, linears without bias, an untied head): C = 16, 2 heads of 8,
// T = 8, B = 12; a token embedding without positions (rope gives them).
// Inputs of Runtime/llama-ops-train.test.
fsdp.param @wte : tensor<256x16xf32> init <normal, std = 0.02>
fsdp.param @h.0.attn_norm.w : tensor<16xf32> init <ones> no_weight_decay
fsdp.param @h.0.attn.qkv.w : tensor<48x16xf32> init <normal, std = 0.1>
fsdp.param @h.0.attn.o.w : tensor<16x16xf32> init <normal, std = 0.1>
fsdp.param @h.0.mlp_norm.w : tensor<16xf32> init <ones> no_weight_decay
fsdp.param @h.0.mlp.gate.w : tensor<32x16xf32> init <normal, std = 0.1>
fsdp.param @h.0.mlp.up.w : tensor<32x16xf32> init <normal, std = 0.1>
fsdp.param @h.0.mlp.down.w : tensor<16x32xf32> init <normal, std = 0.1>
fsdp.param @norm.w : tensor<16xf32> init <ones> no_weight_decay
fsdp.param @head.w : tensor<256x16xf32> init <normal, std = 0.02>
func.func @forward(%tokens: tensor<12x8xi32>, %targets: tensor<12x8xi32>) -> tensor<f32> attributes {fsdp.forward} {
  %wte = fsdp.load @wte : tensor<256x16xf32>
  %x = fsdp.embedding %tokens, %wte : (tensor<12x8xi32>, tensor<256x16xf32>) -> tensor<12x8x16xf32>
  %an = fsdp.load @h.0.attn_norm.w : tensor<16xf32>
  %n1, %r1 = fsdp.rms_norm %x, %an {epsilon = 1.0e-5 : f32} : (tensor<12x8x16xf32>, tensor<16xf32>) -> (tensor<12x8x16xf32>, tensor<12x8xf32>)
  %wqkv = fsdp.load @h.0.attn.qkv.w : tensor<48x16xf32>
  %qkv = fsdp.linear %n1, %wqkv : (tensor<12x8x16xf32>, tensor<48x16xf32>) -> tensor<12x8x48xf32>
  %rq = fsdp.rope %qkv {heads = 2 : i64} : (tensor<12x8x48xf32>) -> tensor<12x8x48xf32>
  %a, %lse = fsdp.attention %rq {heads = 2 : i64} : (tensor<12x8x48xf32>) -> (tensor<12x8x16xf32>, tensor<12x2x8x8xf32>)
  %wo = fsdp.load @h.0.attn.o.w : tensor<16x16xf32>
  %ao = fsdp.linear %a, %wo : (tensor<12x8x16xf32>, tensor<16x16xf32>) -> tensor<12x8x16xf32>
  %x1 = fsdp.add %x, %ao : tensor<12x8x16xf32>
  %mn = fsdp.load @h.0.mlp_norm.w : tensor<16xf32>
  %n2, %r2 = fsdp.rms_norm %x1, %mn {epsilon = 1.0e-5 : f32} : (tensor<12x8x16xf32>, tensor<16xf32>) -> (tensor<12x8x16xf32>, tensor<12x8xf32>)
  %wg = fsdp.load @h.0.mlp.gate.w : tensor<32x16xf32>
  %wu = fsdp.load @h.0.mlp.up.w : tensor<32x16xf32>
  %wd = fsdp.load @h.0.mlp.down.w : tensor<16x32xf32>
  %g = fsdp.linear %n2, %wg : (tensor<12x8x16xf32>, tensor<32x16xf32>) -> tensor<12x8x32xf32>
  %u = fsdp.linear %n2, %wu : (tensor<12x8x16xf32>, tensor<32x16xf32>) -> tensor<12x8x32xf32>
  %h = fsdp.swiglu %g, %u : (tensor<12x8x32xf32>, tensor<12x8x32xf32>) -> tensor<12x8x32xf32>
  %d = fsdp.linear %h, %wd : (tensor<12x8x32xf32>, tensor<16x32xf32>) -> tensor<12x8x16xf32>
  %x2 = fsdp.add %x1, %d : tensor<12x8x16xf32>
  %nw = fsdp.load @norm.w : tensor<16xf32>
  %n3, %r3 = fsdp.rms_norm %x2, %nw {epsilon = 1.0e-5 : f32} : (tensor<12x8x16xf32>, tensor<16xf32>) -> (tensor<12x8x16xf32>, tensor<12x8xf32>)
  %wh = fsdp.load @head.w : tensor<256x16xf32>
  %logits = fsdp.linear %n3, %wh : (tensor<12x8x16xf32>, tensor<256x16xf32>) -> tensor<12x8x256xf32>
  %l = fsdp.cross_entropy %logits, %targets : (tensor<12x8x256xf32>, tensor<12x8xi32>) -> tensor<f32>
  return %l : tensor<f32>
}
