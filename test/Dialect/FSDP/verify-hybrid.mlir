// RUN: fsdp-opt %s -split-input-file -verify-diagnostics --fsdp-verify

// -----

// A correct hybrid-sharded step passes (mesh 2x2): every collective names its
// group, the shard is averaged over the replicas and AdamW reads the mean.
module attributes {fsdp.mesh = #fsdp.mesh<["replicate" = 2, "shard" = 2]>} {
  fsdp.param @w : tensor<2x2xf32> init <zeros>
  fsdp.unit @u params [@w]
  func.func @train_step(%x: tensor<1x2xf32>, %t: tensor<1xi32>, %s: i64) -> tensor<f32> attributes {fsdp.train_step} {
    %g = fsdp.all_gather @u over "shard" : tensor<4xf32>
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
    %sh = fsdp.reduce_scatter %f @u over "shard" : tensor<4xf32> -> tensor<2xf32>
    fsdp.free %f : tensor<4xf32>
    %m = fsdp.all_reduce_mean %sh @u over "replicate" : tensor<2xf32>
    fsdp.adamw_shard @u, %m, %s {lr = 1.0e-3 : f32, beta1 = 0.9 : f32, beta2 = 0.95 : f32, eps = 1.0e-8 : f32, weight_decay = 0.0 : f32} : tensor<2xf32>
    return %l : tensor<f32>
  }
}

// -----

// Under a replicate axis every collective names its group.
module attributes {fsdp.mesh = #fsdp.mesh<["replicate" = 2, "shard" = 2]>} {
  fsdp.param @w : tensor<2x2xf32> init <zeros>
  fsdp.unit @u params [@w]
  func.func @train_step(%x: tensor<1x2xf32>, %t: tensor<1xi32>, %s: i64) -> tensor<f32> attributes {fsdp.train_step} {
    // expected-error @+1 {{names no mesh axis}}
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
    // expected-error @+1 {{names no mesh axis; under the mesh #fsdp.mesh<["replicate" = 2, "shard" = 2]> every collective names the group it runs over}}
    %sh = fsdp.reduce_scatter %f @u : tensor<4xf32> -> tensor<2xf32>
    fsdp.free %f : tensor<4xf32>
    %m = fsdp.all_reduce_mean %sh @u over "replicate" : tensor<2xf32>
    fsdp.adamw_shard @u, %m, %s {lr = 1.0e-3 : f32, beta1 = 0.9 : f32, beta2 = 0.95 : f32, eps = 1.0e-8 : f32, weight_decay = 0.0 : f32} : tensor<2xf32>
    return %l : tensor<f32>
  }
}

// -----

// A replica all-reduce on a mesh without replicas.
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
    // expected-error @+1 {{averages over replicas, but the mesh has none}}
    %m = fsdp.all_reduce_mean %sh @u over "replicate" : tensor<2xf32>
    fsdp.adamw_shard @u, %m, %s {lr = 1.0e-3 : f32, beta1 = 0.9 : f32, beta2 = 0.95 : f32, eps = 1.0e-8 : f32, weight_decay = 0.0 : f32} : tensor<2xf32>
    return %l : tensor<f32>
  }
}

// -----

// AdamW must read the averaged shard, or the replicas drift apart.
module attributes {fsdp.mesh = #fsdp.mesh<["replicate" = 2, "shard" = 2]>} {
  fsdp.param @w : tensor<2x2xf32> init <zeros>
  fsdp.unit @u params [@w]
  func.func @train_step(%x: tensor<1x2xf32>, %t: tensor<1xi32>, %s: i64) -> tensor<f32> attributes {fsdp.train_step} {
    %g = fsdp.all_gather @u over "shard" : tensor<4xf32>
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
    %sh = fsdp.reduce_scatter %f @u over "shard" : tensor<4xf32> -> tensor<2xf32>
    fsdp.free %f : tensor<4xf32>
    %m = fsdp.all_reduce_mean %sh @u over "replicate" : tensor<2xf32>
    // expected-error @+1 {{updates unit @u from a shard not averaged over the replicas: the replicas of its shard would drift apart}}
    fsdp.adamw_shard @u, %sh, %s {lr = 1.0e-3 : f32, beta1 = 0.9 : f32, beta2 = 0.95 : f32, eps = 1.0e-8 : f32, weight_decay = 0.0 : f32} : tensor<2xf32>
    return %l : tensor<f32>
  }
}

// -----

// A unit averaged twice.
module attributes {fsdp.mesh = #fsdp.mesh<["replicate" = 2, "shard" = 2]>} {
  fsdp.param @w : tensor<2x2xf32> init <zeros>
  fsdp.unit @u params [@w]
  func.func @train_step(%x: tensor<1x2xf32>, %t: tensor<1xi32>, %s: i64) -> tensor<f32> attributes {fsdp.train_step} {
    %g = fsdp.all_gather @u over "shard" : tensor<4xf32>
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
    %sh = fsdp.reduce_scatter %f @u over "shard" : tensor<4xf32> -> tensor<2xf32>
    fsdp.free %f : tensor<4xf32>
    // expected-note @+1 {{first averaged here}}
    %m = fsdp.all_reduce_mean %sh @u over "replicate" : tensor<2xf32>
    // expected-error @+1 {{averages unit @u over the replicas a second time}}
    %m2 = fsdp.all_reduce_mean %sh @u over "replicate" : tensor<2xf32>
    fsdp.adamw_shard @u, %m, %s {lr = 1.0e-3 : f32, beta1 = 0.9 : f32, beta2 = 0.95 : f32, eps = 1.0e-8 : f32, weight_decay = 0.0 : f32} : tensor<2xf32>
    return %l : tensor<f32>
  }
}

// -----

// The replica all-reduce averages its unit's reduce-scattered shard.
module attributes {fsdp.mesh = #fsdp.mesh<["replicate" = 2, "shard" = 2]>} {
  fsdp.param @w : tensor<2x2xf32> init <zeros>
  fsdp.unit @u params [@w]
  func.func @train_step(%x: tensor<1x2xf32>, %t: tensor<1xi32>, %s: i64) -> tensor<f32> attributes {fsdp.train_step} {
    %g = fsdp.all_gather @u over "shard" : tensor<4xf32>
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
    %sh = fsdp.reduce_scatter %f @u over "shard" : tensor<4xf32> -> tensor<2xf32>
    fsdp.free %f : tensor<4xf32>
    %c = arith.constant dense<0.0> : tensor<2xf32>
    // expected-error @+2 {{averages a tensor that is not unit @u's reduce-scattered shard}}
    // expected-note @+1 {{first averaged here}}
    %m = fsdp.all_reduce_mean %c @u over "replicate" : tensor<2xf32>
    // expected-error @+1 {{averages unit @u over the replicas a second time}}
    %m1 = fsdp.all_reduce_mean %sh @u over "replicate" : tensor<2xf32>
    fsdp.adamw_shard @u, %m1, %s {lr = 1.0e-3 : f32, beta1 = 0.9 : f32, beta2 = 0.95 : f32, eps = 1.0e-8 : f32, weight_decay = 0.0 : f32} : tensor<2xf32>
    return %l : tensor<f32>
  }
}

// -----

// The ops' own verifiers: a gather runs over "shard".
module attributes {fsdp.mesh = #fsdp.mesh<["replicate" = 2, "shard" = 2]>} {
  fsdp.param @w : tensor<2x2xf32> init <zeros>
  fsdp.unit @u params [@w]
  func.func @f() {
    // expected-error @+1 {{runs over mesh axis "replicate"; it must run over "shard"}}
    %g = fsdp.all_gather @u over "replicate" : tensor<4xf32>
    return
  }
}

// -----

// The replica all-reduce runs over "replicate".
module attributes {fsdp.mesh = #fsdp.mesh<["replicate" = 2, "shard" = 2]>} {
  fsdp.param @w : tensor<2x2xf32> init <zeros>
  fsdp.unit @u params [@w]
  func.func @f(%s: tensor<2xf32>) {
    // expected-error @+1 {{runs over mesh axis "shard"; it must run over "replicate"}}
    %m = fsdp.all_reduce_mean %s @u over "shard" : tensor<2xf32>
    return
  }
}

// -----

// Clipping's sum runs over the shard group.
func.func @f(%s: tensor<f32>) {
  // expected-error @+1 {{runs over mesh axis "replicate"; it must run over "shard"}}
  %m = fsdp.all_reduce_sum %s over "replicate" : tensor<f32>
  return
}

// -----

// A bucket is one fused collective: over one group.
module attributes {fsdp.mesh = #fsdp.mesh<["replicate" = 2, "shard" = 2]>} {
  fsdp.param @w : tensor<2x2xf32> init <zeros>
  fsdp.param @v : tensor<2x2xf32> init <zeros>
  fsdp.unit @u params [@w]
  fsdp.unit @t params [@v]
  func.func @f() {
    %t1, %g1 = fsdp.all_gather_start @u stream 1 over "shard" : tensor<4xf32>
    // expected-error @+1 {{is grouped with a start over another mesh axis; a fused collective runs over one group}}
    %t2, %g2 = fsdp.all_gather_start @t stream 1 grouped : tensor<4xf32>
    return
  }
}
