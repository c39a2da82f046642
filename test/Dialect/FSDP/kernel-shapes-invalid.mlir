// The shape rules of the kernel table (FSDPKernels.td's `shapes`,
// `dimChecks` and `derive`), as KernelOpInterface's verifier reads them for
// every op that lowers to a kernel: one case per kind of rule and per
// error it gives. invalid.mlir has each op's cases.
// RUN: fsdp-opt %s -split-input-file -verify-diagnostics

// A pattern's rank: [OC, IC] is rank 2.
func.func @f(%x: tensor<2x8xf32>, %w: tensor<16xf32>) {
  // expected-error @+1 {{inconsistent shapes: weight is [16], not [OC, IC] (IC = 8)}}
  %0 = fsdp.linear %x, %w : (tensor<2x8xf32>, tensor<16xf32>) -> tensor<2x16xf32>
  return
}

// -----

// A leading-dims pattern needs rank >= 1.
func.func @f(%x: tensor<f32>, %w: tensor<8xf32>) {
  // expected-error @+1 {{inconsistent shapes: input is [], not [*R, C]}}
  %0, %1 = fsdp.rms_norm %x, %w : (tensor<f32>, tensor<8xf32>) -> (tensor<f32>, tensor<f32>)
  return
}

// -----

// A dim bound by an earlier operand: IC is the input's last dim.
func.func @f(%x: tensor<2x8xf32>, %w: tensor<16x4xf32>) {
  // expected-error @+1 {{inconsistent shapes: weight is [16, 4], not [OC, IC] (OC = 16, IC = 8)}}
  %0 = fsdp.linear %x, %w : (tensor<2x8xf32>, tensor<16x4xf32>) -> tensor<2x16xf32>
  return
}

// -----

// A repeated leading-dims list: [*R, C] again is the same R exactly.
func.func @f(%x: tensor<2x4x8xf32>, %w: tensor<8xf32>) {
  // expected-error @+1 {{inconsistent shapes: result is [4, 2, 8], not [*R, C] (R = [2, 4], C = 8)}}
  %0, %1 = fsdp.rms_norm %x, %w : (tensor<2x4x8xf32>, tensor<8xf32>) -> (tensor<4x2x8xf32>, tensor<2x4xf32>)
  return
}

// -----

// An element count: #C is C elements.
func.func @f(%x: tensor<2x8xf32>, %w: tensor<4xf32>) {
  // expected-error @+1 {{inconsistent shapes: weight is [4], not #C (C = 8)}}
  %0, %1 = fsdp.rms_norm %x, %w : (tensor<2x8xf32>, tensor<4xf32>) -> (tensor<2x8xf32>, tensor<2xf32>)
  return
}

// -----

// The IR's reading of a count of a single dim: #C is [C] (a tensor type
// spells out what a plan's flat buffer only counts).
func.func @f(%x: tensor<2x8xf32>, %w: tensor<2x4xf32>) {
  // expected-error @+1 {{inconsistent shapes: weight is [2, 4], not [C] (C = 8)}}
  %0, %1 = fsdp.rms_norm %x, %w : (tensor<2x8xf32>, tensor<2x4xf32>) -> (tensor<2x8xf32>, tensor<2xf32>)
  return
}

// -----

// The IR's reading of a count of leading dims: #R is [*R], the input's
// leading dims exactly.
func.func @f(%x: tensor<2x4x8xf32>, %w: tensor<8xf32>) {
  // expected-error @+1 {{inconsistent shapes: rstd is [8], not [*R] (R = [2, 4])}}
  %0, %1 = fsdp.rms_norm %x, %w : (tensor<2x4x8xf32>, tensor<8xf32>) -> (tensor<2x4x8xf32>, tensor<8xf32>)
  return
}

// -----

// The IR's reading of leading dims by their product: [#N, OC] is
// [*N, OC], the input's rows as they are.
func.func @f(%x: tensor<2x4x8xf32>, %w: tensor<16x8xf32>) {
  // expected-error @+1 {{inconsistent shapes: result is [8, 16], not [*N, OC] (N = [2, 4], OC = 16)}}
  %0 = fsdp.linear %x, %w : (tensor<2x4x8xf32>, tensor<16x8xf32>) -> tensor<8x16xf32>
  return
}

// -----

// The IR's reading of a count by an unbound dim: cast's #N and #N are
// one shape.
func.func @f(%x: tensor<2x8xf32>) {
  // expected-error @+1 {{inconsistent shapes: result is [4, 4], not [*N] (N = [2, 8])}}
  %0 = fsdp.cast %x : tensor<2x8xf32> -> tensor<4x4xbf16>
  return
}

// -----

// A dim check comparing two dims.
func.func @f(%t: tensor<2x4xi32>, %wte: tensor<16x8xf32>, %wpe: tensor<3x8xf32>) {
  // expected-error @+1 {{inconsistent shapes (not P >= T: P = 3, T = 4)}}
  %0 = fsdp.embedding %t, %wte, %wpe : (tensor<2x4xi32>, tensor<16x8xf32>, tensor<3x8xf32>) -> tensor<2x4x8xf32>
  return
}

// -----

// A dim check against zero: a kernel divides by the width.
func.func @f(%x: tensor<2x0xf32>, %w: tensor<0xf32>) {
  // expected-error @+1 {{inconsistent shapes (not C > 0: C = 0)}}
  %0, %1 = fsdp.rms_norm %x, %w : (tensor<2x0xf32>, tensor<0xf32>) -> (tensor<2x0xf32>, tensor<2xf32>)
  return
}

// -----

// A dim check against INT, what BLAS and CUDA grids index.
func.func @f(%logits: tensor<2147483648x2xf32>, %targets: tensor<2147483648xi32>) {
  // expected-error @+1 {{has a dimension past the 2^31 - 1 that BLAS takes and CUDA grids index (not N <= INT: N = [2147483648])}}
  %0 = fsdp.cross_entropy %logits, %targets : (tensor<2147483648x2xf32>, tensor<2147483648xi32>) -> tensor<f32>
  return
}

// -----

// Attention's head counts: qkv is (heads + 2 kv_heads) hs wide.
func.func @f(%qkv: tensor<2x4x20xf32>) {
  // expected-error @+1 {{inconsistent shapes or head count: qkv [B, T, W] needs W = (heads + 2 kv_heads) hs with kv_heads dividing heads (W = 20, heads = 4, kv_heads = 2)}}
  %0, %1 = fsdp.attention %qkv {heads = 4 : i64, kv_heads = 2 : i64} : (tensor<2x4x20xf32>) -> (tensor<2x4x8xf32>, tensor<2x4x4x4xf32>)
  return
}

// -----

// Attention's kv_heads divides heads.
func.func @f(%qkv: tensor<2x4x40xf32>) {
  // expected-error @+1 {{inconsistent shapes or head count: qkv [B, T, W] needs W = (heads + 2 kv_heads) hs with kv_heads dividing heads (W = 40, heads = 4, kv_heads = 3)}}
  %0, %1 = fsdp.attention %qkv {heads = 4 : i64, kv_heads = 3 : i64} : (tensor<2x4x40xf32>) -> (tensor<2x4x16xf32>, tensor<2x4x4x4xf32>)
  return
}

// -----

// A rule over derived dims, checked after the derivation: C = heads hs.
func.func @f(%qkv: tensor<2x4x24xf32>) {
  // expected-error @+1 {{inconsistent shapes: result is [2, 4, 24], not [B, T, C] (B = 2, T = 4, C = 8)}}
  %0, %1 = fsdp.attention %qkv {heads = 2 : i64} : (tensor<2x4x24xf32>) -> (tensor<2x4x24xf32>, tensor<2x2x4x4xf32>)
  return
}

// -----

// Rope's head size is even; kv_heads falls back to heads and theta to its
// default, as the lowering stores them.
func.func @f(%qkv: tensor<1x4x18xf32>) {
  // expected-error @+1 {{inconsistent shapes or head counts: qkv [B, T, W] needs W = (heads + 2 kv_heads) hs with hs even, theta positive and finite, and a valid scaling (W = 18, heads = 2, kv_heads = 2, theta = 10000)}}
  %0 = fsdp.rope %qkv {heads = 2 : i64} : (tensor<1x4x18xf32>) -> tensor<1x4x18xf32>
  return
}

// -----

// Rope's theta is positive and finite.
func.func @f(%qkv: tensor<1x4x24xf32>) {
  // expected-error @+1 {{has a theta that is not positive and finite: qkv [B, T, W] needs W = (heads + 2 kv_heads) hs with hs even, theta positive and finite, and a valid scaling (W = 24, heads = 2, kv_heads = 2, theta = -1)}}
  %0 = fsdp.rope %qkv {heads = 2 : i64, theta = -1.0 : f32} : (tensor<1x4x24xf32>) -> tensor<1x4x24xf32>
  return
}

// -----

// A mixture-of-experts router chooses K of its E experts: K <= E (2
// experts, 3 choices a token).
func.func @f(%logits: tensor<2x4x2xf32>) {
  // expected-error @+1 {{inconsistent shapes (not E >= K: E = 2, K = 3)}}
  %w, %e = fsdp.moe_router %logits : (tensor<2x4x2xf32>) -> (tensor<2x4x3xf32>, tensor<2x4x3xi32>)
  return
}

// -----

// A dim check against a literal: the router's kernels keep at most 64
// choices a token (65 of 65 experts).
func.func @f(%logits: tensor<2x65xf32>) {
  // expected-error @+1 {{inconsistent shapes (not 64 >= K: K = 65)}}
  %w, %e = fsdp.moe_router %logits : (tensor<2x65xf32>) -> (tensor<2x65xf32>, tensor<2x65xi32>)
  return
}

// -----

// The router's weights and choices have one shape: K is bound by the
// first of them.
func.func @f(%logits: tensor<2x4x8xf32>) {
  // expected-error @+1 {{inconsistent shapes: experts is [2, 4, 3], not [*R, K] (R = [2, 4], K = 2)}}
  %w, %e = fsdp.moe_router %logits : (tensor<2x4x8xf32>) -> (tensor<2x4x2xf32>, tensor<2x4x3xi32>)
  return
}

// -----

// The router's derivation (MoeRouter) checks its parameters: scale is
// positive and finite (scoring and normalize are their attributes' 0 or 1).
func.func @f(%logits: tensor<2x4x8xf32>) {
  // expected-error @+1 {{has a scoring, normalize or scale out of range (0 or 1, 0 or 1, positive and finite)}}
  %w, %e = fsdp.moe_router %logits {scale = 0.0} : (tensor<2x4x8xf32>) -> (tensor<2x4x2xf32>, tensor<2x4x2xi32>)
  return
}

// -----

// A sort's derivation (MoeSort): E from num_experts, the offsets E + 1.
func.func @f(%e: tensor<2x4x2xi32>) {
  // expected-error @+1 {{inconsistent shapes: offsets is [8], not [E1] (E1 = 9)}}
  %o, %p, %off = fsdp.moe_sort %e {num_experts = 8} : (tensor<2x4x2xi32>) -> (tensor<2x4x2xi32>, tensor<2x4x2xi32>, tensor<8xi32>)
  return
}

// -----

// num_experts is a whole number in [1, 2^24].
func.func @f(%e: tensor<2x4x2xi32>) {
  // expected-error @+1 {{inconsistent shapes or expert count}}
  %o, %p, %off = fsdp.moe_sort %e {num_experts = 0} : (tensor<2x4x2xi32>) -> (tensor<2x4x2xi32>, tensor<2x4x2xi32>, tensor<1xi32>)
  return
}

// -----

// The derivation over the sorted pairs (MoeRows): P = R K rows, one per
// (token, choice) pair (8 tokens, 2 choices).
func.func @f(%x: tensor<2x4x6xf32>, %order: tensor<2x4x2xi32>) {
  // expected-error @+1 {{inconsistent shapes: result is [15, 6], not [P, C] (P = 16, C = 6)}}
  %r = fsdp.moe_permute %x, %order : (tensor<2x4x6xf32>, tensor<2x4x2xi32>) -> tensor<15x6xf32>
  return
}

// -----

// MoeRows binds E1 = E + 1 from a grouped linear's weight: the offsets of
// a sort over 4 experts do not fit a weight of 8.
func.func @f(%x: tensor<16x6xf32>, %w: tensor<8x12x6xf32>, %offsets: tensor<5xi32>) {
  // expected-error @+1 {{inconsistent shapes: offsets is [5], not [E1] (E1 = 9)}}
  %r = fsdp.moe_grouped_linear %x, %w, %offsets : (tensor<16x6xf32>, tensor<8x12x6xf32>, tensor<5xi32>) -> tensor<16x12xf32>
  return
}

// -----

// A rule over a derived dim, checked after the derivation: combine's rows
// are P = R K, bound from the weights after them.
func.func @f(%rows: tensor<15x6xf32>, %w: tensor<2x4x2xf32>, %position: tensor<2x4x2xi32>) {
  // expected-error @+1 {{inconsistent shapes: rows is [15, 6], not [P, C] (P = 16, C = 6)}}
  %r = fsdp.moe_combine %rows, %w, %position : (tensor<15x6xf32>, tensor<2x4x2xf32>, tensor<2x4x2xi32>) -> tensor<2x4x6xf32>
  return
}

// -----

// Combine's weights and positions are one router's and one sort's, of the
// same tokens in the same shape.
func.func @f(%rows: tensor<16x6xf32>, %w: tensor<2x4x2xf32>, %position: tensor<4x2x2xi32>) {
  // expected-error @+1 {{inconsistent shapes: position is [4, 2, 2], not [*R, K] (R = [2, 4], K = 2)}}
  %r = fsdp.moe_combine %rows, %w, %position : (tensor<16x6xf32>, tensor<2x4x2xf32>, tensor<4x2x2xi32>) -> tensor<2x4x6xf32>
  return
}
