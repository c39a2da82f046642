// RUN: not fsdp-opt %s --fsdp-mesh=shard=0 2>&1 | FileCheck %s --check-prefix=ZERO
// RUN: not fsdp-opt %s --fsdp-mesh="replicate=-1 shard=2" 2>&1 | FileCheck %s --check-prefix=NEGATIVE
// RUN: not fsdp-opt %s --fsdp-mesh=shard=2 2>&1 | FileCheck %s --check-prefix=OTHER
// RUN: not fsdp-opt %s --fsdp-mesh=mesh=2by4 2>&1 | FileCheck %s --check-prefix=SPEC
// RUN: not fsdp-opt %s --fsdp-mesh=mesh=x4 2>&1 | FileCheck %s --check-prefix=SPEC
// RUN: not fsdp-opt %s --fsdp-mesh=mesh=99999999999x1 2>&1 | FileCheck %s --check-prefix=SPEC
// RUN: not fsdp-opt %s --fsdp-mesh="mesh=2x4 world-size=4" 2>&1 | FileCheck %s --check-prefix=CONTRA
// RUN: not fsdp-opt %s --fsdp-mesh="shard=4 expert=3" 2>&1 | FileCheck %s --check-prefix=EXPERT
// RUN: not fsdp-opt %s --fsdp-mesh="shard=4 expert=0" 2>&1 | FileCheck %s --check-prefix=EXPERT0
// EXPERT: error: fsdp-mesh: mesh axis "expert" = 3 must divide "shard" = 4 (expert groups split a shard group)
// EXPERT0: error: fsdp-mesh: expert must be at least 1, got 0
// SPEC: error: fsdp-mesh: mesh must be RxS, replicas x shards
// CONTRA: error: fsdp-mesh: world-size=4 contradicts mesh=2x4 (8 ranks); give one of them

// ZERO: error: fsdp-mesh: shard must be at least 1, got 0
// NEGATIVE: error: fsdp-mesh: replicate must be at least 1, got -1
// A module compiled for one mesh is not re-meshed: its batch and shards
// are sized for that mesh already.
// OTHER: error: fsdp-mesh: the module is already compiled for the mesh #fsdp.mesh<["shard" = 4]>, not #fsdp.mesh<["shard" = 2]> (start again from the model for another mesh)
module attributes {fsdp.mesh = #fsdp.mesh<["shard" = 4]>} {
}
