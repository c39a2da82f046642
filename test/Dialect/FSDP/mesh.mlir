// RUN: fsdp-opt %s --fsdp-mesh=shard=4 | FileCheck %s
// RUN: fsdp-opt %s --fsdp-mesh | FileCheck %s --check-prefix=ONE
// RUN: fsdp-opt %s --fsdp-mesh="replicate=2 shard=4" | FileCheck %s --check-prefix=HYBRID
// replicate=1 is no replicate axis: the same mesh as shard=4 alone.
// RUN: fsdp-opt %s --fsdp-mesh="replicate=1 shard=4" | FileCheck %s
// The same mesh twice changes nothing; the mesh round-trips.
// RUN: fsdp-opt %s --fsdp-mesh=shard=4 | fsdp-opt --fsdp-mesh=shard=4 | FileCheck %s
// RUN: fsdp-opt %s --fsdp-mesh="replicate=2 shard=4" | fsdp-opt | FileCheck %s --check-prefix=HYBRID
// mesh=RxS, the pipeline's spelling, is the same mesh; 1xN is shard=N,
// and world-size, when given, must be R * S.
// RUN: fsdp-opt %s --fsdp-mesh=mesh=2x4 | FileCheck %s --check-prefix=HYBRID
// RUN: fsdp-opt %s --fsdp-mesh="mesh=2x4 world-size=8" | FileCheck %s --check-prefix=HYBRID
// RUN: fsdp-opt %s --fsdp-mesh=mesh=1x4 | FileCheck %s

// A mesh is set on a module that holds no fsdp op yet, too.
// CHECK: module attributes {fsdp.mesh = #fsdp.mesh<["shard" = 4]>}
// ONE: module attributes {fsdp.mesh = #fsdp.mesh<["shard" = 1]>}
// HYBRID: module attributes {fsdp.mesh = #fsdp.mesh<["replicate" = 2, "shard" = 4]>}
func.func @forward(%x: tensor<f32>) -> tensor<f32> {
  return %x : tensor<f32>
}
