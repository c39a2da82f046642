// RUN: fsdp-opt %s -split-input-file -verify-diagnostics --fsdp-verify

// A correct sharded step passes (one unit, world size 2).
module attributes {fsdp.mesh = #fsdp.mesh<["shard" = 2]>} {
  fsdp.param @w : tensor<2x2xf32> init <zeros>
  fsdp.unit @u params [@w]
  func.func @train_step(%x: tensor<1x2xf32>, %t: tensor<1xi32>, %s: i64) -> tensor<f32> attributes {fsdp.train_step} {
    %g = fsdp.all_gather @u : tensor<4xf32>
    %y = fsdp.compute @u forward ins(%x, %g : tensor<1x2xf32>, tensor<4xf32>) -> tensor<1x2xf32> {
    ^bb0(%a: tensor<1x2xf32>, %p: tensor<4xf32>):
      %w = fsdp.view %p[0] : tensor<4xf32> -> tensor<2x2xf32>
      %o = fsdp.linear %a, %w : (tensor<1x2xf32>, tensor<2x2xf32>) -> tensor<1x2xf32>
      fsdp.yield %o : tensor<1x2xf32>
    }
    fsdp.free %g : tensor<4xf32>
    %l = fsdp.cross_entropy %y, %t : (tensor<1x2xf32>, tensor<1xi32>) -> tensor<f32>
    %z = arith.constant dense<0.0> : tensor<2x2xf32>
    %f = fsdp.pack %z : (tensor<2x2xf32>) -> tensor<4xf32>
    %sh = fsdp.reduce_scatter %f @u : tensor<4xf32> -> tensor<2xf32>
    fsdp.free %f : tensor<4xf32>
    fsdp.adamw_shard @u, %sh, %s {lr = 1.0e-3 : f32, beta1 = 0.9 : f32, beta2 = 0.95 : f32, eps = 1.0e-8 : f32, weight_decay = 0.0 : f32} : tensor<2xf32>
    return %l : tensor<f32>
  }
}

// -----

module attributes {fsdp.mesh = #fsdp.mesh<["shard" = 2]>} {
  fsdp.param @w : tensor<2x2xf32> init <zeros>
  fsdp.unit @u params [@w]
  func.func @train_step(%x: tensor<1x2xf32>, %t: tensor<1xi32>) -> tensor<f32> attributes {fsdp.train_step} {
    // expected-error @+1 {{produces a tensor that is never freed (fsdp.free): the gathered memory would stay for the rest of the step}}
    %g = fsdp.all_gather @u : tensor<4xf32>
    %y = fsdp.compute @u forward ins(%x, %g : tensor<1x2xf32>, tensor<4xf32>) -> tensor<1x2xf32> {
    ^bb0(%a: tensor<1x2xf32>, %p: tensor<4xf32>):
      %w = fsdp.view %p[0] : tensor<4xf32> -> tensor<2x2xf32>
      %o = fsdp.linear %a, %w : (tensor<1x2xf32>, tensor<2x2xf32>) -> tensor<1x2xf32>
      fsdp.yield %o : tensor<1x2xf32>
    }
    %l = fsdp.cross_entropy %y, %t : (tensor<1x2xf32>, tensor<1xi32>) -> tensor<f32>
    return %l : tensor<f32>
  }
}

// -----

module attributes {fsdp.mesh = #fsdp.mesh<["shard" = 2]>} {
  fsdp.param @w : tensor<2x2xf32> init <zeros>
  fsdp.unit @u params [@w]
  func.func @train_step(%x: tensor<1x2xf32>, %t: tensor<1xi32>) -> tensor<f32> attributes {fsdp.train_step} {
    %g = fsdp.all_gather @u : tensor<4xf32>
    // expected-note @+1 {{freed here}}
    fsdp.free %g : tensor<4xf32>
    // expected-error @+1 {{uses a tensor after it was freed}}
    %y = fsdp.compute @u forward ins(%x, %g : tensor<1x2xf32>, tensor<4xf32>) -> tensor<1x2xf32> {
    ^bb0(%a: tensor<1x2xf32>, %p: tensor<4xf32>):
      %w = fsdp.view %p[0] : tensor<4xf32> -> tensor<2x2xf32>
      %o = fsdp.linear %a, %w : (tensor<1x2xf32>, tensor<2x2xf32>) -> tensor<1x2xf32>
      fsdp.yield %o : tensor<1x2xf32>
    }
    %l = fsdp.cross_entropy %y, %t : (tensor<1x2xf32>, tensor<1xi32>) -> tensor<f32>
    return %l : tensor<f32>
  }
}

// -----

module attributes {fsdp.mesh = #fsdp.mesh<["shard" = 2]>} {
  fsdp.param @w : tensor<2x2xf32> init <zeros>
  fsdp.unit @u params [@w]
  func.func @train_step(%x: tensor<1x2xf32>, %t: tensor<1xi32>) -> tensor<f32> attributes {fsdp.train_step} {
    %g = fsdp.all_gather @u : tensor<4xf32>
    // expected-note @+1 {{first freed here}}
    fsdp.free %g : tensor<4xf32>
    // expected-error @+1 {{frees a tensor twice}}
    fsdp.free %g : tensor<4xf32>
    %l = fsdp.cross_entropy %x, %t : (tensor<1x2xf32>, tensor<1xi32>) -> tensor<f32>
    return %l : tensor<f32>
  }
}

// -----

module attributes {fsdp.mesh = #fsdp.mesh<["shard" = 2]>} {
  fsdp.param @w : tensor<2x2xf32> init <zeros>
  fsdp.unit @u params [@w]
  func.func @train_step(%x: tensor<1x2xf32>, %t: tensor<1xi32>) -> tensor<f32> attributes {fsdp.train_step} {
    %g = fsdp.all_gather @u : tensor<4xf32>
    fsdp.free %g : tensor<4xf32>
    %y = fsdp.compute @u forward ins(%x : tensor<1x2xf32>) -> tensor<1x2xf32> {
    ^bb0(%a: tensor<1x2xf32>):
      // expected-error @+1 {{reads parameter @w without gathering it: a sharded step reads parameters as views of their unit's fsdp.all_gather}}
      %w = fsdp.load @w : tensor<2x2xf32>
      %o = fsdp.linear %a, %w : (tensor<1x2xf32>, tensor<2x2xf32>) -> tensor<1x2xf32>
      fsdp.yield %o : tensor<1x2xf32>
    }
    %l = fsdp.cross_entropy %y, %t : (tensor<1x2xf32>, tensor<1xi32>) -> tensor<f32>
    return %l : tensor<f32>
  }
}

// -----

module attributes {fsdp.mesh = #fsdp.mesh<["shard" = 2]>} {
  fsdp.param @a : tensor<4xf32> init <zeros>
  fsdp.param @b : tensor<4xf32> init <zeros>
  fsdp.unit @ua params [@a]
  fsdp.unit @ub params [@b]
  func.func @train_step(%x: tensor<1x2xf32>, %t: tensor<1xi32>) -> tensor<f32> attributes {fsdp.train_step} {
    // expected-note @+1 {{gathered here}}
    %g = fsdp.all_gather @ub : tensor<4xf32>
    %y = fsdp.compute @ua forward ins(%g : tensor<4xf32>) -> tensor<4xf32> {
    ^bb0(%p: tensor<4xf32>):
      // expected-error @+1 {{in a region of unit @ua views the parameters of unit @ub}}
      %v = fsdp.view %p[0] : tensor<4xf32> -> tensor<4xf32>
      fsdp.yield %v : tensor<4xf32>
    }
    fsdp.free %g : tensor<4xf32>
    %l = fsdp.cross_entropy %x, %t : (tensor<1x2xf32>, tensor<1xi32>) -> tensor<f32>
    return %l : tensor<f32>
  }
}

// -----

module attributes {fsdp.mesh = #fsdp.mesh<["shard" = 2]>} {
  fsdp.param @w : tensor<2x2xf32> init <zeros>
  fsdp.unit @u params [@w]
  func.func @train_step(%x: tensor<1x2xf32>, %t: tensor<1xi32>, %s: i64) -> tensor<f32> attributes {fsdp.train_step} {
    %g = fsdp.all_gather @u : tensor<4xf32>
    fsdp.free %g : tensor<4xf32>
    %l = fsdp.cross_entropy %x, %t : (tensor<1x2xf32>, tensor<1xi32>) -> tensor<f32>
    %z = arith.constant dense<0.0> : tensor<2xf32>
    // expected-error @+1 {{updates unit @u from a gradient that is not that unit's reduce-scatter: the gradient shard would be missing}}
    fsdp.adamw_shard @u, %z, %s {lr = 1.0e-3 : f32, beta1 = 0.9 : f32, beta2 = 0.95 : f32, eps = 1.0e-8 : f32, weight_decay = 0.0 : f32} : tensor<2xf32>
    return %l : tensor<f32>
  }
}

// -----

module attributes {fsdp.mesh = #fsdp.mesh<["shard" = 2]>} {
  fsdp.param @w : tensor<2x2xf32> init <zeros>
  fsdp.unit @u params [@w]
  func.func @train_step(%x: tensor<1x2xf32>, %t: tensor<1xi32>) -> tensor<f32> attributes {fsdp.train_step} {
    %g = fsdp.all_gather @u : tensor<4xf32>
    fsdp.free %g : tensor<4xf32>
    %z = arith.constant dense<0.0> : tensor<4xf32>
    %f = fsdp.pack %z : (tensor<4xf32>) -> tensor<4xf32>
    // expected-note @+1 {{first reduce-scatter here}}
    %s1 = fsdp.reduce_scatter %f @u : tensor<4xf32> -> tensor<2xf32>
    fsdp.free %f : tensor<4xf32>
    %f2 = fsdp.pack %z : (tensor<4xf32>) -> tensor<4xf32>
    // expected-error @+1 {{reduce-scatters unit @u a second time}}
    %s2 = fsdp.reduce_scatter %f2 @u : tensor<4xf32> -> tensor<2xf32>
    fsdp.free %f2 : tensor<4xf32>
    %l = fsdp.cross_entropy %x, %t : (tensor<1x2xf32>, tensor<1xi32>) -> tensor<f32>
    return %l : tensor<f32>
  }
}

// -----

module attributes {fsdp.mesh = #fsdp.mesh<["shard" = 2]>} {
  fsdp.param @w : tensor<2x2xf32> init <zeros>
  fsdp.unit @u params [@w]
  func.func @train_step(%x: tensor<1x2xf32>, %t: tensor<1xi32>) -> tensor<f32> attributes {fsdp.train_step} {
    %g = fsdp.all_gather @u : tensor<4xf32>
    fsdp.free %g : tensor<4xf32>
    %y = fsdp.compute @u forward ins(%x : tensor<1x2xf32>) -> tensor<1x2xf32> {
    ^bb0(%a: tensor<1x2xf32>):
      // expected-error @+1 {{is nested in a region; inside control flow it could run a different number of times on different ranks}}
      %h = fsdp.all_gather @u : tensor<4xf32>
      fsdp.yield %a : tensor<1x2xf32>
    }
    %l = fsdp.cross_entropy %y, %t : (tensor<1x2xf32>, tensor<1xi32>) -> tensor<f32>
    return %l : tensor<f32>
  }
}

// -----

module attributes {fsdp.mesh = #fsdp.mesh<["shard" = 2]>} {
  fsdp.param @w : tensor<2x2xf32> init <zeros>
  fsdp.unit @u params [@w]
  func.func @train_step(%x: tensor<1x2xf32>, %t: tensor<1xi32>) -> tensor<f32> attributes {fsdp.train_step} {
    // expected-error @+1 {{is never waited for: its result would never be known to be complete}}
    %tok, %g = fsdp.all_gather_start @u stream 1 : tensor<4xf32>
    fsdp.free %g : tensor<4xf32>
    %l = fsdp.cross_entropy %x, %t : (tensor<1x2xf32>, tensor<1xi32>) -> tensor<f32>
    return %l : tensor<f32>
  }
}

// -----

module attributes {fsdp.mesh = #fsdp.mesh<["shard" = 2]>} {
  fsdp.param @w : tensor<2x2xf32> init <zeros>
  fsdp.unit @u params [@w]
  func.func @train_step(%x: tensor<1x2xf32>, %t: tensor<1xi32>) -> tensor<f32> attributes {fsdp.train_step} {
    %tok, %g = fsdp.all_gather_start @u stream 1 : tensor<4xf32>
    // expected-error @+1 {{reads the result of a collective before waiting for it}}
    %y = fsdp.compute @u forward ins(%x, %g : tensor<1x2xf32>, tensor<4xf32>) -> tensor<1x2xf32> {
    ^bb0(%a: tensor<1x2xf32>, %p: tensor<4xf32>):
      %w = fsdp.view %p[0] : tensor<4xf32> -> tensor<2x2xf32>
      %o = fsdp.linear %a, %w : (tensor<1x2xf32>, tensor<2x2xf32>) -> tensor<1x2xf32>
      fsdp.yield %o : tensor<1x2xf32>
    }
    // expected-note @+1 {{the wait is here}}
    fsdp.wait %tok
    fsdp.free %g : tensor<4xf32>
    %l = fsdp.cross_entropy %y, %t : (tensor<1x2xf32>, tensor<1xi32>) -> tensor<f32>
    return %l : tensor<f32>
  }
}

// -----

module attributes {fsdp.mesh = #fsdp.mesh<["shard" = 2]>, fsdp.max_inflight_gathers = 1 : i64} {
  fsdp.param @a : tensor<4xf32> init <zeros>
  fsdp.param @b : tensor<4xf32> init <zeros>
  fsdp.unit @ua params [@a]
  fsdp.unit @ub params [@b]
  func.func @train_step(%x: tensor<1x2xf32>, %t: tensor<1xi32>) -> tensor<f32> attributes {fsdp.train_step} {
    %t1, %g1 = fsdp.all_gather_start @ua stream 1 : tensor<4xf32>
    // expected-error @+1 {{starts gather number 2 in flight; the schedule allows 1}}
    %t2, %g2 = fsdp.all_gather_start @ub stream 1 : tensor<4xf32>
    fsdp.wait %t1
    fsdp.wait %t2
    fsdp.free %g1 : tensor<4xf32>
    fsdp.free %g2 : tensor<4xf32>
    %l = fsdp.cross_entropy %x, %t : (tensor<1x2xf32>, tensor<1xi32>) -> tensor<f32>
    return %l : tensor<f32>
  }
}

// -----

// A bucket counts as one gather: the limit of 1 holds for two grouped
// starts.
module attributes {fsdp.mesh = #fsdp.mesh<["shard" = 2]>, fsdp.max_inflight_gathers = 1 : i64} {
  fsdp.param @a : tensor<4xf32> init <zeros>
  fsdp.param @b : tensor<4xf32> init <zeros>
  fsdp.unit @ua params [@a]
  fsdp.unit @ub params [@b]
  func.func @train_step(%x: tensor<1x2xf32>, %t: tensor<1xi32>) -> tensor<f32> attributes {fsdp.train_step} {
    %t1, %g1 = fsdp.all_gather_start @ua stream 1 : tensor<4xf32>
    %t2, %g2 = fsdp.all_gather_start @ub stream 1 grouped : tensor<4xf32>
    fsdp.wait %t1
    fsdp.wait %t2
    fsdp.free %g1 : tensor<4xf32>
    fsdp.free %g2 : tensor<4xf32>
    %l = fsdp.cross_entropy %x, %t : (tensor<1x2xf32>, tensor<1xi32>) -> tensor<f32>
    return %l : tensor<f32>
  }
}

// -----

// The reduce-scatter consumes the full-size gradient (the CPU ring adds
// partial sums into it): afterwards it may only be freed.
module attributes {fsdp.mesh = #fsdp.mesh<["shard" = 2]>} {
  fsdp.param @w : tensor<2x2xf32> init <zeros>
  fsdp.unit @u params [@w]
  func.func @train_step(%x: tensor<1x2xf32>, %t: tensor<1xi32>, %s: i64) -> tensor<f32> attributes {fsdp.train_step} {
    %g = fsdp.all_gather @u : tensor<4xf32>
    fsdp.free %g : tensor<4xf32>
    %z = arith.constant dense<0.0> : tensor<4xf32>
    %f = fsdp.pack %z : (tensor<4xf32>) -> tensor<4xf32>
    // expected-note @+1 {{reduce-scatter here}}
    %s1 = fsdp.reduce_scatter %f @u : tensor<4xf32> -> tensor<2xf32>
    // expected-error @+1 {{reads the full-size gradient of unit @u after its reduce-scatter, which consumes it}}
    %y = fsdp.gelu %f : tensor<4xf32>
    fsdp.free %f : tensor<4xf32>
    fsdp.adamw_shard @u, %s1, %s {lr = 1.0e-3 : f32, beta1 = 0.9 : f32, beta2 = 0.95 : f32, eps = 1.0e-8 : f32, weight_decay = 0.0 : f32} : tensor<2xf32>
    %l = fsdp.cross_entropy %x, %t : (tensor<1x2xf32>, tensor<1xi32>) -> tensor<f32>
    return %l : tensor<f32>
  }
}

// -----

// Gradient clipping by the global norm passes: every unit's shard summed once, all-reduced, one coefficient for every AdamW.
module attributes {fsdp.mesh = #fsdp.mesh<["shard" = 2]>} {
  fsdp.param @a : tensor<2xf32> init <zeros>
  fsdp.param @b : tensor<2xf32> init <zeros>
  fsdp.unit @u params [@a]
  fsdp.unit @v params [@b]
  func.func @train_step(%x: tensor<2xf32>, %s: i64) -> tensor<f32> attributes {fsdp.train_step} {
    %g = fsdp.all_gather @u : tensor<2xf32>
    fsdp.free %g : tensor<2xf32>
    %t = arith.constant dense<0> : tensor<i32>
    %l = fsdp.cross_entropy %x, %t : (tensor<2xf32>, tensor<i32>) -> tensor<f32>
    %fu = fsdp.pack %x : (tensor<2xf32>) -> tensor<2xf32>
    %su = fsdp.reduce_scatter %fu @u : tensor<2xf32> -> tensor<1xf32>
    fsdp.free %fu : tensor<2xf32>
    %fv = fsdp.pack %x : (tensor<2xf32>) -> tensor<2xf32>
    %sv = fsdp.reduce_scatter %fv @v : tensor<2xf32> -> tensor<1xf32>
    fsdp.free %fv : tensor<2xf32>
    %qu = fsdp.grad_sq_sum @u, %su : tensor<1xf32>
    %qv = fsdp.grad_sq_sum @v, %sv, %qu : tensor<1xf32>
    %r = fsdp.all_reduce_sum %qv : tensor<f32>
    %c = fsdp.clip_coefficient %r {max_norm = 1.0 : f32}
    fsdp.adamw_shard @u, %su, %s scale %c {lr = 1.0e-3 : f32, beta1 = 0.9 : f32, beta2 = 0.95 : f32, eps = 1.0e-8 : f32, weight_decay = 0.0 : f32} : tensor<1xf32>
    fsdp.adamw_shard @v, %sv, %s scale %c {lr = 1.0e-3 : f32, beta1 = 0.9 : f32, beta2 = 0.95 : f32, eps = 1.0e-8 : f32, weight_decay = 0.0 : f32} : tensor<1xf32>
    return %l : tensor<f32>
  }
}

// -----

// An AdamW without the scale the others have would not be clipped.
module attributes {fsdp.mesh = #fsdp.mesh<["shard" = 2]>} {
  fsdp.param @a : tensor<2xf32> init <zeros>
  fsdp.param @b : tensor<2xf32> init <zeros>
  fsdp.unit @u params [@a]
  fsdp.unit @v params [@b]
  func.func @train_step(%x: tensor<2xf32>, %s: i64) -> tensor<f32> attributes {fsdp.train_step} {
    %g = fsdp.all_gather @u : tensor<2xf32>
    fsdp.free %g : tensor<2xf32>
    %t = arith.constant dense<0> : tensor<i32>
    %l = fsdp.cross_entropy %x, %t : (tensor<2xf32>, tensor<i32>) -> tensor<f32>
    %fu = fsdp.pack %x : (tensor<2xf32>) -> tensor<2xf32>
    %su = fsdp.reduce_scatter %fu @u : tensor<2xf32> -> tensor<1xf32>
    fsdp.free %fu : tensor<2xf32>
    %fv = fsdp.pack %x : (tensor<2xf32>) -> tensor<2xf32>
    %sv = fsdp.reduce_scatter %fv @v : tensor<2xf32> -> tensor<1xf32>
    fsdp.free %fv : tensor<2xf32>
    %qu = fsdp.grad_sq_sum @u, %su : tensor<1xf32>
    %qv = fsdp.grad_sq_sum @v, %sv, %qu : tensor<1xf32>
    %r = fsdp.all_reduce_sum %qv : tensor<f32>
    %c = fsdp.clip_coefficient %r {max_norm = 1.0 : f32}
    // expected-note @+1 {{scaled here}}
    fsdp.adamw_shard @u, %su, %s scale %c {lr = 1.0e-3 : f32, beta1 = 0.9 : f32, beta2 = 0.95 : f32, eps = 1.0e-8 : f32, weight_decay = 0.0 : f32} : tensor<1xf32>
    // expected-error @+1 {{updates unit @v without the clipping scale of unit @u}}
    fsdp.adamw_shard @v, %sv, %s {lr = 1.0e-3 : f32, beta1 = 0.9 : f32, beta2 = 0.95 : f32, eps = 1.0e-8 : f32, weight_decay = 0.0 : f32} : tensor<1xf32>
    return %l : tensor<f32>
  }
}

// -----

// A scale that is no clip coefficient.
module attributes {fsdp.mesh = #fsdp.mesh<["shard" = 2]>} {
  fsdp.param @a : tensor<2xf32> init <zeros>
  fsdp.param @b : tensor<2xf32> init <zeros>
  fsdp.unit @u params [@a]
  fsdp.unit @v params [@b]
  func.func @train_step(%x: tensor<2xf32>, %s: i64, %k: tensor<f32>) -> tensor<f32> attributes {fsdp.train_step} {
    %g = fsdp.all_gather @u : tensor<2xf32>
    fsdp.free %g : tensor<2xf32>
    %t = arith.constant dense<0> : tensor<i32>
    %l = fsdp.cross_entropy %x, %t : (tensor<2xf32>, tensor<i32>) -> tensor<f32>
    %fu = fsdp.pack %x : (tensor<2xf32>) -> tensor<2xf32>
    %su = fsdp.reduce_scatter %fu @u : tensor<2xf32> -> tensor<1xf32>
    fsdp.free %fu : tensor<2xf32>
    %fv = fsdp.pack %x : (tensor<2xf32>) -> tensor<2xf32>
    %sv = fsdp.reduce_scatter %fv @v : tensor<2xf32> -> tensor<1xf32>
    fsdp.free %fv : tensor<2xf32>
    // expected-error @+1 {{scales its gradient by a value that is no fsdp.clip_coefficient}}
    fsdp.adamw_shard @u, %su, %s scale %k {lr = 1.0e-3 : f32, beta1 = 0.9 : f32, beta2 = 0.95 : f32, eps = 1.0e-8 : f32, weight_decay = 0.0 : f32} : tensor<1xf32>
    fsdp.adamw_shard @v, %sv, %s scale %k {lr = 1.0e-3 : f32, beta1 = 0.9 : f32, beta2 = 0.95 : f32, eps = 1.0e-8 : f32, weight_decay = 0.0 : f32} : tensor<1xf32>
    return %l : tensor<f32>
  }
}

// -----

// A coefficient of each rank's own sum of squares.
module attributes {fsdp.mesh = #fsdp.mesh<["shard" = 2]>} {
  fsdp.param @a : tensor<2xf32> init <zeros>
  fsdp.param @b : tensor<2xf32> init <zeros>
  fsdp.unit @u params [@a]
  fsdp.unit @v params [@b]
  func.func @train_step(%x: tensor<2xf32>, %s: i64) -> tensor<f32> attributes {fsdp.train_step} {
    %g = fsdp.all_gather @u : tensor<2xf32>
    fsdp.free %g : tensor<2xf32>
    %t = arith.constant dense<0> : tensor<i32>
    %l = fsdp.cross_entropy %x, %t : (tensor<2xf32>, tensor<i32>) -> tensor<f32>
    %fu = fsdp.pack %x : (tensor<2xf32>) -> tensor<2xf32>
    %su = fsdp.reduce_scatter %fu @u : tensor<2xf32> -> tensor<1xf32>
    fsdp.free %fu : tensor<2xf32>
    %fv = fsdp.pack %x : (tensor<2xf32>) -> tensor<2xf32>
    %sv = fsdp.reduce_scatter %fv @v : tensor<2xf32> -> tensor<1xf32>
    fsdp.free %fv : tensor<2xf32>
    %qu = fsdp.grad_sq_sum @u, %su : tensor<1xf32>
    %qv = fsdp.grad_sq_sum @v, %sv, %qu : tensor<1xf32>
    // expected-error @+1 {{clips by a sum of squares that is not all-reduced over the ranks: each rank would clip by its own norm}}
    %c = fsdp.clip_coefficient %qv {max_norm = 1.0 : f32}
    fsdp.adamw_shard @u, %su, %s scale %c {lr = 1.0e-3 : f32, beta1 = 0.9 : f32, beta2 = 0.95 : f32, eps = 1.0e-8 : f32, weight_decay = 0.0 : f32} : tensor<1xf32>
    fsdp.adamw_shard @v, %sv, %s scale %c {lr = 1.0e-3 : f32, beta1 = 0.9 : f32, beta2 = 0.95 : f32, eps = 1.0e-8 : f32, weight_decay = 0.0 : f32} : tensor<1xf32>
    return %l : tensor<f32>
  }
}

// -----

// A norm without unit @v's gradient.
module attributes {fsdp.mesh = #fsdp.mesh<["shard" = 2]>} {
  fsdp.param @a : tensor<2xf32> init <zeros>
  fsdp.param @b : tensor<2xf32> init <zeros>
  fsdp.unit @u params [@a]
  fsdp.unit @v params [@b]
  func.func @train_step(%x: tensor<2xf32>, %s: i64) -> tensor<f32> attributes {fsdp.train_step} {
    %g = fsdp.all_gather @u : tensor<2xf32>
    fsdp.free %g : tensor<2xf32>
    %t = arith.constant dense<0> : tensor<i32>
    %l = fsdp.cross_entropy %x, %t : (tensor<2xf32>, tensor<i32>) -> tensor<f32>
    %fu = fsdp.pack %x : (tensor<2xf32>) -> tensor<2xf32>
    %su = fsdp.reduce_scatter %fu @u : tensor<2xf32> -> tensor<1xf32>
    fsdp.free %fu : tensor<2xf32>
    %fv = fsdp.pack %x : (tensor<2xf32>) -> tensor<2xf32>
    %sv = fsdp.reduce_scatter %fv @v : tensor<2xf32> -> tensor<1xf32>
    fsdp.free %fv : tensor<2xf32>
    %qu = fsdp.grad_sq_sum @u, %su : tensor<1xf32>
    %r = fsdp.all_reduce_sum %qu : tensor<f32>
    // expected-error @+1 {{clips by a norm that leaves out unit @v's gradient}}
    %c = fsdp.clip_coefficient %r {max_norm = 1.0 : f32}
    fsdp.adamw_shard @u, %su, %s scale %c {lr = 1.0e-3 : f32, beta1 = 0.9 : f32, beta2 = 0.95 : f32, eps = 1.0e-8 : f32, weight_decay = 0.0 : f32} : tensor<1xf32>
    fsdp.adamw_shard @v, %sv, %s scale %c {lr = 1.0e-3 : f32, beta1 = 0.9 : f32, beta2 = 0.95 : f32, eps = 1.0e-8 : f32, weight_decay = 0.0 : f32} : tensor<1xf32>
    return %l : tensor<f32>
  }
}

// -----

// A unit summed twice (and one left out).
module attributes {fsdp.mesh = #fsdp.mesh<["shard" = 2]>} {
  fsdp.param @a : tensor<2xf32> init <zeros>
  fsdp.param @b : tensor<2xf32> init <zeros>
  fsdp.unit @u params [@a]
  fsdp.unit @v params [@b]
  func.func @train_step(%x: tensor<2xf32>, %s: i64) -> tensor<f32> attributes {fsdp.train_step} {
    %g = fsdp.all_gather @u : tensor<2xf32>
    fsdp.free %g : tensor<2xf32>
    %t = arith.constant dense<0> : tensor<i32>
    %l = fsdp.cross_entropy %x, %t : (tensor<2xf32>, tensor<i32>) -> tensor<f32>
    %fu = fsdp.pack %x : (tensor<2xf32>) -> tensor<2xf32>
    %su = fsdp.reduce_scatter %fu @u : tensor<2xf32> -> tensor<1xf32>
    fsdp.free %fu : tensor<2xf32>
    %fv = fsdp.pack %x : (tensor<2xf32>) -> tensor<2xf32>
    %sv = fsdp.reduce_scatter %fv @v : tensor<2xf32> -> tensor<1xf32>
    fsdp.free %fv : tensor<2xf32>
    // expected-note @+1 {{also summed here}}
    %qu = fsdp.grad_sq_sum @u, %su : tensor<1xf32>
    // expected-error @+1 {{sums the squares of unit @u's gradient twice}}
    %qv = fsdp.grad_sq_sum @u, %su, %qu : tensor<1xf32>
    %r = fsdp.all_reduce_sum %qv : tensor<f32>
    // expected-error @+1 {{clips by a norm that leaves out unit @v's gradient}}
    %c = fsdp.clip_coefficient %r {max_norm = 1.0 : f32}
    fsdp.adamw_shard @u, %su, %s scale %c {lr = 1.0e-3 : f32, beta1 = 0.9 : f32, beta2 = 0.95 : f32, eps = 1.0e-8 : f32, weight_decay = 0.0 : f32} : tensor<1xf32>
    fsdp.adamw_shard @v, %sv, %s scale %c {lr = 1.0e-3 : f32, beta1 = 0.9 : f32, beta2 = 0.95 : f32, eps = 1.0e-8 : f32, weight_decay = 0.0 : f32} : tensor<1xf32>
    return %l : tensor<f32>
  }
}

// -----

// A sum of the wrong unit's shard.
module attributes {fsdp.mesh = #fsdp.mesh<["shard" = 2]>} {
  fsdp.param @a : tensor<2xf32> init <zeros>
  fsdp.param @b : tensor<2xf32> init <zeros>
  fsdp.unit @u params [@a]
  fsdp.unit @v params [@b]
  func.func @train_step(%x: tensor<2xf32>, %s: i64) -> tensor<f32> attributes {fsdp.train_step} {
    %g = fsdp.all_gather @u : tensor<2xf32>
    fsdp.free %g : tensor<2xf32>
    %t = arith.constant dense<0> : tensor<i32>
    %l = fsdp.cross_entropy %x, %t : (tensor<2xf32>, tensor<i32>) -> tensor<f32>
    %fu = fsdp.pack %x : (tensor<2xf32>) -> tensor<2xf32>
    %su = fsdp.reduce_scatter %fu @u : tensor<2xf32> -> tensor<1xf32>
    fsdp.free %fu : tensor<2xf32>
    %fv = fsdp.pack %x : (tensor<2xf32>) -> tensor<2xf32>
    %sv = fsdp.reduce_scatter %fv @v : tensor<2xf32> -> tensor<1xf32>
    fsdp.free %fv : tensor<2xf32>
    %qu = fsdp.grad_sq_sum @u, %su : tensor<1xf32>
    // expected-error @+1 {{sums the squares of a tensor that is not unit @v's reduce-scattered shard}}
    %qv = fsdp.grad_sq_sum @v, %su, %qu : tensor<1xf32>
    %r = fsdp.all_reduce_sum %qv : tensor<f32>
    %c = fsdp.clip_coefficient %r {max_norm = 1.0 : f32}
    fsdp.adamw_shard @u, %su, %s scale %c {lr = 1.0e-3 : f32, beta1 = 0.9 : f32, beta2 = 0.95 : f32, eps = 1.0e-8 : f32, weight_decay = 0.0 : f32} : tensor<1xf32>
    fsdp.adamw_shard @v, %sv, %s scale %c {lr = 1.0e-3 : f32, beta1 = 0.9 : f32, beta2 = 0.95 : f32, eps = 1.0e-8 : f32, weight_decay = 0.0 : f32} : tensor<1xf32>
    return %l : tensor<f32>
  }
}

// -----

// A chain that does not start from the gradients.
module attributes {fsdp.mesh = #fsdp.mesh<["shard" = 2]>} {
  fsdp.param @a : tensor<2xf32> init <zeros>
  fsdp.param @b : tensor<2xf32> init <zeros>
  fsdp.unit @u params [@a]
  fsdp.unit @v params [@b]
  func.func @train_step(%x: tensor<2xf32>, %s: i64) -> tensor<f32> attributes {fsdp.train_step} {
    %g = fsdp.all_gather @u : tensor<2xf32>
    fsdp.free %g : tensor<2xf32>
    %t = arith.constant dense<0> : tensor<i32>
    %l = fsdp.cross_entropy %x, %t : (tensor<2xf32>, tensor<i32>) -> tensor<f32>
    %fu = fsdp.pack %x : (tensor<2xf32>) -> tensor<2xf32>
    %su = fsdp.reduce_scatter %fu @u : tensor<2xf32> -> tensor<1xf32>
    fsdp.free %fu : tensor<2xf32>
    %fv = fsdp.pack %x : (tensor<2xf32>) -> tensor<2xf32>
    %sv = fsdp.reduce_scatter %fv @v : tensor<2xf32> -> tensor<1xf32>
    fsdp.free %fv : tensor<2xf32>
    // expected-error @+1 {{is part of a gradient norm but is no fsdp.grad_sq_sum: the norm would not be the gradients'}}
    %z = arith.constant dense<0.0> : tensor<f32>
    %qu = fsdp.grad_sq_sum @u, %su, %z : tensor<1xf32>
    %qv = fsdp.grad_sq_sum @v, %sv, %qu : tensor<1xf32>
    %r = fsdp.all_reduce_sum %qv : tensor<f32>
    %c = fsdp.clip_coefficient %r {max_norm = 1.0 : f32}
    fsdp.adamw_shard @u, %su, %s scale %c {lr = 1.0e-3 : f32, beta1 = 0.9 : f32, beta2 = 0.95 : f32, eps = 1.0e-8 : f32, weight_decay = 0.0 : f32} : tensor<1xf32>
    fsdp.adamw_shard @v, %sv, %s scale %c {lr = 1.0e-3 : f32, beta1 = 0.9 : f32, beta2 = 0.95 : f32, eps = 1.0e-8 : f32, weight_decay = 0.0 : f32} : tensor<1xf32>
    return %l : tensor<f32>
  }
}
