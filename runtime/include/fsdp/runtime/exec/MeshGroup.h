//===- MeshGroup.h - the mesh's communicator groups -------------*- C++ -*-===//
//
// Which ranks form each axis's group (plan::CommAxis), for the backends'
// splits: rank = replica S + s on a mesh of S-way sharding; under G-way
// expert parallelism s's expert group is the G consecutive shard indices
// with the same s / G, its expert shard group the S / G with the same
// s % G. One definition for the CPU and CUDA backends.
//
//===----------------------------------------------------------------------===//

#ifndef FSDP_RUNTIME_MESHGROUP_H
#define FSDP_RUNTIME_MESHGROUP_H

#include "fsdp/runtime/plan/Plan.h"

#include <string>
#include <vector>

namespace fsdp::rt {

/// The group of `axis` rank `rank` belongs to on a mesh of S = `shards`
/// ranks per shard group and G = `experts` per expert group: its split
/// color, and its name ("shard group 1 (ranks 2-3)", "replica group 0
/// (ranks 0, 2)", "expert group 1 (ranks 2-3)", "expert shard group 1
/// (ranks 1, 3)") for the flight recorder.
struct MeshGroup {
  int color;
  std::string name;
};
inline MeshGroup meshGroup(plan::CommAxis axis, int rank, int shards,
                           int experts, int world) {
  int s = rank % shards, base = rank - s; // base: the replica's first rank
  int first = 0, step = 1, count = 0, color = 0;
  std::string what;
  switch (axis) {
  case plan::CommAxis::Shard:
    what = "shard", first = base, count = shards, color = rank / shards;
    break;
  case plan::CommAxis::Replicate:
    what = "replica", first = s, step = shards, count = world / shards,
    color = s;
    break;
  case plan::CommAxis::Expert: // G consecutive shard indices
    what = "expert", first = base + s / experts * experts, count = experts,
    color = first;
    break;
  case plan::CommAxis::ExpertShard: // every G-th, from the slice
    what = "expert shard", first = base + s % experts, step = experts,
    count = shards / experts, color = first;
    break;
  }
  std::string ranks;
  if (step == 1)
    ranks = std::to_string(first) + "-" + std::to_string(first + count - 1);
  else
    for (int k = 0; k < count; ++k)
      ranks += (k ? ", " : "") + std::to_string(first + k * step);
  return {color,
          what + " group " + std::to_string(color) + " (ranks " + ranks + ")"};
}

/// The axes a plan's groups are split for: none on one undivided group;
/// the shard and replica groups under hybrid sharding; the expert and
/// expert shard groups under expert parallelism.
inline std::vector<plan::CommAxis> meshAxes(const Plan &plan) {
  std::vector<plan::CommAxis> axes;
  if (plan.replicas() > 1)
    axes = {plan::CommAxis::Shard, plan::CommAxis::Replicate};
  if (plan.expertSize > 1)
    axes.insert(axes.end(),
                {plan::CommAxis::Expert, plan::CommAxis::ExpertShard});
  return axes;
}

} // namespace fsdp::rt

#endif // FSDP_RUNTIME_MESHGROUP_H
