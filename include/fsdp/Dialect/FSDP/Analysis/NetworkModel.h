//===- NetworkModel.h - what a collective costs on a two-level network -*-===//
//
// The time of a ring collective over a group of ranks, from the level of
// the network the group crosses: the bus inside a node (NVLink) or the
// node's NICs (InfiniBand). A group is (size, stride): its members are
// ranks b, b + stride, ..., b + (size - 1) x stride, as the mesh lays them
// out (today one group, the whole world: size N, stride 1; hybrid
// sharding's shard groups are size S, stride 1, its replica groups size R,
// stride S). docs/overlap.md says why the model is this one.
//
//===----------------------------------------------------------------------===//

#ifndef FSDP_DIALECT_FSDP_ANALYSIS_NETWORKMODEL_H
#define FSDP_DIALECT_FSDP_ANALYSIS_NETWORKMODEL_H

#include <cstdint>
#include <string>

namespace mlir::fsdp {

/// The ranks of one collective: `size` members, `stride` apart.
struct GroupShape {
  int64_t size = 1, stride = 1;
};

/// What a ring's bytes cost in nccl-tests' bus-bandwidth convention: a
/// collective of `bytes` (the full tensor) takes latency + bytes x
/// (n - 1) / n / busBytes for an all-gather or a reduce-scatter, twice the
/// bandwidth term for an all-reduce.
struct LinkLevel {
  double busBytes, latency;
  bool crossesNodes;
};

/// How the ranks of a node share its NICs when rings leave it (see
/// NetworkTopology::levelOf and docs/overlap.md).
enum class NicShare { Rank, Group };

/// The machine's network. With `ranksPerNode` 0 it has one level: every
/// ring runs at `intraBusBytes` and `intraLatency` (the single-level model
/// of --fsdp-simulate's `hardware` presets). Otherwise the `worldSize`
/// ranks are laid out node by node, `ranksPerNode` to a node, and a ring
/// that leaves a node runs at the per-rank share of the node's NICs,
/// `nicsPerNode` x `nicBytes` / `ranksPerNode` (`nicShare` Rank), or that
/// times the fewest members the group has on a node (Group: its rings
/// spread over its members' NICs), no faster than the bus inside the node
/// where some of its hops stay inside one, with `interLatency`.
struct NetworkTopology {
  int64_t worldSize = 1, ranksPerNode = 0;
  double intraBusBytes = 0.0, intraLatency = 0.0;
  double nicBytes = 0.0;
  int64_t nicsPerNode = 0;
  double interLatency = 0.0;
  NicShare nicShare = NicShare::Rank;

  bool isTwoLevel() const { return ranksPerNode > 0; }
  /// Whether some group of shape `group`, placed as the mesh places them,
  /// has members on more than one node. The groups of a shape tile the
  /// world: each block of size x stride consecutive ranks holds `stride`
  /// groups, the j-th of them ranks block + j, block + j + stride, ...; all
  /// of them run the same collective at once, so the slowest decides.
  bool crossesNodes(GroupShape group) const;
  /// The fewest members of one group of shape `group` on one node.
  int64_t fewestMembersOnANode(GroupShape group) const;
  /// The level a ring over `group` runs at.
  LinkLevel levelOf(GroupShape group) const;
};

/// The two-level options as --fsdp-simulate and --fsdp-fit-memory take
/// them (GB/s, microseconds, "rank" or "group").
struct TwoLevelOptions {
  int64_t ranksPerNode = 0;
  double intraGBps = 0.0, intraLatencyUs = 0.0, nicGBps = 0.0;
  int64_t nicsPerNode = 0;
  double interLatencyUs = 0.0;
  std::string nicShare;
};

/// The two-level network of `worldSize` ranks the options describe, or an
/// empty topology and `error` set to why they do not describe one (the
/// message without the pass's name). Both passes build it here, so that
/// the budget search prices a step as the simulator does.
NetworkTopology makeTwoLevelNetwork(const TwoLevelOptions &options,
                                    int64_t worldSize, std::string &error);

enum class CollectiveKind { AllGather, ReduceScatter, AllReduce, AllToAll };

/// The time a ring `kind` over `group` takes on `net` for a tensor of
/// `bytes` (the full tensor: the gather's result, the reduce-scatter's
/// source, the all-reduce's value).
double collectiveTime(CollectiveKind kind, double bytes, GroupShape group,
                      const NetworkTopology &net);

} // namespace mlir::fsdp

#endif // FSDP_DIALECT_FSDP_ANALYSIS_NETWORKMODEL_H
