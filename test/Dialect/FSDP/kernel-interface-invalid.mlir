// Every error of KernelOpInterface's verifier (detail::verifyKernelOp), one
// case each. The fsdp ops satisfy it by construction, so the cases use the
// test-only dialect fsdp_test (test/lib/Dialect/FSDPTest), whose ops declare
// the interface wrongly on purpose.
// RUN: fsdp-opt %s -split-input-file -verify-diagnostics

// The control: a test op that declares its kernel rightly verifies, so the
// errors below come from what each op gets wrong.
func.func @gelu(%x: tensor<4xf32>) -> tensor<4xf32> {
  %0 = fsdp_test.gelu %x : (tensor<4xf32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

// The opcode past the table (33 kernels, Embedding to Wait).
func.func @no_kernel(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{'fsdp_test.no_kernel' op lowers to opcode 38, which is no kernel}}
  %0 = fsdp_test.no_kernel %x : (tensor<4xf32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

func.func @not_gelu(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{'fsdp_test.not_gelu' op lowers to kernel 'gelu', which is not named after it}}
  %0 = fsdp_test.not_gelu %x : (tensor<4xf32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

// Below the kernel's inputs (input and weight; the bias is optional).
func.func @linear_too_few(%x: tensor<2x4xf32>) -> tensor<2x3xf32> {
  // expected-error @+1 {{'fsdp_test.linear' op has 1 operands, but kernel 'linear' takes 2 to 3 inputs}}
  %0 = fsdp_test.linear %x : (tensor<2x4xf32>) -> tensor<2x3xf32>
  return %0 : tensor<2x3xf32>
}

// -----

// Above them.
func.func @linear_too_many(%x: tensor<2x4xf32>, %w: tensor<3x4xf32>,
                           %b: tensor<3xf32>) -> tensor<2x3xf32> {
  // expected-error @+1 {{'fsdp_test.linear' op has 4 operands, but kernel 'linear' takes 2 to 3 inputs}}
  %0 = fsdp_test.linear %x, %w, %b, %b
      : (tensor<2x4xf32>, tensor<3x4xf32>, tensor<3xf32>, tensor<3xf32>)
      -> tensor<2x3xf32>
  return %0 : tensor<2x3xf32>
}

// -----

// Both input counts of the kernel verify.
func.func @linear(%x: tensor<2x4xf32>, %w: tensor<3x4xf32>,
                  %b: tensor<3xf32>) -> (tensor<2x3xf32>, tensor<2x3xf32>) {
  %0 = fsdp_test.linear %x, %w : (tensor<2x4xf32>, tensor<3x4xf32>)
      -> tensor<2x3xf32>
  %1 = fsdp_test.linear %x, %w, %b
      : (tensor<2x4xf32>, tensor<3x4xf32>, tensor<3xf32>) -> tensor<2x3xf32>
  return %0, %1 : tensor<2x3xf32>, tensor<2x3xf32>
}

// -----

// The results, then the scratch buffers, are not the kernel's outputs:
// fewer (no `dprobs` scratch: what forgetting getKernelScratch does) ...
func.func @attention_backward_no_scratch(%g: tensor<1x4x8xf32>,
    %qkv: tensor<1x4x24xf32>, %p: tensor<1x2x4x4xf32>) -> tensor<1x4x24xf32> {
  // expected-error @+1 {{'fsdp_test.attention_backward' op has 1 results and 0 scratch buffers, which are not the 2 outputs of kernel 'attention_backward'}}
  %0 = fsdp_test.attention_backward %g, %qkv, %p
      : (tensor<1x4x8xf32>, tensor<1x4x24xf32>, tensor<1x2x4x4xf32>)
      -> tensor<1x4x24xf32>
  return %0 : tensor<1x4x24xf32>
}

// -----

// ... as many, but a scratch output (`row_losses`) as a result ...
func.func @cross_entropy_scratch_as_result(%logits: tensor<4x8xf32>,
    %targets: tensor<4xi32>) -> tensor<f32> {
  // expected-error @+1 {{'fsdp_test.cross_entropy' op has 2 results and 0 scratch buffers, which are not the 2 outputs of kernel 'cross_entropy'}}
  %0:2 = fsdp_test.cross_entropy %logits, %targets
      : (tensor<4x8xf32>, tensor<4xi32>) -> (tensor<f32>, tensor<4xf32>)
  return %0#0 : tensor<f32>
}

// -----

// ... or more (scratch for a kernel that has none).
func.func @relu_extra_scratch(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{'fsdp_test.relu' op has 1 results and 1 scratch buffers, which are not the 1 outputs of kernel 'relu'}}
  %0 = fsdp_test.relu %x : (tensor<4xf32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}
