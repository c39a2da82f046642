// RUN: fsdp-opt %s -split-input-file -verify-diagnostics

// The exchanges run over the expert axis only.
func.func @f(%c: tensor<2x2xi32>) -> tensor<2x2xi32> {
  // expected-error @+1 {{'fsdp.all_to_all_counts' op runs over mesh axis "shard"; it must run over "expert"}}
  %r = fsdp.all_to_all_counts %c over "shard" : tensor<2x2xi32> -> tensor<2x2xi32>
  return %r : tensor<2x2xi32>
}

// -----

func.func @f(%c: tensor<2x2xi32>) -> tensor<4x1xi32> {
  // expected-error @+1 {{'fsdp.all_to_all_counts' op needs counts of one shape G x L (ranks x experts each), got 'tensor<2x2xi32>' and 'tensor<4x1xi32>'}}
  %r = fsdp.all_to_all_counts %c over "expert" : tensor<2x2xi32> -> tensor<4x1xi32>
  return %r : tensor<4x1xi32>
}

// -----

func.func @f(%x: tensor<6x8xf32>, %s: tensor<2x2xi32>, %r: tensor<2x3xi32>) -> tensor<12x8xf32> {
  // expected-error @+1 {{'fsdp.all_to_all' op needs counts of one shape G x L (ranks x experts each), got 'tensor<2x2xi32>' and 'tensor<2x3xi32>'}}
  %y = fsdp.all_to_all %x, %s, %r over "expert" : (tensor<6x8xf32>, tensor<2x2xi32>, tensor<2x3xi32>) -> tensor<12x8xf32>
  return %y : tensor<12x8xf32>
}

// -----

func.func @f(%x: tensor<6x8xf32>, %s: tensor<2x2xi32>, %r: tensor<2x2xi32>) -> tensor<12x4xf32> {
  // expected-error @+1 {{'fsdp.all_to_all' op moves rows: input and result must be N x C and M x C of one element type, got 'tensor<6x8xf32>' and 'tensor<12x4xf32>'}}
  %y = fsdp.all_to_all %x, %s, %r over "expert" : (tensor<6x8xf32>, tensor<2x2xi32>, tensor<2x2xi32>) -> tensor<12x4xf32>
  return %y : tensor<12x4xf32>
}

// -----

// The started form (--fsdp-schedule's) keeps the same rules.
func.func @f(%x: tensor<6x8xf32>, %s: tensor<2x2xi32>, %r: tensor<2x2xi32>) -> tensor<12x4xf32> {
  // expected-error @+1 {{'fsdp.all_to_all_start' op moves rows: input and result must be N x C and M x C of one element type, got 'tensor<6x8xf32>' and 'tensor<12x4xf32>'}}
  %t, %y = fsdp.all_to_all_start %x, %s, %r stream 4 over "expert" : (tensor<6x8xf32>, tensor<2x2xi32>, tensor<2x2xi32>) -> tensor<12x4xf32>
  fsdp.wait %t
  return %y : tensor<12x4xf32>
}

// -----

func.func @f(%x: tensor<6x8xf32>, %s: tensor<2x2xi32>, %r: tensor<2x2xi32>) -> tensor<12x8xf32> {
  // expected-error @+1 {{'fsdp.all_to_all_start' op runs over mesh axis "shard"; it must run over "expert"}}
  %t, %y = fsdp.all_to_all_start %x, %s, %r stream 4 over "shard" : (tensor<6x8xf32>, tensor<2x2xi32>, tensor<2x2xi32>) -> tensor<12x8xf32>
  fsdp.wait %t
  return %y : tensor<12x8xf32>
}

// -----

// The counts name the mesh's expert group: one row per rank of it.
module attributes {fsdp.mesh = #fsdp.mesh<["shard" = 4, "expert" = 4]>} {
func.func @f(%c: tensor<2x2xi32>) -> tensor<2x2xi32> {
  // expected-error @+1 {{'fsdp.all_to_all_counts' op has counts for 2 ranks, but the mesh's expert groups have 4}}
  %r = fsdp.all_to_all_counts %c over "expert" : tensor<2x2xi32> -> tensor<2x2xi32>
  return %r : tensor<2x2xi32>
}
}

// -----

// An expert-parallel unit gathers over its expert shard group, and only it.
module attributes {fsdp.mesh = #fsdp.mesh<["shard" = 4, "expert" = 2]>} {
fsdp.param @w : tensor<2x4x4xf32> init <normal, std = 0.5>
fsdp.unit @e params [@w] {expert_parallel}
func.func @f() -> tensor<32xf32> {
  // expected-error @+1 {{'fsdp.all_gather' op runs over the shard axis for unit @e, which is expert-parallel}}
  %g = fsdp.all_gather @e : tensor<32xf32>
  return %g : tensor<32xf32>
}
}

// -----

module attributes {fsdp.mesh = #fsdp.mesh<["shard" = 4, "expert" = 2]>} {
fsdp.param @w : tensor<2x4x4xf32> init <normal, std = 0.5>
fsdp.unit @u params [@w]
func.func @f() -> tensor<32xf32> {
  // expected-error @+1 {{'fsdp.all_gather' op runs over the expert shard group for unit @u, which is not expert-parallel}}
  %g = fsdp.all_gather @u over "expert_shard" : tensor<32xf32>
  return %g : tensor<32xf32>
}
}

// -----

// The expert axis splits the shard axis: it must divide it.
// expected-error @+1 {{mesh axis "expert" = 3 must divide "shard" = 4 (expert groups split a shard group)}}
module attributes {fsdp.mesh = #fsdp.mesh<["shard" = 4, "expert" = 3]>} {
}

// -----

// expected-error @+1 {{mesh axis "shard" is repeated or out of order: the axes are "replicate", "shard" then "expert", each at most once}}
module attributes {fsdp.mesh = #fsdp.mesh<["expert" = 2, "shard" = 4]>} {
}
