// Every verifier rule of the fsdp dialect, one case each.
// RUN: fsdp-opt %s -split-input-file -verify-diagnostics

//===----------------------------------------------------------------------===//
// Initializers
//===----------------------------------------------------------------------===//

// expected-error @+1 {{normal initializer needs a positive finite std, got -1}}
fsdp.param @w : tensor<4xf32> init <normal, std = -1.0>

// -----

// expected-error @+1 {{unknown initializer 'uniform', expected zeros, ones or normal}}
fsdp.param @w : tensor<4xf32> init <uniform>

// -----

// expected-error @+1 {{'fsdp.param' op attribute 'type' failed to satisfy constraint: type attribute of statically shaped tensor of floating-point values}}
fsdp.param @w : tensor<?xf32> init <zeros>

// -----

// expected-error @+1 {{'fsdp.param' op attribute 'type' failed to satisfy constraint}}
fsdp.param @w : tensor<4xi32> init <zeros>

// -----

//===----------------------------------------------------------------------===//
// Parameters and units
//===----------------------------------------------------------------------===//

// expected-note @+1 {{see existing symbol definition here}}
fsdp.param @w : tensor<4xf32> init <zeros>
// expected-error @+1 {{redefinition of symbol named 'w'}}
fsdp.param @w : tensor<4xf32> init <ones>

// -----

func.func @f() {
  // expected-error @+1 {{'fsdp.param' op expects parent op 'builtin.module'}}
  fsdp.param @w : tensor<4xf32> init <zeros>
  return
}

// -----

// expected-error @+1 {{unit @u must contain at least one parameter}}
fsdp.unit @u params []

// -----

fsdp.param @w : tensor<4xf32> init <zeros>
// expected-error @+1 {{lists parameter @w more than once}}
fsdp.unit @u params [@w, @w]

// -----

fsdp.param @w : tensor<4xf32> init <zeros>
// expected-error @+1 {{keeps a shard copy in 'f16'; only bf16 copies are supported}}
fsdp.unit @u params [@w] {shard_copy = f16}

// -----

fsdp.param @w : tensor<4xf32> init <zeros>
// expected-error @+1 {{is expert-parallel and keeps a shard copy}}
fsdp.unit @u params [@w] {expert_parallel, shard_copy = bf16}

// -----

// expected-error @+1 {{refers to unknown parameter @missing}}
fsdp.unit @u params [@missing]

// -----

func.func private @f()
// expected-error @+1 {{lists @f, which is not an fsdp.param}}
fsdp.unit @u params [@f]

// -----

fsdp.param @a : tensor<4xf32> init <zeros>
fsdp.param @b : tensor<4xf32> init <zeros>
// expected-note @+1 {{first listed here}}
fsdp.unit @u0 params [@a]
// expected-error @+1 {{parameter @a is already in unit @u0}}
fsdp.unit @u1 params [@b, @a]

// -----

//===----------------------------------------------------------------------===//
// Loads
//===----------------------------------------------------------------------===//

func.func @f() {
  // expected-error @+1 {{refers to unknown parameter @missing}}
  %0 = fsdp.load @missing : tensor<4xf32>
  return
}

// -----

fsdp.param @w : tensor<4xf32> init <zeros>
func.func @f() {
  // expected-error @+1 {{result type 'tensor<8xf32>' does not match parameter @w of type 'tensor<4xf32>'}}
  %0 = fsdp.load @w : tensor<8xf32>
  return
}

// -----

fsdp.param @a : tensor<4xf32> init <zeros>
fsdp.param @b : tensor<4xf32> init <zeros>
fsdp.unit @ua params [@a]
fsdp.unit @ub params [@b]
func.func @f() {
  %0 = fsdp.compute @ua forward -> tensor<4xf32> {
    // expected-error @+1 {{loads @b, which is not in unit @ua of the enclosing fsdp.compute}}
    %1 = fsdp.load @b : tensor<4xf32>
    fsdp.yield %1 : tensor<4xf32>
  }
  return
}

// -----

//===----------------------------------------------------------------------===//
// Unit regions
//===----------------------------------------------------------------------===//

func.func @f() {
  // expected-error @+1 {{refers to unknown unit @nothere}}
  fsdp.compute @nothere forward {
    fsdp.yield
  }
  return
}

// -----

fsdp.param @w : tensor<4xf32> init <zeros>
func.func @f() {
  // expected-error @+1 {{refers to @w, which is not an fsdp.unit}}
  fsdp.compute @w forward {
    fsdp.yield
  }
  return
}

// -----

fsdp.param @w : tensor<4xf32> init <zeros>
fsdp.unit @u params [@w]
func.func @f() {
  fsdp.compute @u forward {
    // expected-error @+1 {{cannot be nested in another fsdp.compute}}
    fsdp.compute @u backward {
      fsdp.yield
    }
    fsdp.yield
  }
  return
}

// -----

fsdp.param @w : tensor<4xf32> init <zeros>
fsdp.unit @u params [@w]
func.func @f(%x: tensor<4xf32>) {
  // expected-error @+1 {{has 1 inputs but its body takes 0 arguments}}
  fsdp.compute @u forward ins(%x : tensor<4xf32>) {
  ^bb0:
    fsdp.yield
  }
  return
}

// -----

fsdp.param @w : tensor<4xf32> init <zeros>
fsdp.unit @u params [@w]
func.func @f(%x: tensor<4xf32>) {
  // expected-error @+1 {{input #0 has type 'tensor<4xf32>' but body argument #0 has type 'tensor<8xf32>'}}
  fsdp.compute @u forward ins(%x : tensor<4xf32>) {
  ^bb0(%a: tensor<8xf32>):
    fsdp.yield
  }
  return
}

// -----

fsdp.param @w : tensor<4xf32> init <zeros>
fsdp.unit @u params [@w]
func.func @f() {
  // expected-error @+1 {{yields 'tensor<4xf32>' but its results are 'tensor<8xf32>'}}
  %0 = fsdp.compute @u forward -> tensor<8xf32> {
    %1 = fsdp.load @w : tensor<4xf32>
    fsdp.yield %1 : tensor<4xf32>
  }
  return
}

// -----

fsdp.param @w : tensor<4xf32> init <zeros>
fsdp.unit @u params [@w]
func.func @f() {
  // expected-error @+1 {{expected phase forward or backward, got 'sideways'}}
  fsdp.compute @u sideways {
    fsdp.yield
  }
  return
}

// -----

func.func @f(%x: tensor<4xf32>) {
  // expected-error @+1 {{'fsdp.yield' op expects parent op 'fsdp.compute'}}
  fsdp.yield %x : tensor<4xf32>
}

// -----

//===----------------------------------------------------------------------===//
// The forward function
//===----------------------------------------------------------------------===//

// expected-error @+1 {{'fsdp.forward' function must return exactly one scalar loss (a 0-d float tensor such as tensor<f32>), but it returns 'tensor<4xf32>'}}
func.func @forward(%x: tensor<4xf32>) -> tensor<4xf32> attributes {fsdp.forward} {
  return %x : tensor<4xf32>
}

// -----

// expected-error @+1 {{'fsdp.forward' function must return exactly one scalar loss}}
func.func @forward(%x: tensor<f32>) -> (tensor<f32>, tensor<f32>) attributes {fsdp.forward} {
  return %x, %x : tensor<f32>, tensor<f32>
}

// -----

// expected-error @+1 {{'fsdp.train_step' function must return exactly one scalar loss}}
func.func @train_step(%x: tensor<i32>) -> tensor<i32> attributes {fsdp.train_step} {
  return %x : tensor<i32>
}

// -----

// expected-error @+1 {{'fsdp.forward' function input #0 must be a statically shaped tensor, got 'tensor<?xf32>'}}
func.func @forward(%x: tensor<?xf32>, %l: tensor<f32>) -> tensor<f32> attributes {fsdp.forward} {
  return %l : tensor<f32>
}

// -----

// expected-error @+1 {{'fsdp.forward' must be a unit attribute}}
func.func @forward(%l: tensor<f32>) -> tensor<f32> attributes {fsdp.forward = 1 : i32} {
  return %l : tensor<f32>
}

// -----

// expected-error @+1 {{'fsdp.forward' may only be attached to a func.func}}
module attributes {fsdp.forward} {
}

// -----

// expected-error @+1 {{unknown fsdp dialect attribute 'fsdp.backward'}}
func.func @forward(%l: tensor<f32>) -> tensor<f32> attributes {fsdp.backward} {
  return %l : tensor<f32>
}

// -----

//===----------------------------------------------------------------------===//
// Model ops
//===----------------------------------------------------------------------===//

func.func @f(%t: tensor<8xi32>, %wte: tensor<16x8xf32>, %wpe: tensor<4x8xf32>) {
  // expected-error @+1 {{inconsistent shapes: tokens is [8], not [B, T]}}
  %0 = fsdp.embedding %t, %wte, %wpe : (tensor<8xi32>, tensor<16x8xf32>, tensor<4x8xf32>) -> tensor<8x8xf32>
  return
}

// -----

func.func @f(%t: tensor<2x4xi32>, %wte: tensor<16x8xf32>, %wpe: tensor<4x8x1xf32>) {
  // expected-error @+1 {{inconsistent shapes: wpe is [4, 8, 1], not [P, C] (C = 8)}}
  %0 = fsdp.embedding %t, %wte, %wpe : (tensor<2x4xi32>, tensor<16x8xf32>, tensor<4x8x1xf32>) -> tensor<2x4x8xf32>
  return
}

// -----

func.func @f(%t: tensor<2x4xi32>, %wte: tensor<16x8xf32>, %wpe: tensor<4x8xbf16>) {
  // expected-error @+1 {{expects one element type for all float operands and results, got 'f32' and 'bf16'}}
  %0 = fsdp.embedding %t, %wte, %wpe : (tensor<2x4xi32>, tensor<16x8xf32>, tensor<4x8xbf16>) -> tensor<2x4x8xf32>
  return
}

// -----

func.func @f(%t: tensor<2x4xi32>, %wte: tensor<16x8xf32>, %wpe: tensor<4x6xf32>) {
  // expected-error @+1 {{inconsistent shapes: wpe is [4, 6], not [P, C] (P = 4, C = 8)}}
  %0 = fsdp.embedding %t, %wte, %wpe : (tensor<2x4xi32>, tensor<16x8xf32>, tensor<4x6xf32>) -> tensor<2x4x8xf32>
  return
}

// -----

func.func @f(%t: tensor<2x4xi32>, %wte: tensor<16x8xf32>, %wpe: tensor<3x8xf32>) {
  // expected-error @+1 {{inconsistent shapes (not P >= T: P = 3, T = 4)}}
  %0 = fsdp.embedding %t, %wte, %wpe : (tensor<2x4xi32>, tensor<16x8xf32>, tensor<3x8xf32>) -> tensor<2x4x8xf32>
  return
}

// -----

func.func @f(%t: tensor<2x4xi32>, %wte: tensor<16x8xf32>, %wpe: tensor<4x8xf32>) {
  // expected-error @+1 {{inconsistent shapes: result is [2, 4, 16], not [B, T, C] (B = 2, T = 4, C = 8)}}
  %0 = fsdp.embedding %t, %wte, %wpe : (tensor<2x4xi32>, tensor<16x8xf32>, tensor<4x8xf32>) -> tensor<2x4x16xf32>
  return
}

// -----

func.func @f(%t: tensor<2x4xf32>, %wte: tensor<16x8xf32>, %wpe: tensor<4x8xf32>) {
  // expected-error @+1 {{operand #0 must be statically shaped tensor of 32-bit signless integer values}}
  %0 = fsdp.embedding %t, %wte, %wpe : (tensor<2x4xf32>, tensor<16x8xf32>, tensor<4x8xf32>) -> tensor<2x4x8xf32>
  return
}

// -----

func.func @f(%x: tensor<2x8xf32>, %w: tensor<4xf32>, %b: tensor<8xf32>) {
  // expected-error @+1 {{inconsistent shapes: weight is [4], not #C (C = 8)}}
  %0:3 = fsdp.layer_norm %x, %w, %b : (tensor<2x8xf32>, tensor<4xf32>, tensor<8xf32>) -> (tensor<2x8xf32>, tensor<2xf32>, tensor<2xf32>)
  return
}

// -----

func.func @f(%x: tensor<2x8xf32>, %w: tensor<8xf32>, %b: tensor<2x8xf32>) {
  // expected-error @+1 {{inconsistent shapes: bias is [2, 8], not #C (C = 8)}}
  %0:3 = fsdp.layer_norm %x, %w, %b : (tensor<2x8xf32>, tensor<8xf32>, tensor<2x8xf32>) -> (tensor<2x8xf32>, tensor<2xf32>, tensor<2xf32>)
  return
}

// -----

func.func @f(%x: tensor<2x8xf32>, %w: tensor<8xf32>, %b: tensor<8xf32>) {
  // expected-error @+1 {{inconsistent shapes: result is [8, 2], not [*R, C] (R = [2], C = 8)}}
  %0:3 = fsdp.layer_norm %x, %w, %b : (tensor<2x8xf32>, tensor<8xf32>, tensor<8xf32>) -> (tensor<8x2xf32>, tensor<2xf32>, tensor<2xf32>)
  return
}

// -----

func.func @f(%x: tensor<2x8xf32>, %w: tensor<8xf32>, %b: tensor<8xf32>) {
  // expected-error @+1 {{inconsistent shapes: mean is [8], not #R (R = [2])}}
  %0:3 = fsdp.layer_norm %x, %w, %b : (tensor<2x8xf32>, tensor<8xf32>, tensor<8xf32>) -> (tensor<2x8xf32>, tensor<8xf32>, tensor<2xf32>)
  return
}

// -----

func.func @f(%x: tensor<2x8xf32>, %w: tensor<8xf32>, %b: tensor<8xf32>) {
  // expected-error @+1 {{inconsistent shapes: rstd is [3], not #R (R = [2])}}
  %0:3 = fsdp.layer_norm %x, %w, %b : (tensor<2x8xf32>, tensor<8xf32>, tensor<8xf32>) -> (tensor<2x8xf32>, tensor<2xf32>, tensor<3xf32>)
  return
}

// -----

func.func @f(%x: tensor<2x8xbf16>, %w: tensor<8xbf16>, %b: tensor<8xbf16>) {
  // expected-error @+1 {{result #1 (mean) must be f32, got 'tensor<2xbf16>'}}
  %0:3 = fsdp.layer_norm %x, %w, %b : (tensor<2x8xbf16>, tensor<8xbf16>, tensor<8xbf16>) -> (tensor<2x8xbf16>, tensor<2xbf16>, tensor<2xbf16>)
  return
}

// -----

func.func @f(%x: tensor<2x8xf32>, %w: tensor<8xf32>, %b: tensor<8xf32>) {
  // expected-error @+1 {{epsilon must be positive}}
  %0:3 = fsdp.layer_norm %x, %w, %b {epsilon = 0.0 : f32} : (tensor<2x8xf32>, tensor<8xf32>, tensor<8xf32>) -> (tensor<2x8xf32>, tensor<2xf32>, tensor<2xf32>)
  return
}

// -----

func.func @f(%x: tensor<f32>, %w: tensor<8xf32>, %b: tensor<8xf32>) {
  // expected-error @+1 {{inconsistent shapes: input is [], not [*R, C]}}
  %0:3 = fsdp.layer_norm %x, %w, %b : (tensor<f32>, tensor<8xf32>, tensor<8xf32>) -> (tensor<f32>, tensor<f32>, tensor<f32>)
  return
}

// -----

func.func @f(%x: tensor<4x8xf32>, %w: tensor<16xf32>) {
  // expected-error @+1 {{inconsistent shapes: weight is [16], not [OC, IC] (IC = 8)}}
  %0 = fsdp.linear %x, %w : (tensor<4x8xf32>, tensor<16xf32>) -> tensor<4x16xf32>
  return
}

// -----

func.func @f(%x: tensor<4x8xf32>, %w: tensor<16x4xf32>) {
  // expected-error @+1 {{inconsistent shapes: weight is [16, 4], not [OC, IC] (OC = 16, IC = 8)}}
  %0 = fsdp.linear %x, %w : (tensor<4x8xf32>, tensor<16x4xf32>) -> tensor<4x16xf32>
  return
}

// -----

func.func @f(%x: tensor<4x8xf32>, %w: tensor<16x8xf32>, %b: tensor<8xf32>) {
  // expected-error @+1 {{inconsistent shapes: bias is [8], not #OC (OC = 16)}}
  %0 = fsdp.linear %x, %w, %b : (tensor<4x8xf32>, tensor<16x8xf32>, tensor<8xf32>) -> tensor<4x16xf32>
  return
}

// -----

func.func @f(%x: tensor<2x4x8xf32>, %w: tensor<16x8xf32>) {
  // expected-error @+1 {{inconsistent shapes: result is [8, 16], not [*N, OC] (N = [2, 4], OC = 16)}}
  %0 = fsdp.linear %x, %w : (tensor<2x4x8xf32>, tensor<16x8xf32>) -> tensor<8x16xf32>
  return
}

// -----

func.func @f(%x: tensor<4x8xf32>, %w: tensor<16x8xbf16>) {
  // expected-error @+1 {{expects one element type for all float operands and results}}
  %0 = fsdp.linear %x, %w : (tensor<4x8xf32>, tensor<16x8xbf16>) -> tensor<4x16xf32>
  return
}

// -----

func.func @f(%a: tensor<4xf32>, %b: tensor<8xf32>) {
  // expected-error @+1 {{requires the same type for all operands and results}}
  %0 = "fsdp.add"(%a, %b) : (tensor<4xf32>, tensor<8xf32>) -> tensor<4xf32>
  return
}

// -----

func.func @f(%x: tensor<2x4x20xf32>) {
  // expected-error @+1 {{inconsistent shapes or head count: qkv [B, T, W] needs W = (heads + 2 kv_heads) hs with kv_heads dividing heads (W = 20, heads = 2, kv_heads = 2)}}
  %0:2 = fsdp.attention %x {heads = 2 : i64} : (tensor<2x4x20xf32>) -> (tensor<2x4x8xf32>, tensor<2x2x4x4xf32>)
  return
}

// -----

func.func @f(%x: tensor<2x4x24xf32>) {
  // expected-error @+1 {{inconsistent shapes or head count: qkv [B, T, W] needs W = (heads + 2 kv_heads) hs with kv_heads dividing heads (W = 24, heads = 3, kv_heads = 3)}}
  %0:2 = fsdp.attention %x {heads = 3 : i64} : (tensor<2x4x24xf32>) -> (tensor<2x4x8xf32>, tensor<2x3x4x4xf32>)
  return
}

// -----

func.func @f(%x: tensor<2x4x16xf32>) {
  // expected-error @+1 {{inconsistent shapes or head count: qkv [B, T, W] needs W = (heads + 2 kv_heads) hs with kv_heads dividing heads (W = 16, heads = 4, kv_heads = 3)}}
  %0:2 = fsdp.attention %x {heads = 4 : i64, kv_heads = 3 : i64} : (tensor<2x4x16xf32>) -> (tensor<2x4x8xf32>, tensor<2x4x4x4xf32>)
  return
}

// -----

func.func @f(%x: tensor<2x4x20xf32>) {
  // expected-error @+1 {{inconsistent shapes or head count: qkv [B, T, W] needs W = (heads + 2 kv_heads) hs with kv_heads dividing heads (W = 20, heads = 4, kv_heads = 2)}}
  %0:2 = fsdp.attention %x {heads = 4 : i64, kv_heads = 2 : i64} : (tensor<2x4x20xf32>) -> (tensor<2x4x8xf32>, tensor<2x4x4x4xf32>)
  return
}

// -----

func.func @f(%x: tensor<2x4x16xf32>) {
  // expected-error @+1 {{inconsistent shapes: result is [2, 4, 4], not [B, T, C] (B = 2, T = 4, C = 8)}}
  %0:2 = fsdp.attention %x {heads = 4 : i64, kv_heads = 2 : i64} : (tensor<2x4x16xf32>) -> (tensor<2x4x4xf32>, tensor<2x4x4x4xf32>)
  return
}

// -----

func.func @f(%x: tensor<2x4x16xf32>) {
  // expected-error @+1 {{inconsistent shapes: lse is [2, 2, 4], not [B, H, T] (B = 2, H = 4, T = 4)}}
  %0:2 = fsdp.attention %x {heads = 4 : i64, kv_heads = 2 : i64, impl = #fsdp.attention_impl<blocked>} : (tensor<2x4x16xf32>) -> (tensor<2x4x8xf32>, tensor<2x2x4xf32>)
  return
}

// -----

func.func @f(%x: tensor<2x4x16xf32>) {
  // expected-error @+1 {{attribute 'kv_heads' failed to satisfy constraint: 64-bit signless integer attribute whose value is positive}}
  %0:2 = fsdp.attention %x {heads = 4 : i64, kv_heads = 0 : i64} : (tensor<2x4x16xf32>) -> (tensor<2x4x8xf32>, tensor<2x4x4x4xf32>)
  return
}

// -----

func.func @f(%x: tensor<2x4x24xf32>) {
  // expected-error @+1 {{attribute 'heads' failed to satisfy constraint: 64-bit signless integer attribute whose value is positive}}
  %0:2 = fsdp.attention %x {heads = 0 : i64} : (tensor<2x4x24xf32>) -> (tensor<2x4x8xf32>, tensor<2x2x4x4xf32>)
  return
}

// -----

func.func @f(%x: tensor<2x4x16xf32>) {
  // expected-error @+1 {{attribute 'window' failed to satisfy constraint: 64-bit signless integer attribute whose value is non-negative}}
  %0:2 = fsdp.attention %x {heads = 4 : i64, kv_heads = 2 : i64, window = -1 : i64} : (tensor<2x4x16xf32>) -> (tensor<2x4x8xf32>, tensor<2x4x4x4xf32>)
  return
}

// -----

func.func @f(%dy: tensor<2x4x8xf32>, %x: tensor<2x4x16xf32>, %l: tensor<2x4x4xf32>, %o: tensor<2x4x8xf32>) {
  // expected-error @+1 {{attribute 'window' failed to satisfy constraint: 64-bit signless integer attribute whose value is non-negative}}
  %0 = fsdp.attention_backward %dy, %x, %l, %o {heads = 4 : i64, kv_heads = 2 : i64, impl = #fsdp.attention_impl<blocked>, window = -4096 : i64} : (tensor<2x4x8xf32>, tensor<2x4x16xf32>, tensor<2x4x4xf32>, tensor<2x4x8xf32>) -> tensor<2x4x16xf32>
  return
}

// -----

func.func @f(%x: tensor<2x4x24xf32>) {
  // expected-error @+1 {{inconsistent shapes: result is [2, 4, 24], not [B, T, C] (B = 2, T = 4, C = 8)}}
  %0:2 = fsdp.attention %x {heads = 2 : i64} : (tensor<2x4x24xf32>) -> (tensor<2x4x24xf32>, tensor<2x2x4x4xf32>)
  return
}

// -----

func.func @f(%x: tensor<2x4x24xf32>) {
  // expected-error @+1 {{inconsistent shapes: probs is [2, 4, 4], not [B, H, T, T] (B = 2, H = 2, T = 4)}}
  %0:2 = fsdp.attention %x {heads = 2 : i64} : (tensor<2x4x24xf32>) -> (tensor<2x4x8xf32>, tensor<2x4x4xf32>)
  return
}

// -----

func.func @f(%x: tensor<2x4x16xf32>, %t: tensor<2xi32>) {
  // expected-error @+1 {{inconsistent shapes: targets is [2], not #N (N = [2, 4])}}
  %0 = fsdp.cross_entropy %x, %t : (tensor<2x4x16xf32>, tensor<2xi32>) -> tensor<f32>
  return
}

// -----

func.func @f(%x: tensor<2x16xf32>, %t: tensor<2xi32>) {
  // expected-error @+1 {{result #0 must be 0D tensor of floating-point values}}
  %0 = fsdp.cross_entropy %x, %t : (tensor<2x16xf32>, tensor<2xi32>) -> tensor<2xf32>
  return
}

// -----

//===----------------------------------------------------------------------===//
// Backward ops
//===----------------------------------------------------------------------===//

func.func @f(%g: tensor<2x4x8xf32>, %t: tensor<8xi32>) {
  // expected-error @+1 {{inconsistent shapes: tokens is [8], not [B, T] (B = 2, T = 4)}}
  %0:2 = fsdp.embedding_backward %g, %t : (tensor<2x4x8xf32>, tensor<8xi32>) -> (tensor<16x8xf32>, tensor<4x8xf32>)
  return
}

// -----

func.func @f(%g: tensor<2x4x8xf32>, %t: tensor<2x4xi32>) {
  // expected-error @+1 {{inconsistent shapes: wpe_grad is [32], not [P, C] (C = 8)}}
  %0:2 = fsdp.embedding_backward %g, %t : (tensor<2x4x8xf32>, tensor<2x4xi32>) -> (tensor<16x8xf32>, tensor<32xf32>)
  return
}

// -----

func.func @f(%g: tensor<2x4x6xf32>, %t: tensor<2x4xi32>) {
  // expected-error @+1 {{inconsistent shapes: wte_grad is [16, 8], not [V, C] (V = 16, C = 6)}}
  %0:2 = fsdp.embedding_backward %g, %t : (tensor<2x4x6xf32>, tensor<2x4xi32>) -> (tensor<16x8xf32>, tensor<4x8xf32>)
  return
}

// -----

func.func @f(%g: tensor<2x4x8xf32>, %t: tensor<2x4xi32>) {
  // expected-error @+1 {{inconsistent shapes: wpe_grad is [4, 6], not [P, C] (P = 4, C = 8)}}
  %0:2 = fsdp.embedding_backward %g, %t : (tensor<2x4x8xf32>, tensor<2x4xi32>) -> (tensor<16x8xf32>, tensor<4x6xf32>)
  return
}

// -----

func.func @f(%g: tensor<2x4x8xf32>, %t: tensor<2x4xi32>) {
  // expected-error @+1 {{inconsistent shapes (not P >= T: P = 2, T = 4)}}
  %0:2 = fsdp.embedding_backward %g, %t : (tensor<2x4x8xf32>, tensor<2x4xi32>) -> (tensor<16x8xf32>, tensor<2x8xf32>)
  return
}

// -----

func.func @f(%g: tensor<2x8xf32>, %x: tensor<2x8xf32>, %w: tensor<8xf32>, %s: tensor<2xf32>) {
  // expected-error @+1 {{inconsistent shapes: bias_grad is [4], not #C (C = 8)}}
  %0:3 = fsdp.layer_norm_backward %g, %x, %w, %s, %s : (tensor<2x8xf32>, tensor<2x8xf32>, tensor<8xf32>, tensor<2xf32>, tensor<2xf32>) -> (tensor<2x8xf32>, tensor<8xf32>, tensor<4xf32>)
  return
}

// -----

func.func @f(%g: tensor<2x8xf32>, %x: tensor<2x8xf32>, %w: tensor<8xf32>, %s: tensor<2xf32>) {
  // expected-error @+1 {{inconsistent shapes: weight_grad is [2, 8], not #C (C = 8)}}
  %0:3 = fsdp.layer_norm_backward %g, %x, %w, %s, %s : (tensor<2x8xf32>, tensor<2x8xf32>, tensor<8xf32>, tensor<2xf32>, tensor<2xf32>) -> (tensor<2x8xf32>, tensor<2x8xf32>, tensor<8xf32>)
  return
}

// -----

func.func @f(%g: tensor<2x8xf32>, %x: tensor<2x8xf32>, %w: tensor<8xf32>, %s: tensor<3xf32>) {
  // expected-error @+1 {{inconsistent shapes: mean is [3], not #R (R = [2])}}
  %0:3 = fsdp.layer_norm_backward %g, %x, %w, %s, %s : (tensor<2x8xf32>, tensor<2x8xf32>, tensor<8xf32>, tensor<3xf32>, tensor<3xf32>) -> (tensor<2x8xf32>, tensor<8xf32>, tensor<8xf32>)
  return
}

// -----

func.func @f(%g: tensor<4x16xf32>, %w: tensor<8x16xf32>) {
  // expected-error @+1 {{inconsistent shapes: weight is [8, 16], not [OC, IC] (OC = 16)}}
  %0 = fsdp.linear_grad_input %g, %w : (tensor<4x16xf32>, tensor<8x16xf32>) -> tensor<4x16xf32>
  return
}

// -----

func.func @f(%g: tensor<4x16xf32>, %w: tensor<16x8xf32>) {
  // expected-error @+1 {{inconsistent shapes: result is [4, 16], not [#N, IC] (N = [4], IC = 8)}}
  %0 = fsdp.linear_grad_input %g, %w : (tensor<4x16xf32>, tensor<16x8xf32>) -> tensor<4x16xf32>
  return
}

// -----

func.func @f(%g: tensor<4x16xf32>, %x: tensor<2x8xf32>) {
  // expected-error @+1 {{inconsistent shapes: input is [2, 8], not [#N, IC] (N = [4])}}
  %0 = fsdp.linear_grad_weight %g, %x : (tensor<4x16xf32>, tensor<2x8xf32>) -> tensor<16x8xf32>
  return
}

// -----

func.func @f(%g: tensor<4x16xf32>, %x: tensor<4x8xf32>) {
  // expected-error @+1 {{inconsistent shapes: result is [8, 16], not [OC, IC] (OC = 16, IC = 8)}}
  %0 = fsdp.linear_grad_weight %g, %x : (tensor<4x16xf32>, tensor<4x8xf32>) -> tensor<8x16xf32>
  return
}

// -----

func.func @f(%g: tensor<4x16xf32>) {
  // expected-error @+1 {{inconsistent shapes: result is [4], not #C (C = 16)}}
  %0 = fsdp.bias_grad %g : (tensor<4x16xf32>) -> tensor<4xf32>
  return
}

// -----

func.func @f(%g: tensor<4xf32>) {
  // expected-error @+1 {{expects one element type for all float operands and results}}
  %0 = fsdp.bias_grad %g : (tensor<4xf32>) -> tensor<4xbf16>
  return
}

// -----

func.func @f(%g: tensor<4xf32>, %x: tensor<8xf32>) {
  // expected-error @+1 {{inconsistent shapes: input is [8], not [*S] (S = [4])}}
  %0 = fsdp.gelu_backward %g, %x : (tensor<4xf32>, tensor<8xf32>) -> tensor<4xf32>
  return
}

// -----

func.func @f(%g: tensor<4xf32>, %x: tensor<4xf32>) {
  // expected-error @+1 {{inconsistent shapes: result is [2], not [*S] (S = [4])}}
  %0 = fsdp.relu_backward %g, %x : (tensor<4xf32>, tensor<4xf32>) -> tensor<2xf32>
  return
}

// -----

func.func @f(%g: tensor<2x4x8xf32>, %qkv: tensor<2x4x20xf32>, %p: tensor<2x2x4x4xf32>) {
  // expected-error @+1 {{inconsistent shapes or head count: qkv [B, T, W] needs W = (heads + 2 kv_heads) hs with kv_heads dividing heads (W = 20, heads = 2, kv_heads = 2)}}
  %0 = fsdp.attention_backward %g, %qkv, %p {heads = 2 : i64} : (tensor<2x4x8xf32>, tensor<2x4x20xf32>, tensor<2x2x4x4xf32>) -> tensor<2x4x20xf32>
  return
}

// -----

func.func @f(%g: tensor<2x4x8xf32>, %qkv: tensor<2x4x16xf32>, %p: tensor<2x4x4x4xf32>) {
  // expected-error @+1 {{inconsistent shapes or head count: qkv [B, T, W] needs W = (heads + 2 kv_heads) hs with kv_heads dividing heads (W = 16, heads = 4, kv_heads = 3)}}
  %0 = fsdp.attention_backward %g, %qkv, %p {heads = 4 : i64, kv_heads = 3 : i64} : (tensor<2x4x8xf32>, tensor<2x4x16xf32>, tensor<2x4x4x4xf32>) -> tensor<2x4x16xf32>
  return
}

// -----

func.func @f(%g: tensor<2x4x8xf32>, %qkv: tensor<2x4x16xf32>, %p: tensor<2x4x4x4xf32>) {
  // expected-error @+1 {{inconsistent shapes: result is [2, 4, 24], not [B, T, W] (B = 2, T = 4, W = 16)}}
  %0 = fsdp.attention_backward %g, %qkv, %p {heads = 4 : i64, kv_heads = 2 : i64} : (tensor<2x4x8xf32>, tensor<2x4x16xf32>, tensor<2x4x4x4xf32>) -> tensor<2x4x24xf32>
  return
}

// -----

func.func @f(%g: tensor<2x4x8xf32>, %qkv: tensor<2x4x24xf32>, %p: tensor<2x3x4x4xf32>) {
  // expected-error @+1 {{inconsistent shapes or head count: qkv [B, T, W] needs W = (heads + 2 kv_heads) hs with kv_heads dividing heads (W = 24, heads = 3, kv_heads = 3)}}
  %0 = fsdp.attention_backward %g, %qkv, %p {heads = 3 : i64} : (tensor<2x4x8xf32>, tensor<2x4x24xf32>, tensor<2x3x4x4xf32>) -> tensor<2x4x24xf32>
  return
}

// -----

func.func @f(%g: tensor<2x4x8xf32>, %qkv: tensor<2x4x24xf32>, %p: tensor<2x4x4xf32>) {
  // expected-error @+1 {{inconsistent shapes: probs is [2, 4, 4], not [B, H, T, T] (B = 2, H = 2, T = 4)}}
  %0 = fsdp.attention_backward %g, %qkv, %p {heads = 2 : i64} : (tensor<2x4x8xf32>, tensor<2x4x24xf32>, tensor<2x4x4xf32>) -> tensor<2x4x24xf32>
  return
}

// -----

// Blocked attention saves one log-sum-exp per row, not the probabilities.
func.func @f(%x: tensor<2x4x24xf32>) {
  // expected-error @+1 {{inconsistent shapes: lse is [2, 2, 4, 4], not [B, H, T] (B = 2, H = 2, T = 4)}}
  %0:2 = fsdp.attention %x {heads = 2 : i64, impl = #fsdp.attention_impl<blocked>} : (tensor<2x4x24xf32>) -> (tensor<2x4x8xf32>, tensor<2x2x4x4xf32>)
  return
}

// -----

func.func @f(%g: tensor<2x4x8xf32>, %qkv: tensor<2x4x24xf32>, %lse: tensor<2x2x4xf32>) {
  // The kernel interface's check, which runs before the op's.
  // expected-error @+1 {{has 3 operands, but kernel 'attention_backward_blocked' takes 4 to 4 inputs}}
  %0 = fsdp.attention_backward %g, %qkv, %lse {heads = 2 : i64, impl = #fsdp.attention_impl<blocked>} : (tensor<2x4x8xf32>, tensor<2x4x24xf32>, tensor<2x2x4xf32>) -> tensor<2x4x24xf32>
  return
}

// -----

func.func @f(%g: tensor<2x4x8xf32>, %qkv: tensor<2x4x24xf32>, %p: tensor<2x2x4x4xf32>, %o: tensor<2x4x8xf32>) {
  // expected-error @+1 {{has 4 operands, but kernel 'attention_backward' takes 3 to 3 inputs}}
  %0 = fsdp.attention_backward %g, %qkv, %p, %o {heads = 2 : i64} : (tensor<2x4x8xf32>, tensor<2x4x24xf32>, tensor<2x2x4x4xf32>, tensor<2x4x8xf32>) -> tensor<2x4x24xf32>
  return
}

// -----

func.func @f(%g: tensor<2x4x8xf32>, %qkv: tensor<2x4x24xf32>, %lse: tensor<2x2x4xf32>, %o: tensor<2x4x9xf32>) {
  // expected-error @+1 {{inconsistent shapes: output is [2, 4, 9], not [B, T, C] (B = 2, T = 4, C = 8)}}
  %0 = fsdp.attention_backward %g, %qkv, %lse, %o {heads = 2 : i64, impl = #fsdp.attention_impl<blocked>} : (tensor<2x4x8xf32>, tensor<2x4x24xf32>, tensor<2x2x4xf32>, tensor<2x4x9xf32>) -> tensor<2x4x24xf32>
  return
}

// -----

func.func @f(%g: tensor<2x4x8xf32>, %qkv: tensor<2x4x24xf32>, %lse: tensor<2x2x4x4xf32>, %o: tensor<2x4x8xf32>) {
  // expected-error @+1 {{inconsistent shapes: lse is [2, 2, 4, 4], not [B, H, T] (B = 2, H = 2, T = 4)}}
  %0 = fsdp.attention_backward %g, %qkv, %lse, %o {heads = 2 : i64, impl = #fsdp.attention_impl<blocked>} : (tensor<2x4x8xf32>, tensor<2x4x24xf32>, tensor<2x2x4x4xf32>, tensor<2x4x8xf32>) -> tensor<2x4x24xf32>
  return
}

// -----

func.func @f(%g: tensor<2x4x8xf32>, %qkv: tensor<2x4x24xf32>, %p: tensor<2x2x4x4xf32>) {
  // expected-error @+1 {{inconsistent shapes: result is [2, 4, 8], not [B, T, W] (B = 2, T = 4, W = 24)}}
  %0 = fsdp.attention_backward %g, %qkv, %p {heads = 2 : i64} : (tensor<2x4x8xf32>, tensor<2x4x24xf32>, tensor<2x2x4x4xf32>) -> tensor<2x4x8xf32>
  return
}

// -----

func.func @f(%d: tensor<f32>, %x: tensor<2x16xf32>, %t: tensor<4xi32>) {
  // expected-error @+1 {{inconsistent shapes: targets is [4], not #N (N = [2])}}
  %0 = fsdp.cross_entropy_backward %d, %x, %t : (tensor<f32>, tensor<2x16xf32>, tensor<4xi32>) -> tensor<2x16xf32>
  return
}

// -----

func.func @f(%d: tensor<f32>, %x: tensor<2x16xf32>, %t: tensor<2xi32>) {
  // expected-error @+1 {{inconsistent shapes: result is [16, 2], not [*N, V] (N = [2], V = 16)}}
  %0 = fsdp.cross_entropy_backward %d, %x, %t : (tensor<f32>, tensor<2x16xf32>, tensor<2xi32>) -> tensor<16x2xf32>
  return
}

// -----

//===----------------------------------------------------------------------===//
// AdamW
//===----------------------------------------------------------------------===//

fsdp.param @w : tensor<4xf32> init <zeros>
func.func @f(%g: tensor<4xf32>, %s: i64) {
  // expected-error @+1 {{lr must be non-negative}}
  fsdp.adamw @w, %g, %s {lr = -1.0 : f32, beta1 = 0.9 : f32, beta2 = 0.95 : f32, eps = 1.0e-8 : f32, weight_decay = 0.0 : f32} : tensor<4xf32>
  return
}

// -----

fsdp.param @w : tensor<4xf32> init <zeros>
func.func @f(%g: tensor<4xf32>, %s: i64) {
  // expected-error @+1 {{beta1 and beta2 must lie in [0, 1), got 1.000000e+00 and 9.500000e-01}}
  fsdp.adamw @w, %g, %s {lr = 1.0 : f32, beta1 = 1.0 : f32, beta2 = 0.95 : f32, eps = 1.0e-8 : f32, weight_decay = 0.0 : f32} : tensor<4xf32>
  return
}

// -----

fsdp.param @w : tensor<4xf32> init <zeros>
func.func @f(%g: tensor<4xf32>, %s: i64) {
  // expected-error @+1 {{eps must be positive}}
  fsdp.adamw @w, %g, %s {lr = 1.0 : f32, beta1 = 0.9 : f32, beta2 = 0.95 : f32, eps = 0.0 : f32, weight_decay = 0.0 : f32} : tensor<4xf32>
  return
}

// -----

fsdp.param @w : tensor<4xf32> init <zeros>
func.func @f(%g: tensor<4xf32>, %s: i64) {
  // expected-error @+1 {{weight_decay must be non-negative}}
  fsdp.adamw @w, %g, %s {lr = 1.0 : f32, beta1 = 0.9 : f32, beta2 = 0.95 : f32, eps = 1.0e-8 : f32, weight_decay = -0.1 : f32} : tensor<4xf32>
  return
}

// -----

func.func @f(%g: tensor<4xf32>, %s: i64) {
  // expected-error @+1 {{refers to unknown parameter @w}}
  fsdp.adamw @w, %g, %s {lr = 1.0 : f32, beta1 = 0.9 : f32, beta2 = 0.95 : f32, eps = 1.0e-8 : f32, weight_decay = 0.0 : f32} : tensor<4xf32>
  return
}

// -----

fsdp.param @w : tensor<4xf32> init <zeros>
func.func @f(%g: tensor<8xf32>, %s: i64) {
  // expected-error @+1 {{gradient type 'tensor<8xf32>' does not match parameter @w of type 'tensor<4xf32>'}}
  fsdp.adamw @w, %g, %s {lr = 1.0 : f32, beta1 = 0.9 : f32, beta2 = 0.95 : f32, eps = 1.0e-8 : f32, weight_decay = 0.0 : f32} : tensor<8xf32>
  return
}

// -----

fsdp.param @w : tensor<4xf32> init <zeros> no_weight_decay
func.func @f(%g: tensor<4xf32>, %s: i64) {
  // expected-error @+1 {{applies weight decay to @w, which is marked no_weight_decay}}
  fsdp.adamw @w, %g, %s {lr = 1.0 : f32, beta1 = 0.9 : f32, beta2 = 0.95 : f32, eps = 1.0e-8 : f32, weight_decay = 0.1 : f32} : tensor<4xf32>
  return
}

// -----

//===----------------------------------------------------------------------===//
// Sharding ops
//===----------------------------------------------------------------------===//

fsdp.param @w : tensor<3x4xf32> init <zeros>
fsdp.unit @u params [@w]
func.func @f() {
  // expected-error @+1 {{result has 10 elements, expected 12 (the unit's flat size)}}
  %0 = fsdp.all_gather @u : tensor<10xf32>
  return
}

// -----

func.func @f() {
  // expected-error @+1 {{refers to unknown unit @nope}}
  %0 = fsdp.all_gather @nope : tensor<10xf32>
  return
}

// -----

fsdp.param @w : tensor<3x4xf32> init <zeros>
fsdp.unit @u params [@w]
func.func @f() {
  // expected-error @+1 {{is grouped but does not directly follow a 'fsdp.all_gather_start' to group with}}
  %t, %g = fsdp.all_gather_start @u stream 1 grouped : tensor<12xf32>
  return
}

// -----

fsdp.param @w : tensor<3x4xf32> init <zeros>
fsdp.unit @u params [@w]
func.func @f(%full: tensor<12xf32>) {
  %t1, %g1 = fsdp.reduce_scatter_start %full @u stream 2 : tensor<12xf32> -> tensor<12xf32>
  // expected-error @+1 {{is grouped with a start on stream 2 but runs on stream 1}}
  %t2, %g2 = fsdp.reduce_scatter_start %full @u stream 1 grouped : tensor<12xf32> -> tensor<12xf32>
  return
}

// -----

module attributes {fsdp.mesh = #fsdp.mesh<["shard" = 5]>} {
  fsdp.param @w : tensor<3x4xf32> init <zeros>
  fsdp.unit @u params [@w]
  func.func @f(%g: tensor<12xf32>) {
    // expected-error @+1 {{result has 6 elements, expected 3 (the largest shard, ceil(flat size / world size))}}
    %0 = fsdp.reduce_scatter %g @u : tensor<12xf32> -> tensor<6xf32>
    return
  }
}

// -----

fsdp.param @w : tensor<3x4xf32> init <zeros>
fsdp.unit @u params [@w]
func.func @f(%g: tensor<11xf32>) {
  // expected-error @+1 {{source has 11 elements, expected 12 (the unit's flat size)}}
  %0 = fsdp.reduce_scatter %g @u : tensor<11xf32> -> tensor<12xf32>
  return
}

// -----

fsdp.param @w : tensor<3x4xf32> init <zeros>
fsdp.unit @u params [@w]
func.func @f(%g: tensor<5xf32>, %s: i64) {
  // expected-error @+1 {{gradient has 5 elements, expected 12 (the largest shard, ceil(flat size / world size))}}
  fsdp.adamw_shard @u, %g, %s {lr = 1.0 : f32, beta1 = 0.9 : f32, beta2 = 0.95 : f32, eps = 1.0e-8 : f32, weight_decay = 0.0 : f32} : tensor<5xf32>
  return
}

// -----

// adamw_shard's clipping scale is an f32 scalar.
fsdp.param @w : tensor<3x4xf32> init <zeros>
fsdp.unit @u params [@w]
func.func @f(%g: tensor<12xf32>, %s: i64, %c: tensor<f16>) {
  // expected-error @+1 {{operand #2 must be 0D tensor of 32-bit float values, but got 'tensor<f16>'}}
  "fsdp.adamw_shard"(%g, %s, %c) {unit = @u, lr = 1.0 : f32, beta1 = 0.9 : f32, beta2 = 0.95 : f32, eps = 1.0e-8 : f32, weight_decay = 0.0 : f32} : (tensor<12xf32>, i64, tensor<f16>) -> ()
  return
}

// -----

// grad_sq_sum: a shard of the unit it names.
module attributes {fsdp.mesh = #fsdp.mesh<["shard" = 5]>} {
  fsdp.param @w : tensor<3x4xf32> init <zeros>
  fsdp.unit @u params [@w]
  func.func @f(%g: tensor<6xf32>) {
    // expected-error @+1 {{gradient has 6 elements, expected 3 (the largest shard, ceil(flat size / world size))}}
    %0 = fsdp.grad_sq_sum @u, %g : tensor<6xf32>
    return
  }
}

// -----

func.func @f(%g: tensor<6xf32>) {
  // expected-error @+1 {{refers to unknown unit @nowhere}}
  %0 = fsdp.grad_sq_sum @nowhere, %g : tensor<6xf32>
  return
}

// -----

fsdp.param @w : tensor<3x4xf32> init <zeros>
fsdp.unit @u params [@w]
func.func @f(%g: tensor<12xf32>, %acc: tensor<2xf32>) {
  // expected-error @+1 {{operand #1 must be 0D tensor of 32-bit float values, but got 'tensor<2xf32>'}}
  %0 = "fsdp.grad_sq_sum"(%g, %acc) {unit = @u} : (tensor<12xf32>, tensor<2xf32>) -> tensor<f32>
  return
}

// -----

// The sum of squares is f32 also of a bf16 shard.
fsdp.param @w : tensor<3x4xf32> init <zeros>
fsdp.unit @u params [@w]
func.func @f(%g: tensor<12xbf16>) {
  // expected-error @+1 {{result #0 must be 0D tensor of 32-bit float values, but got 'tensor<bf16>'}}
  %0 = "fsdp.grad_sq_sum"(%g) {unit = @u} : (tensor<12xbf16>) -> tensor<bf16>
  return
}

// -----

// all_reduce_sum: an f32 scalar in, the same out.
func.func @f(%x: tensor<4xf32>) {
  // expected-error @+1 {{operand #0 must be 0D tensor of 32-bit float values, but got 'tensor<4xf32>'}}
  %0 = "fsdp.all_reduce_sum"(%x) : (tensor<4xf32>) -> tensor<4xf32>
  return
}

// -----

// clip_coefficient: a positive, finite max_norm.
func.func @f(%x: tensor<f32>) {
  // expected-error @+1 {{max_norm must be positive and finite, got 0}}
  %0 = fsdp.clip_coefficient %x {max_norm = 0.0 : f32}
  return
}

// -----

func.func @f(%x: tensor<f32>) {
  // expected-error @+1 {{max_norm must be positive and finite, got -1}}
  %0 = fsdp.clip_coefficient %x {max_norm = -1.0 : f32}
  return
}

// -----

func.func @f(%x: tensor<f32>) {
  // expected-error @+1 {{max_norm must be positive and finite, got INF}}
  %0 = fsdp.clip_coefficient %x {max_norm = 0x7F800000 : f32}
  return
}

// -----

func.func @f(%p: tensor<12xf32>) {
  // expected-error @+1 {{elements 8 .. 13 lie outside the source's 12 elements}}
  %0 = fsdp.view %p[8] : tensor<12xf32> -> tensor<2x3xf32>
  return
}

// -----

func.func @f(%a: tensor<2x3xf32>, %b: tensor<4xf32>) {
  // expected-error @+1 {{result has 12 elements, expected 10 (the sum of the operands' elements)}}
  %0 = fsdp.pack %a, %b : (tensor<2x3xf32>, tensor<4xf32>) -> tensor<12xf32>
  return
}

// -----

// expected-error @+1 {{'fsdp.mesh' must be a #fsdp.mesh on a module}}
module attributes {fsdp.mesh = 2 : i64} {
}

// -----

// expected-error @+1 {{'fsdp.mesh' must be a #fsdp.mesh on a module}}
func.func @f() attributes {fsdp.mesh = #fsdp.mesh<["shard" = 2]>} {
  return
}

// -----

// The compute type a model asks for (fsdp-gen --dtype bf16): f32 or bf16,
// on a module.
// expected-error @+1 {{'fsdp.param_dtype' must be a module's f32 or bf16 (the compute type its parameters are gathered in)}}
module attributes {fsdp.param_dtype = f16} {
}

// -----

// expected-error @+1 {{'fsdp.param_dtype' must be a module's f32 or bf16}}
module attributes {fsdp.param_dtype = "bf16"} {
}

// -----

// expected-error @+1 {{'fsdp.param_dtype' must be a module's f32 or bf16}}
func.func @f() attributes {fsdp.param_dtype = bf16} {
  return
}

// -----

// The world size of old plans' IR is the mesh now.
// expected-error @+1 {{unknown fsdp dialect attribute 'fsdp.world_size'}}
module attributes {fsdp.world_size = 2 : i64} {
}

// -----

// expected-error @+1 {{mesh axis "shard" needs at least one rank, got 0}}
module attributes {fsdp.mesh = #fsdp.mesh<["shard" = 0]>} {
}

// -----

// expected-error @+1 {{unknown mesh axis "data": fsdp meshes have the axes "replicate", "shard" and "expert"}}
module attributes {fsdp.mesh = #fsdp.mesh<["data" = 2]>} {
}

// -----

// expected-error @+1 {{mesh axis "replicate" is repeated or out of order: the axes are "replicate", "shard" then "expert", each at most once}}
module attributes {fsdp.mesh = #fsdp.mesh<["shard" = 2, "replicate" = 2]>} {
}

// -----

// expected-error @+1 {{mesh axis "shard" is repeated or out of order}}
module attributes {fsdp.mesh = #fsdp.mesh<["shard" = 2, "shard" = 2]>} {
}

// -----

// expected-error @+1 {{a mesh needs at least one axis}}
module attributes {fsdp.mesh = #fsdp.mesh<[]>} {
}

// -----

// expected-error @+1 {{the mesh has more ranks than int64 can count}}
module attributes {fsdp.mesh = #fsdp.mesh<["replicate" = 4294967296, "shard" = 4294967296]>} {
}

// -----

// expected-error @+1 {{'fsdp.batch_split' must be a unit attribute on a func.func}}
module attributes {fsdp.batch_split} {
}

// -----

// expected-error @+1 {{'fsdp.remat' must be "none", "full" or "selective" on an fsdp.unit}}
module attributes {fsdp.remat = "full"} {
}

// -----

fsdp.param @w : tensor<4xf32> init <zeros>
// expected-error @+1 {{'fsdp.remat' must be "none", "full" or "selective" on an fsdp.unit}}
fsdp.unit @u params [@w] {fsdp.remat = "most"}

// -----

// expected-error @+1 {{'fsdp.schedule_choice' must be a module's {forward_prefetch, backward_prefetch, bucket_bytes (counts), reshard_after_forward, overlap_all_to_all, optional shard_copy (bools)}}}
module attributes {fsdp.schedule_choice = {forward_prefetch = -1 : i64, backward_prefetch = 0 : i64, bucket_bytes = 0 : i64, reshard_after_forward = true, overlap_all_to_all = true}} {
}

// -----

// A choice without overlap_all_to_all crashed --fsdp-schedule, which
// reads it: the verifier refuses it first.
// expected-error @+1 {{'fsdp.schedule_choice' must be a module's}}
module attributes {fsdp.schedule_choice = {forward_prefetch = 0 : i64, backward_prefetch = 0 : i64, bucket_bytes = 0 : i64, reshard_after_forward = true}} {
}

// -----

// expected-error @+1 {{'fsdp.schedule_choice' must be a module's}}
module attributes {fsdp.schedule_choice = {forward_prefetch = 0 : i64, backward_prefetch = 0 : i64, bucket_bytes = 0 : i64, reshard_after_forward = true, overlap_all_to_all = true, shard_copy = 1 : i64}} {
}

// -----

func.func @f(%x: tensor<2x8xf32>) {
  // expected-error @+1 {{inconsistent shapes: result is [2, 4], not #N (N = 16)}}
  %0 = fsdp.cast %x : tensor<2x8xf32> -> tensor<2x4xbf16>
  return
}

// -----

func.func @f(%x: tensor<2x8xf16>) {
  // expected-error @+1 {{operand #0 (source) must be f32 or bf16, got 'tensor<2x8xf16>'}}
  %0 = fsdp.cast %x : tensor<2x8xf16> -> tensor<2x8xf32>
  return
}

// -----

func.func @f(%x: tensor<2x8xbf16>, %t: tensor<2xi32>) {
  // The loss is f32 whatever the logits are.
  // expected-error @+1 {{result #0 (loss) must be f32, got 'tensor<bf16>'}}
  %0 = fsdp.cross_entropy %x, %t : (tensor<2x8xbf16>, tensor<2xi32>) -> tensor<bf16>
  return
}

// -----

func.func @f(%qkv: tensor<1x4x24xbf16>) {
  // expected-error @+1 {{result #1 (lse) must be f32, got 'tensor<1x2x4xbf16>'}}
  %0:2 = fsdp.attention %qkv {heads = 2 : i64, impl = #fsdp.attention_impl<blocked>} : (tensor<1x4x24xbf16>) -> (tensor<1x4x8xbf16>, tensor<1x2x4xbf16>)
  return
}

// -----

func.func @f(%x: tensor<2x8xf16>, %w: tensor<4x8xf16>) {
  // expected-error @+1 {{operand #0 (input) must be f32 or bf16, got 'tensor<2x8xf16>'}}
  %0 = fsdp.linear %x, %w : (tensor<2x8xf16>, tensor<4x8xf16>) -> tensor<2x4xf16>
  return
}

//===----------------------------------------------------------------------===//
// Llama's ops: rms_norm, swiglu, rope and their backward
//===----------------------------------------------------------------------===//

// -----

func.func @f(%x: tensor<2x8xf32>, %w: tensor<4xf32>) {
  // expected-error @+1 {{inconsistent shapes: weight is [4], not #C (C = 8)}}
  %0:2 = fsdp.rms_norm %x, %w : (tensor<2x8xf32>, tensor<4xf32>) -> (tensor<2x8xf32>, tensor<2xf32>)
  return
}

// -----

func.func @f(%x: tensor<2x8xf32>, %w: tensor<8xf32>) {
  // expected-error @+1 {{inconsistent shapes: rstd is [8], not #R (R = [2])}}
  %0:2 = fsdp.rms_norm %x, %w : (tensor<2x8xf32>, tensor<8xf32>) -> (tensor<2x8xf32>, tensor<8xf32>)
  return
}

// -----

func.func @f(%x: tensor<2x8xf32>, %w: tensor<8xf32>) {
  // expected-error @+1 {{inconsistent shapes: result is [8, 2], not [*R, C] (R = [2], C = 8)}}
  %0:2 = fsdp.rms_norm %x, %w : (tensor<2x8xf32>, tensor<8xf32>) -> (tensor<8x2xf32>, tensor<2xf32>)
  return
}

// -----

func.func @f(%x: tensor<2x8xbf16>, %w: tensor<8xbf16>) {
  // expected-error @+1 {{result #1 (rstd) must be f32, got 'tensor<2xbf16>'}}
  %0:2 = fsdp.rms_norm %x, %w : (tensor<2x8xbf16>, tensor<8xbf16>) -> (tensor<2x8xbf16>, tensor<2xbf16>)
  return
}

// -----

func.func @f(%x: tensor<2x8xbf16>, %w: tensor<8xf32>) {
  // expected-error @+1 {{expects one element type for all float operands and results, got 'bf16' and 'f32'}}
  %0:2 = fsdp.rms_norm %x, %w : (tensor<2x8xbf16>, tensor<8xf32>) -> (tensor<2x8xbf16>, tensor<2xf32>)
  return
}

// -----

func.func @f(%x: tensor<2x8xf32>, %w: tensor<8xf32>) {
  // expected-error @+1 {{epsilon must be positive}}
  %0:2 = fsdp.rms_norm %x, %w {epsilon = -1.0 : f32} : (tensor<2x8xf32>, tensor<8xf32>) -> (tensor<2x8xf32>, tensor<2xf32>)
  return
}

// -----

func.func @f(%x: tensor<f32>, %w: tensor<8xf32>) {
  // expected-error @+1 {{inconsistent shapes: input is [], not [*R, C]}}
  %0:2 = fsdp.rms_norm %x, %w : (tensor<f32>, tensor<8xf32>) -> (tensor<f32>, tensor<f32>)
  return
}

// -----

func.func @f(%g: tensor<2x8xf32>, %x: tensor<2x8xf32>, %w: tensor<8xf32>, %s: tensor<2xf32>) {
  // expected-error @+1 {{inconsistent shapes: weight_grad is [2, 8], not #C (C = 8)}}
  %0:2 = fsdp.rms_norm_backward %g, %x, %w, %s : (tensor<2x8xf32>, tensor<2x8xf32>, tensor<8xf32>, tensor<2xf32>) -> (tensor<2x8xf32>, tensor<2x8xf32>)
  return
}

// -----

func.func @f(%g: tensor<2x4xf32>, %x: tensor<2x8xf32>, %w: tensor<8xf32>, %s: tensor<2xf32>) {
  // expected-error @+1 {{inconsistent shapes: input is [2, 8], not [*R, C] (R = [2], C = 4)}}
  %0:2 = fsdp.rms_norm_backward %g, %x, %w, %s : (tensor<2x4xf32>, tensor<2x8xf32>, tensor<8xf32>, tensor<2xf32>) -> (tensor<2x8xf32>, tensor<8xf32>)
  return
}

// -----

func.func @f(%g: tensor<2x8xf32>, %x: tensor<2x8xf32>, %w: tensor<8xf32>, %s: tensor<8xf32>) {
  // expected-error @+1 {{inconsistent shapes: rstd is [8], not #R (R = [2])}}
  %0:2 = fsdp.rms_norm_backward %g, %x, %w, %s : (tensor<2x8xf32>, tensor<2x8xf32>, tensor<8xf32>, tensor<8xf32>) -> (tensor<2x8xf32>, tensor<8xf32>)
  return
}

// -----

func.func @f(%g: tensor<2x8xf32>, %u: tensor<2x4xf32>) {
  // expected-error @+1 {{inconsistent shapes: up is [2, 4], not [*S] (S = [2, 8])}}
  %0 = fsdp.swiglu %g, %u : (tensor<2x8xf32>, tensor<2x4xf32>) -> tensor<2x8xf32>
  return
}

// -----

func.func @f(%d: tensor<2x8xf32>, %g: tensor<2x8xf32>, %u: tensor<2x8xf32>) {
  // expected-error @+1 {{inconsistent shapes: up_grad is [8, 2], not [*S] (S = [2, 8])}}
  %0:2 = fsdp.swiglu_backward %d, %g, %u : (tensor<2x8xf32>, tensor<2x8xf32>, tensor<2x8xf32>) -> (tensor<2x8xf32>, tensor<8x2xf32>)
  return
}

// -----

func.func @f(%qkv: tensor<1x4x24xf32>) {
  // expected-error @+1 {{'fsdp.rope' op has a rope scaling factor that is not positive and finite: qkv [B, T, W] needs W = (heads + 2 kv_heads) hs with hs even, theta positive and finite, and a valid scaling (W = 24, heads = 2, kv_heads = 2, theta = 10000, scaling = 1, factor = 0, low_freq_factor = 1, high_freq_factor = 4, original_max_positions = 0, attention_factor = 1, correction_low = 0, correction_high = 0)}}
  %0 = fsdp.rope %qkv {heads = 2 : i64, scaling = #fsdp.rope_scaling<linear>, factor = 0.0} : (tensor<1x4x24xf32>) -> tensor<1x4x24xf32>
  return
}

// -----

func.func @f(%qkv: tensor<1x4x24xf32>) {
  // expected-error @+1 {{'fsdp.rope' op has llama3 rope scaling without 0 < low_freq_factor < high_freq_factor and original_max_positions > 0: qkv [B, T, W] needs W = (heads + 2 kv_heads) hs with hs even, theta positive and finite, and a valid scaling (W = 24, heads = 2, kv_heads = 2, theta = 10000, scaling = 2, factor = 8, low_freq_factor = 4, high_freq_factor = 4, original_max_positions = 4,}}
  %0 = fsdp.rope %qkv {heads = 2 : i64, scaling = #fsdp.rope_scaling<llama3>, factor = 8.0, low_freq_factor = 4.0, high_freq_factor = 4.0, original_max_positions = 4} : (tensor<1x4x24xf32>) -> tensor<1x4x24xf32>
  return
}

// -----

func.func @f(%qkv: tensor<1x4x24xf32>) {
  // expected-error @+1 {{'fsdp.rope' op has llama3 rope scaling without 0 < low_freq_factor < high_freq_factor and original_max_positions > 0: qkv [B, T, W] needs W = (heads + 2 kv_heads) hs with hs even, theta positive and finite, and a valid scaling (W = 24, heads = 2, kv_heads = 2, theta = 10000, scaling = 2, factor = 8, low_freq_factor = -1,}}
  %0 = fsdp.rope %qkv {heads = 2 : i64, scaling = #fsdp.rope_scaling<llama3>, factor = 8.0, low_freq_factor = -1.0, original_max_positions = 4} : (tensor<1x4x24xf32>) -> tensor<1x4x24xf32>
  return
}

// -----

func.func @f(%qkv: tensor<1x4x24xf32>) {
  // expected-error @+1 {{'fsdp.rope' op has llama3 rope scaling without 0 < low_freq_factor < high_freq_factor and original_max_positions > 0: qkv [B, T, W] needs W = (heads + 2 kv_heads) hs with hs even, theta positive and finite, and a valid scaling (W = 24, heads = 2, kv_heads = 2, theta = 10000, scaling = 2, factor = 8, low_freq_factor = 1, high_freq_factor = 4, original_max_positions = 0,}}
  %0 = fsdp.rope %qkv {heads = 2 : i64, scaling = #fsdp.rope_scaling<llama3>, factor = 8.0} : (tensor<1x4x24xf32>) -> tensor<1x4x24xf32>
  return
}

// -----

func.func @f(%qkv: tensor<1x4x24xf32>) {
  // expected-error @+1 {{'fsdp.rope_backward' op has yarn rope scaling without a positive attention_factor and 0 <= correction_low <= correction_high: grad [B, T, W] needs W = (heads + 2 kv_heads) hs with hs even, theta positive and finite, and a valid scaling (W = 24, heads = 2, kv_heads = 2, theta = 10000, scaling = 3, factor = 4, low_freq_factor = 1, high_freq_factor = 4, original_max_positions = 0, attention_factor = 0,}}
  %0 = fsdp.rope_backward %qkv {heads = 2 : i64, scaling = #fsdp.rope_scaling<yarn>, factor = 4.0, attention_factor = 0.0} : (tensor<1x4x24xf32>) -> tensor<1x4x24xf32>
  return
}

// -----

func.func @f(%qkv: tensor<1x4x24xf32>) {
  // expected-error @+1 {{'fsdp.rope' op has yarn rope scaling without a positive attention_factor and 0 <= correction_low <= correction_high: qkv [B, T, W] needs W = (heads + 2 kv_heads) hs with hs even, theta positive and finite, and a valid scaling (W = 24, heads = 2, kv_heads = 2, theta = 10000, scaling = 3, factor = 4, low_freq_factor = 1, high_freq_factor = 4, original_max_positions = 0, attention_factor = 1, correction_low = 3, correction_high = 1)}}
  %0 = fsdp.rope %qkv {heads = 2 : i64, scaling = #fsdp.rope_scaling<yarn>, factor = 4.0, correction_low = 3.0, correction_high = 1.0} : (tensor<1x4x24xf32>) -> tensor<1x4x24xf32>
  return
}

// -----

func.func @f(%qkv: tensor<1x4x24xf32>) {
  // expected-error @+1 {{'fsdp.rope' op 'factor' is not read by scaling 'default': leave it out}}
  %0 = fsdp.rope %qkv {heads = 2 : i64, factor = 8.0} : (tensor<1x4x24xf32>) -> tensor<1x4x24xf32>
  return
}

// -----

func.func @f(%qkv: tensor<1x4x24xf32>) {
  // expected-error @+1 {{'fsdp.rope_backward' op 'original_max_positions' is not read by scaling 'linear': leave it out}}
  %0 = fsdp.rope_backward %qkv {heads = 2 : i64, scaling = #fsdp.rope_scaling<linear>, factor = 2.0, original_max_positions = 8} : (tensor<1x4x24xf32>) -> tensor<1x4x24xf32>
  return
}

// -----

func.func @f(%qkv: tensor<4x24xf32>) {
  // expected-error @+1 {{inconsistent shapes: qkv is [4, 24], not [B, T, W]}}
  %0 = fsdp.rope %qkv {heads = 2 : i64} : (tensor<4x24xf32>) -> tensor<4x24xf32>
  return
}

// -----

func.func @f(%qkv: tensor<1x4x24xf32>) {
  // expected-error @+1 {{inconsistent shapes or head counts: qkv [B, T, W] needs W = (heads + 2 kv_heads) hs with hs even, theta positive and finite, and a valid scaling (W = 24, heads = 3, kv_heads = 1, theta = 10000)}}
  %0 = fsdp.rope %qkv {heads = 3 : i64, kv_heads = 1 : i64} : (tensor<1x4x24xf32>) -> tensor<1x4x24xf32>
  return
}

// -----

func.func @f(%qkv: tensor<1x4x18xf32>) {
  // expected-error @+1 {{inconsistent shapes or head counts: qkv [B, T, W] needs W = (heads + 2 kv_heads) hs with hs even, theta positive and finite, and a valid scaling (W = 18, heads = 2, kv_heads = 2, theta = 10000)}}
  %0 = fsdp.rope %qkv {heads = 2 : i64} : (tensor<1x4x18xf32>) -> tensor<1x4x18xf32>
  return
}

// -----

func.func @f(%qkv: tensor<1x4x24xf32>) {
  // expected-error @+1 {{has a theta that is not positive and finite: qkv [B, T, W] needs W = (heads + 2 kv_heads) hs with hs even, theta positive and finite, and a valid scaling (W = 24, heads = 2, kv_heads = 2, theta = 0)}}
  %0 = fsdp.rope %qkv {heads = 2 : i64, theta = 0.0 : f32} : (tensor<1x4x24xf32>) -> tensor<1x4x24xf32>
  return
}

// -----

func.func @f(%qkv: tensor<1x4x24xf32>) {
  // expected-error @+1 {{inconsistent shapes: result is [1, 4, 8], not [B, T, W] (B = 1, T = 4, W = 24)}}
  %0 = fsdp.rope %qkv {heads = 2 : i64} : (tensor<1x4x24xf32>) -> tensor<1x4x8xf32>
  return
}

// -----

func.func @f(%g: tensor<1x4x24xf32>) {
  // expected-error @+1 {{inconsistent shapes or head counts: grad [B, T, W] needs W = (heads + 2 kv_heads) hs with hs even, theta positive and finite, and a valid scaling (W = 24, heads = 1, kv_heads = 2, theta = 10000)}}
  %0 = fsdp.rope_backward %g {heads = 1 : i64, kv_heads = 2 : i64} : (tensor<1x4x24xf32>) -> tensor<1x4x24xf32>
  return
}

// -----

func.func @f(%qkv: tensor<1x4x24xf32>) {
  // expected-error @+1 {{attribute 'kv_heads' failed to satisfy constraint}}
  %0 = fsdp.rope %qkv {heads = 2 : i64, kv_heads = 0 : i64} : (tensor<1x4x24xf32>) -> tensor<1x4x24xf32>
  return
}

// -----

func.func @f(%qkv: tensor<1x4x32xf32>, %w: tensor<8xf32>) {
  // expected-error @+1 {{epsilon must be positive}}
  %0:2 = fsdp.qk_norm %qkv, %w, %w {heads = 2 : i64, kv_heads = 1 : i64, epsilon = 0.0 : f32} : (tensor<1x4x32xf32>, tensor<8xf32>, tensor<8xf32>) -> (tensor<1x4x32xf32>, tensor<1x4x3xf32>)
  return
}

// -----

func.func @f(%qkv: tensor<1x4x30xf32>, %w: tensor<8xf32>) {
  // expected-error @+1 {{inconsistent shapes or head counts: qkv [B, T, W] needs W = (heads + 2 kv_heads) hs (W = 30, heads = 2, kv_heads = 1, epsilon = 1e-06)}}
  %0:2 = fsdp.qk_norm %qkv, %w, %w {heads = 2 : i64, kv_heads = 1 : i64} : (tensor<1x4x30xf32>, tensor<8xf32>, tensor<8xf32>) -> (tensor<1x4x30xf32>, tensor<1x4x3xf32>)
  return
}

// -----

func.func @f(%qkv: tensor<1x4x32xf32>, %w: tensor<8xf32>, %k: tensor<4xf32>) {
  // expected-error @+1 {{inconsistent shapes: k_weight is [4], not #hs (hs = 8)}}
  %0:2 = fsdp.qk_norm %qkv, %w, %k {heads = 2 : i64, kv_heads = 1 : i64} : (tensor<1x4x32xf32>, tensor<8xf32>, tensor<4xf32>) -> (tensor<1x4x32xf32>, tensor<1x4x3xf32>)
  return
}

// -----

func.func @f(%qkv: tensor<1x4x32xf32>, %w: tensor<8xf32>) {
  // expected-error @+1 {{inconsistent shapes: rstd is [1, 4, 2], not [B, T, QK] (B = 1, T = 4, QK = 3)}}
  %0:2 = fsdp.qk_norm %qkv, %w, %w {heads = 2 : i64, kv_heads = 1 : i64} : (tensor<1x4x32xf32>, tensor<8xf32>, tensor<8xf32>) -> (tensor<1x4x32xf32>, tensor<1x4x2xf32>)
  return
}

// -----

func.func @f(%qkv: tensor<1x4x32xf32>, %w: tensor<8xf32>, %s: tensor<1x4x3xf32>) {
  // expected-error @+1 {{inconsistent shapes: q_weight_grad is [4], not #hs (hs = 8)}}
  %0:3 = fsdp.qk_norm_backward %qkv, %qkv, %w, %w, %s {heads = 2 : i64, kv_heads = 1 : i64} : (tensor<1x4x32xf32>, tensor<1x4x32xf32>, tensor<8xf32>, tensor<8xf32>, tensor<1x4x3xf32>) -> (tensor<1x4x32xf32>, tensor<4xf32>, tensor<8xf32>)
  return
}

// -----

func.func @f(%g: tensor<2x4x6xf32>, %t: tensor<2x4xi32>) {
  // expected-error @+1 {{inconsistent shapes: wte_grad is [11, 8], not [V, C] (V = 11, C = 6)}}
  %0 = fsdp.token_embedding_backward %g, %t : (tensor<2x4x6xf32>, tensor<2x4xi32>) -> tensor<11x8xf32>
  return
}

//===----------------------------------------------------------------------===//
// Mixture of experts (their shape rules: kernel-shapes-invalid.mlir)
//===----------------------------------------------------------------------===//

// -----

// The router computes in f32 (an F32 rule, not the kernel's element type):
// bf16 logits are refused, not run in bf16.
func.func @f(%logits: tensor<2x4x8xbf16>) {
  // expected-error @+1 {{operand #0 (logits) must be f32, got 'tensor<2x4x8xbf16>'}}
  %w, %e = fsdp.moe_router %logits : (tensor<2x4x8xbf16>) -> (tensor<2x4x2xf32>, tensor<2x4x2xi32>)
  return
}

// -----

func.func @f(%logits: tensor<2x4x8xf32>) {
  // expected-error @+1 {{result #0 (weights) must be f32, got 'tensor<2x4x2xbf16>'}}
  %w, %e = fsdp.moe_router %logits : (tensor<2x4x8xf32>) -> (tensor<2x4x2xbf16>, tensor<2x4x2xi32>)
  return
}

// -----

// Combine runs in its rows' type (bf16 here), its weights stay f32.
func.func @f(%rows: tensor<16x6xbf16>, %w: tensor<2x4x2xbf16>, %position: tensor<2x4x2xi32>) {
  // expected-error @+1 {{operand #1 (weights) must be f32, got 'tensor<2x4x2xbf16>'}}
  %r = fsdp.moe_combine %rows, %w, %position : (tensor<16x6xbf16>, tensor<2x4x2xbf16>, tensor<2x4x2xi32>) -> tensor<2x4x6xbf16>
  return
}

// -----

// Indices are i32 (FSDP_IndexTensor).
func.func @f(%x: tensor<2x4x6xf32>, %order: tensor<2x4x2xf32>) {
  // expected-error @+1 {{operand #1 must be statically shaped tensor of 32-bit signless integer values, but got 'tensor<2x4x2xf32>'}}
  %r = fsdp.moe_permute %x, %order : (tensor<2x4x6xf32>, tensor<2x4x2xf32>) -> tensor<16x6xf32>
  return
}
