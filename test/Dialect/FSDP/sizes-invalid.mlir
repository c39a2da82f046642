// Sizes the compiler counts in int64: a parameter, a value of an fsdp op, a
// step input, a unit's flat parameter or an fsdprt buffer whose byte size
// overflows int64 is rejected by the verifier, once, so that the passes may
// compute sizes of verified IR without checks.
// RUN: fsdp-opt %s -split-input-file -verify-diagnostics

// 2^62 elements of 4 bytes: the elements fit, the bytes do not.
// expected-error @+1 {{'fsdp.param' op parameter @w of type 'tensor<4611686018427387904xf32>' holds more than 9223372036854775807 bytes, the most the compiler can count (int64)}}
fsdp.param @w : tensor<4611686018427387904xf32> init <zeros>

// -----

// 2^32 x 2^32: the element count itself overflows.
// expected-error @+1 {{parameter @w of type 'tensor<4294967296x4294967296xf32>' holds more than 9223372036854775807 bytes}}
fsdp.param @w : tensor<4294967296x4294967296xf32> init <zeros>

// -----

// The largest f32 tensor that fits: 2^61 - 1 elements (bytes 2^63 - 4).
fsdp.param @w : tensor<2305843009213693951xf32> init <zeros>
fsdp.unit @root params [@w]

// -----

// bf16 halves the bytes: 2^62 elements of 2 bytes do not fit, 2^62 - 1 do.
fsdp.param @ok : tensor<4611686018427387903xbf16> init <zeros>
// expected-error @+1 {{parameter @big of type 'tensor<4611686018427387904xbf16>' holds more}}
fsdp.param @big : tensor<4611686018427387904xbf16> init <zeros>

// -----

// Two parameters that fit, whose flat parameter (2^63 bytes) does not.
fsdp.param @a : tensor<1152921504606846976xf32> init <zeros>
fsdp.param @b : tensor<1152921504606846976xf32> init <zeros>
// expected-error @+1 {{'fsdp.unit' op has a flat parameter (its parameters together) of more than 9223372036854775807 bytes, the most the compiler can count (int64)}}
fsdp.unit @u params [@a, @b]

// -----

// A value of an op, from a step input too large to hold.
// expected-error @+1 {{'func.func' op 'fsdp.forward' function input #0 of type 'tensor<4294967296x4294967296x4xf32>' holds more than 9223372036854775807 bytes}}
func.func @forward(%x: tensor<4294967296x4294967296x4xf32>) -> tensor<f32> attributes {fsdp.forward} {
  %c = arith.constant dense<0.0> : tensor<f32>
  return %c : tensor<f32>
}

// -----

func.func @f(%x: tensor<1073741824x1073741824x8xf32>) -> tensor<1073741824x1073741824x8xf32> {
  // expected-error @+1 {{'fsdp.gelu' op operand #0 of type 'tensor<1073741824x1073741824x8xf32>' holds more than 9223372036854775807 bytes}}
  %y = fsdp.gelu %x : tensor<1073741824x1073741824x8xf32>
  return %y : tensor<1073741824x1073741824x8xf32>
}

// -----

func.func @f() -> tensor<2305843009213693952xf32> {
  // expected-error @+1 {{'fsdp.all_gather' op result #0 of type 'tensor<2305843009213693952xf32>' holds more than}}
  %0 = fsdp.all_gather @u : tensor<2305843009213693952xf32>
  return %0 : tensor<2305843009213693952xf32>
}

// -----

// A view whose offset plus size would wrap around int64.
func.func @f(%x: tensor<16xf32>) -> tensor<8xf32> {
  // expected-error @+1 {{'fsdp.view' op elements 9223372036854775800 .. }}
  %0 = fsdp.view %x[9223372036854775800] : tensor<16xf32> -> tensor<8xf32>
  return %0 : tensor<8xf32>
}

// -----

func.func @f() {
  // expected-error @+1 {{'fsdprt.buffer' op of type 'memref<4611686018427387904xf32>' holds more than 9223372036854775807 bytes, the most the compiler can count (int64)}}
  %0 = fsdprt.buffer <activation> : memref<4611686018427387904xf32>
  return
}

// -----

func.func @f() {
  %0 = fsdprt.buffer <activation> : memref<16xf32>
  // expected-error @+1 {{'fsdprt.view' op elements 9223372036854775800 .. }}
  %1 = fsdprt.view %0[9223372036854775800] : memref<16xf32> -> memref<8xf32>
  return
}
