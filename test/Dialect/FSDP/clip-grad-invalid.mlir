// Every error of --fsdp-clip-grad, one case each.
// RUN: fsdp-opt %s -split-input-file -verify-diagnostics --fsdp-clip-grad
// A norm that is not a positive, finite f32 (the coefficient's attribute),
// also through the pipeline:
// RUN: not fsdp-opt %s -split-input-file --fsdp-clip-grad=max-norm=-1 2>&1 | FileCheck %s --check-prefix=NORM
// RUN: not fsdp-opt %s -split-input-file --fsdp-clip-grad=max-norm=inf 2>&1 | FileCheck %s --check-prefix=INF
// RUN: fsdp-gen mlp --layers 1 --width 4 --in-features 4 --classes 2 --batch 2 | not fsdp-opt --fsdp-train-pipeline=grad-clip=-0.5 2>&1 | FileCheck %s --check-prefix=PIPELINE
// RUN: not fsdp-opt %s -split-input-file --fsdp-clip-grad=max-norm=1e39 2>&1 | FileCheck %s --check-prefix=HUGE
// RUN: not fsdp-opt %s -split-input-file --fsdp-clip-grad=max-norm=1e-50 2>&1 | FileCheck %s --check-prefix=TINY
// HUGE: error: fsdp-clip-grad: max-norm must be a positive, finite f32, got 1e+39
// TINY: error: fsdp-clip-grad: max-norm must be a positive, finite f32, got 1e-50
// NORM: error: fsdp-clip-grad: max-norm must be a positive, finite f32, got -1
// INF: error: fsdp-clip-grad: max-norm must be a positive, finite f32, got inf
// PIPELINE: error: fsdp-clip-grad: max-norm must be a positive, finite f32, got -0.5

// An unsharded step: there are no shards to sum over.
// expected-error @+1 {{fsdp-clip-grad: no sharded function marked fsdp.train_step (run --fsdp-shard first)}}
module {
  fsdp.param @w : tensor<2x2xf32> init <zeros>
  fsdp.unit @u params [@w]
  func.func @train_step(%s: i64) -> tensor<f32> attributes {fsdp.train_step} {
    %w = fsdp.load @w : tensor<2x2xf32>
    %t = arith.constant dense<0> : tensor<2xi32>
    %l = fsdp.cross_entropy %w, %t : (tensor<2x2xf32>, tensor<2xi32>) -> tensor<f32>
    return %l : tensor<f32>
  }
}

// -----

// A scheduled step: the sums would land after the waits that the schedule
// placed before the shards' first reads.
// expected-error @+1 {{fsdp-clip-grad: @train_step is already scheduled: run --fsdp-clip-grad before --fsdp-schedule}}
module attributes {fsdp.mesh = #fsdp.mesh<["shard" = 2]>} {
  fsdp.param @w : tensor<2xf32> init <zeros>
  fsdp.unit @u params [@w]
  func.func @train_step(%x: tensor<2xf32>, %s: i64) -> tensor<f32> attributes {fsdp.train_step} {
    %tok, %g = fsdp.all_gather_start @u stream 1 : tensor<2xf32>
    fsdp.wait %tok
    fsdp.free %g : tensor<2xf32>
    %t = arith.constant dense<0> : tensor<i32>
    %l = fsdp.cross_entropy %x, %t : (tensor<2xf32>, tensor<i32>) -> tensor<f32>
    return %l : tensor<f32>
  }
}

// -----

// Clipped twice would all-reduce twice and scale once.
// expected-error @+1 {{fsdp-clip-grad: @train_step already clips its gradients}}
module attributes {fsdp.mesh = #fsdp.mesh<["shard" = 2]>} {
  fsdp.param @w : tensor<2xf32> init <zeros>
  fsdp.unit @u params [@w]
  func.func @train_step(%x: tensor<2xf32>, %s: i64) -> tensor<f32> attributes {fsdp.train_step} {
    %g = fsdp.all_gather @u : tensor<2xf32>
    fsdp.free %g : tensor<2xf32>
    %t = arith.constant dense<0> : tensor<i32>
    %l = fsdp.cross_entropy %x, %t : (tensor<2xf32>, tensor<i32>) -> tensor<f32>
    %f = fsdp.pack %x : (tensor<2xf32>) -> tensor<2xf32>
    %sh = fsdp.reduce_scatter %f @u : tensor<2xf32> -> tensor<1xf32>
    fsdp.free %f : tensor<2xf32>
    %q = fsdp.grad_sq_sum @u, %sh : tensor<1xf32>
    %r = fsdp.all_reduce_sum %q : tensor<f32>
    %c = fsdp.clip_coefficient %r {max_norm = 1.0 : f32}
    fsdp.adamw_shard @u, %sh, %s scale %c {lr = 1.0e-3 : f32, beta1 = 0.9 : f32, beta2 = 0.95 : f32, eps = 1.0e-8 : f32, weight_decay = 0.0 : f32} : tensor<1xf32>
    return %l : tensor<f32>
  }
}

// -----

// An AdamW whose gradient is no reduce-scatter's shard.
module attributes {fsdp.mesh = #fsdp.mesh<["shard" = 2]>} {
  fsdp.param @w : tensor<2xf32> init <zeros>
  fsdp.unit @u params [@w]
  func.func @train_step(%x: tensor<2xf32>, %sh: tensor<1xf32>, %s: i64) -> tensor<f32> attributes {fsdp.train_step} {
    %g = fsdp.all_gather @u : tensor<2xf32>
    fsdp.free %g : tensor<2xf32>
    %t = arith.constant dense<0> : tensor<i32>
    %l = fsdp.cross_entropy %x, %t : (tensor<2xf32>, tensor<i32>) -> tensor<f32>
    // expected-error @+1 {{updates from a gradient that is no reduce-scatter's shard: fsdp-clip-grad cannot sum its squares}}
    fsdp.adamw_shard @u, %sh, %s {lr = 1.0e-3 : f32, beta1 = 0.9 : f32, beta2 = 0.95 : f32, eps = 1.0e-8 : f32, weight_decay = 0.0 : f32} : tensor<1xf32>
    return %l : tensor<f32>
  }
}

// -----

// Nothing to clip: a sharded step without an optimizer.
module attributes {fsdp.mesh = #fsdp.mesh<["shard" = 2]>} {
  fsdp.param @w : tensor<2xf32> init <zeros>
  fsdp.unit @u params [@w]
  // expected-error @+1 {{fsdp-clip-grad: @train_step has no fsdp.adamw_shard to clip}}
  func.func @train_step(%x: tensor<2xf32>, %s: i64) -> tensor<f32> attributes {fsdp.train_step} {
    %g = fsdp.all_gather @u : tensor<2xf32>
    fsdp.free %g : tensor<2xf32>
    %t = arith.constant dense<0> : tensor<i32>
    %l = fsdp.cross_entropy %x, %t : (tensor<2xf32>, tensor<i32>) -> tensor<f32>
    return %l : tensor<f32>
  }
}
