//===- NetworkModel.cpp - what a collective costs on a two-level network --===//

#include "fsdp/Dialect/FSDP/Analysis/NetworkModel.h"

#include <algorithm>

using namespace mlir::fsdp;

bool NetworkTopology::crossesNodes(GroupShape group) const {
  if (!isTwoLevel())
    return false;
  // The groups of one shape tile the world: group (q, j) holds ranks
  // q x size x stride + j + i x stride for i < size and j < stride. Its
  // members' nodes run from its first member's to its last's.
  int64_t span = group.size * group.stride;
  for (int64_t first = 0; first + span <= worldSize; first += span)
    for (int64_t j = 0; j < group.stride; ++j) {
      int64_t base = first + j, last = base + (group.size - 1) * group.stride;
      if (base / ranksPerNode != last / ranksPerNode)
        return true;
    }
  return false;
}

LinkLevel NetworkTopology::levelOf(GroupShape group) const {
  if (!crossesNodes(group))
    return {intraBusBytes, intraLatency, false};
  // A ring that leaves a node sends as much from the node as each of its
  // members sends; every rank of the node sends its own rings' bytes at
  // the same time (SPMD), so each gets its share of the node's NICs.
  double nicShare = double(nicsPerNode) * nicBytes / double(ranksPerNode);
  // Where neighbours in the ring share a node, those hops run on the
  // node's bus, and the ring is no faster than that either.
  if (group.stride < ranksPerNode)
    nicShare = std::min(nicShare, intraBusBytes);
  return {nicShare, interLatency, true};
}

double mlir::fsdp::collectiveTime(CollectiveKind kind, double bytes,
                                  GroupShape group,
                                  const NetworkTopology &net) {
  LinkLevel level = net.levelOf(group);
  double n = double(group.size);
  // nccl-tests' bus bandwidth: a ring all-gather or reduce-scatter moves
  // (n - 1) / n of the tensor over each rank's link, an all-reduce (a
  // reduce-scatter and an all-gather) twice that.
  double factor = kind == CollectiveKind::AllReduce ? 2.0 : 1.0;
  return level.latency + factor * bytes * (n - 1) / n / level.busBytes;
}
