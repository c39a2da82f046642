// The parser of fsdp.compute: its body is an isolated name scope (the op is
// isolated from above), so names never resolve across its braces, and a body
// that fails to parse leaves no use of its values behind. The second and third
// cases used to free the body's block argument while an op outside still used
// it (a heap corruption after the right error; valgrind on this file in CI,
// docs/testing.md). Parser errors end a file's parse, hence one per case.
// RUN: fsdp-opt %s -split-input-file -verify-diagnostics

fsdp.param @w : tensor<4xf32> init <ones>
fsdp.unit @u params [@w]
func.func @outer_name_inside(%x: tensor<4xf32>) {
  %0 = fsdp.compute @u forward ins(%x : tensor<4xf32>) -> tensor<4xf32> {
  ^bb0(%a: tensor<4xf32>):
    // expected-error @+1 {{use of undeclared SSA value name}}
    %1 = fsdp.add %a, %x : tensor<4xf32>
    fsdp.yield %1 : tensor<4xf32>
  }
  return
}

// -----

fsdp.param @w : tensor<4xf32> init <ones>
fsdp.unit @u params [@w]
func.func @repeated_label(%x: tensor<4xf32>) {
  %0 = fsdp.compute @u forward ins(%x : tensor<4xf32>) -> tensor<4xf32> {
  ^bb0(%a: tensor<4xf32>):
    %w = fsdp.load @w : tensor<4xf32>
    %1 = fsdp.add %a, %w : tensor<4xf32>
    fsdp.yield %1 : tensor<4xf32>
  // expected-error @+1 {{redefinition of block '^bb0'}}
  ^bb0(%b: tensor<4xf32>):
  return
}

// -----

// An op outside uses %a before any definition; the body defines a block
// argument %a and then fails.
fsdp.param @w : tensor<4xf32> init <ones>
fsdp.unit @u params [@w]
func.func @outer_forward_reference(%x: tensor<4xf32>) {
  %early = fsdp.add %a, %x : tensor<4xf32>
  %0 = fsdp.compute @u forward ins(%x : tensor<4xf32>) -> tensor<4xf32> {
  ^bb0(%a: tensor<4xf32>):
    %w = fsdp.load @w : tensor<4xf32>
    %1 = fsdp.add %a, %w : tensor<4xf32>
    fsdp.yield %1 : tensor<4xf32>
  // expected-error @+1 {{redefinition of block '^bb0'}}
  ^bb0(%b: tensor<4xf32>):
  return
}

// -----

fsdp.param @w : tensor<4xf32> init <ones>
fsdp.unit @u params [@w]
func.func @outer_forward_reference_resolved_inside(%x: tensor<4xf32>) {
  // expected-error @+1 {{use of undeclared SSA value name}}
  %early = fsdp.add %a, %x : tensor<4xf32>
  %0 = fsdp.compute @u forward ins(%x : tensor<4xf32>) -> tensor<4xf32> {
  ^bb0(%a: tensor<4xf32>):
    fsdp.yield %a : tensor<4xf32>
  }
  return
}
