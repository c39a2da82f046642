//===- NetworkModel.cpp - what a collective costs on a two-level network --===//

#include "fsdp/Dialect/FSDP/Analysis/NetworkModel.h"

#include <algorithm>
#include <cmath>

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

int64_t NetworkTopology::fewestMembersOnANode(GroupShape group) const {
  int64_t fewest = group.size;
  int64_t span = group.size * group.stride;
  for (int64_t first = 0; first + span <= worldSize; first += span)
    for (int64_t j = 0; j < group.stride; ++j) {
      // Members on the node of member i, counted in member order (a
      // group's members are in rank order, so a node's are consecutive).
      int64_t count = 0;
      for (int64_t i = 0; i < group.size; ++i) {
        int64_t rank = first + j + i * group.stride;
        bool sameNode = i > 0 && rank / ranksPerNode ==
                                     (rank - group.stride) / ranksPerNode;
        if (!sameNode && i > 0) {
          fewest = std::min(fewest, count);
          count = 0;
        }
        ++count;
      }
      fewest = std::min(fewest, count);
    }
  return fewest;
}

LinkLevel NetworkTopology::levelOf(GroupShape group) const {
  if (!crossesNodes(group))
    return {intraBusBytes, intraLatency, false};
  // A ring leaves each node it visits once, so the node sends what one
  // member sends; but every rank of the node runs its own groups'
  // collectives at the same time (SPMD). `rank`: each rank's ring leaves
  // through its share of the node's NICs (the rail layout, a NIC per GPU:
  // one ring, one NIC). `group`: the group's rings (NCCL's channels) leave
  // through the NICs of all its members on the node, so the node's NICs
  // are shared among the groups on it, not among its ranks.
  double share = double(nicsPerNode) * nicBytes / double(ranksPerNode);
  if (nicShare == NicShare::Group)
    share *= double(fewestMembersOnANode(group));
  // Where neighbours in the ring share a node, those hops run on the
  // node's bus, and the ring is no faster than that either.
  if (group.stride < ranksPerNode)
    share = std::min(share, intraBusBytes);
  return {share, interLatency, true};
}

double mlir::fsdp::collectiveTime(CollectiveKind kind, double bytes,
                                  GroupShape group,
                                  const NetworkTopology &net) {
  LinkLevel level = net.levelOf(group);
  double n = double(group.size);
  // nccl-tests' bus bandwidth: a ring all-gather or reduce-scatter moves
  // (n - 1) / n of the tensor over each rank's link, an all-reduce (a
  // reduce-scatter and an all-gather) twice that; an all-to-all of a
  // rank's `bytes`, spread evenly, sends (n - 1) / n of them away.
  double factor = kind == CollectiveKind::AllReduce ? 2.0 : 1.0;
  return level.latency + factor * bytes * (n - 1) / n / level.busBytes;
}

NetworkTopology mlir::fsdp::makeTwoLevelNetwork(const TwoLevelOptions &o,
                                                int64_t worldSize,
                                                std::string &error) {
  error.clear();
  if (o.nicShare != "rank" && o.nicShare != "group") {
    error = "nic-share must be rank or group, got '" + o.nicShare + "'";
    return {};
  }
  // Written so that NaN fails too. An infinite bandwidth is an ideal
  // link; an infinite latency is no network.
  auto rate = [](double v) { return v > 0; };
  auto latency = [](double v) { return v >= 0 && std::isfinite(v); };
  if (o.ranksPerNode < 1 || !rate(o.intraGBps) || !rate(o.nicGBps) ||
      o.nicsPerNode < 1 || !latency(o.intraLatencyUs) ||
      !latency(o.interLatencyUs)) {
    error = "intra-gbps and nic-gbps must be positive, nics-per-node at "
            "least 1, latencies finite and at least 0";
    return {};
  }
  NetworkTopology net;
  net.worldSize = worldSize;
  net.ranksPerNode = o.ranksPerNode;
  net.intraBusBytes = o.intraGBps * 1e9;
  net.intraLatency = o.intraLatencyUs * 1e-6;
  net.nicBytes = o.nicGBps * 1e9;
  net.nicsPerNode = o.nicsPerNode;
  net.interLatency = o.interLatencyUs * 1e-6;
  net.nicShare = o.nicShare == "group" ? NicShare::Group : NicShare::Rank;
  return net;
}
