// RUN: fsdp-opt %s -split-input-file -verify-diagnostics --fsdp-wrap
// RUN: not fsdp-opt %s --fsdp-wrap=policy=blocks 2>&1 | FileCheck %s --check-prefix=POLICY
// RUN: not fsdp-opt %s --fsdp-wrap="policy=size-threshold threshold-bytes=0" 2>&1 | FileCheck %s --check-prefix=THRESHOLD
// RUN: not fsdp-opt %s --fsdp-wrap="policy=none split-ends=true" 2>&1 | FileCheck %s --check-prefix=ENDS

// POLICY: error: fsdp-wrap: unknown wrap policy 'blocks', expected per-block, size-threshold, none or given
// THRESHOLD: error: fsdp-wrap: threshold-bytes must be positive, got 0
// ENDS: error: fsdp-wrap: split-ends applies to policy=per-block, not 'none'

fsdp.param @a.0.w : tensor<4x4xf32> init <normal, std = 0.02>
fsdp.param @a.1.w : tensor<4x4xf32> init <normal, std = 0.02>
func.func @forward(%x: tensor<2x4xf32>, %t: tensor<2xi32>) -> tensor<f32> attributes {fsdp.forward} {
  %w0 = fsdp.load @a.0.w : tensor<4x4xf32>
  %w1 = fsdp.load @a.1.w : tensor<4x4xf32>
  // expected-error @+1 {{reads parameters of units @a.0 and @a.1; an op computes with one unit's parameters (pick a policy that puts them in one unit)}}
  %s = fsdp.add %w0, %w1 : tensor<4x4xf32>
  %y = fsdp.linear %x, %s : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
  %l = fsdp.cross_entropy %y, %t : (tensor<2x4xf32>, tensor<2xi32>) -> tensor<f32>
  return %l : tensor<f32>
}

// -----

fsdp.param @w : tensor<4xf32> init <zeros>
fsdp.unit @u params [@w]
func.func @train_step() {
  // expected-error @+1 {{is a backward region: fsdp-wrap runs before fsdp-autodiff}}
  fsdp.compute @u backward {
    fsdp.yield
  }
  return
}
