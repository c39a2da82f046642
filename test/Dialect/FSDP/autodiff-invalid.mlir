// RUN: fsdp-opt %s -split-input-file -verify-diagnostics --fsdp-autodiff
// RUN: not fsdp-opt %s -split-input-file --fsdp-autodiff="beta1=1.0" 2>&1 | FileCheck %s --check-prefix=BETA
// RUN: not fsdp-opt %s -split-input-file --fsdp-autodiff="forward=model" 2>&1 | FileCheck %s --check-prefix=MISSING

// BETA: fsdp-autodiff: beta1 must lie in [0, 1) as an f32, got 1
// MISSING: fsdp-autodiff: no function @model with a body to differentiate

fsdp.param @w : tensor<4x4xf32> init <normal, std = 0.02>
func.func @forward(%x: tensor<2x4xf32>, %t: tensor<2xi32>) -> tensor<f32> {
  %w = fsdp.load @w : tensor<4x4xf32>
  %y = fsdp.linear %x, %w : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
  // expected-error @+1 {{'arith.mulf' op is not differentiable, but the loss depends on its result}}
  %z = arith.mulf %y, %y : tensor<2x4xf32>
  %l = fsdp.cross_entropy %z, %t : (tensor<2x4xf32>, tensor<2xi32>) -> tensor<f32>
  return %l : tensor<f32>
}

// -----

fsdp.param @w : tensor<4xf32> init <ones>
fsdp.param @b : tensor<4xf32> init <zeros>
func.func @forward(%x: tensor<2x4xf32>, %t: tensor<i32>) -> tensor<f32> {
  %w = fsdp.load @w : tensor<4xf32>
  %b = fsdp.load @b : tensor<4xf32>
  // expected-error @+1 {{result #1 is a saved statistic and cannot be differentiated through}}
  %y, %mean, %rstd = fsdp.layer_norm %x, %w, %b : (tensor<2x4xf32>, tensor<4xf32>, tensor<4xf32>) -> (tensor<2x4xf32>, tensor<2xf32>, tensor<2xf32>)
  %l = fsdp.cross_entropy %mean, %t : (tensor<2xf32>, tensor<i32>) -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// A forward without the fsdp.forward marker is still checked by the pass.
// expected-error @+1 {{fsdp-autodiff: @forward must return exactly one scalar loss, but returns 'tensor<2x4xf32>'}}
func.func @forward(%x: tensor<2x4xf32>) -> tensor<2x4xf32> {
  return %x : tensor<2x4xf32>
}

// -----

// expected-error @+1 {{fsdp-autodiff: the module already has a @train_step}}
module {
  func.func @forward(%l: tensor<f32>) -> tensor<f32> {
    return %l : tensor<f32>
  }
  func.func private @train_step()
}

// -----

// moe_permute's backward reads the sort's position: an order that no
// fsdp.moe_sort computed (an argument here) has none.
func.func @forward(%x: tensor<2x3x6xf32>, %order: tensor<2x3x2xi32>, %t: tensor<12xi32>) -> tensor<f32> {
  // expected-error @+1 {{'fsdp.moe_permute' op differentiates only an order that an fsdp.moe_sort computes (its backward reads the sort's position)}}
  %xs = fsdp.moe_permute %x, %order : (tensor<2x3x6xf32>, tensor<2x3x2xi32>) -> tensor<12x6xf32>
  %l = fsdp.cross_entropy %xs, %t : (tensor<12x6xf32>, tensor<12xi32>) -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// Nor a sort's position read as its order.
func.func @forward(%x: tensor<2x3x6xf32>, %e: tensor<2x3x2xi32>, %t: tensor<12xi32>) -> tensor<f32> {
  %order, %position, %offsets = fsdp.moe_sort %e {num_experts = 4} : (tensor<2x3x2xi32>) -> (tensor<2x3x2xi32>, tensor<2x3x2xi32>, tensor<5xi32>)
  // expected-error @+1 {{differentiates only an order that an fsdp.moe_sort computes}}
  %xs = fsdp.moe_permute %x, %position : (tensor<2x3x6xf32>, tensor<2x3x2xi32>) -> tensor<12x6xf32>
  %l = fsdp.cross_entropy %xs, %t : (tensor<12x6xf32>, tensor<12xi32>) -> tensor<f32>
  return %l : tensor<f32>
}
