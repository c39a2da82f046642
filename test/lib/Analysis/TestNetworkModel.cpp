//===- TestNetworkModel.cpp - the network model on groups of any shape ----===//
//
// --fsdp-test-network-model prints, for each group shape it is given, the
// level of the network a ring over it runs at and what a collective costs
// there, so that the model's shapes (stride > 1, groups that do not fill
// their nodes) are tested before any pass emits such groups.
//
//===----------------------------------------------------------------------===//

#include "fsdp/Dialect/FSDP/Analysis/NetworkModel.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/Pass.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/raw_ostream.h"

using namespace mlir;
using namespace mlir::fsdp;

namespace {
struct TestNetworkModelPass
    : public PassWrapper<TestNetworkModelPass, OperationPass<ModuleOp>> {
  MLIR_DEFINE_EXPLICIT_INTERNAL_INLINE_TYPE_ID(TestNetworkModelPass)
  TestNetworkModelPass() = default;
  TestNetworkModelPass(const TestNetworkModelPass &other)
      : PassWrapper(other) {}
  StringRef getArgument() const final { return "fsdp-test-network-model"; }
  StringRef getDescription() const final {
    return "Print the network level and collective times of group shapes";
  }
  void runOnOperation() override;

  Option<int64_t> worldSize{*this, "world-size", llvm::cl::init(1)};
  Option<int64_t> ranksPerNode{*this, "ranks-per-node", llvm::cl::init(8)};
  Option<int64_t> nicsPerNode{*this, "nics-per-node", llvm::cl::init(8)};
  Option<double> nicGBps{*this, "nic-gbps", llvm::cl::init(47)};
  Option<double> intraGBps{*this, "intra-gbps", llvm::cl::init(370)};
  Option<bool> groupShare{*this, "group-share", llvm::cl::init(false)};
  Option<double> bytes{*this, "bytes", llvm::cl::init(1e9)};
  ListOption<int64_t> groups{*this, "groups",
                             llvm::cl::desc("size,stride,size,stride,...")};
};
} // namespace

void TestNetworkModelPass::runOnOperation() {
  NetworkTopology net;
  net.worldSize = worldSize;
  net.ranksPerNode = ranksPerNode;
  net.intraBusBytes = intraGBps * 1e9;
  net.intraLatency = 0.0;
  net.nicBytes = nicGBps * 1e9;
  net.nicsPerNode = nicsPerNode;
  net.interLatency = 0.0;
  net.nicShare = groupShare ? NicShare::Group : NicShare::Rank;
  for (size_t i = 0; i + 1 < groups.size(); i += 2) {
    GroupShape group{groups[i], groups[i + 1]};
    LinkLevel level = net.levelOf(group);
    llvm::outs() << llvm::format(
        "group %lld x stride %lld: %s, bus %g GB/s, fewest on a node %lld; "
        "all-gather %.3f ms, all-reduce %.3f ms\n",
        (long long)group.size, (long long)group.stride,
        level.crossesNodes ? "across nodes" : "inside a node",
        level.busBytes / 1e9, (long long)net.fewestMembersOnANode(group),
        collectiveTime(CollectiveKind::AllGather, bytes, group, net) * 1e3,
        collectiveTime(CollectiveKind::AllReduce, bytes, group, net) * 1e3);
  }
}

namespace mlir::fsdp_test {
void registerFSDPTestPasses() { PassRegistration<TestNetworkModelPass>(); }
} // namespace mlir::fsdp_test
