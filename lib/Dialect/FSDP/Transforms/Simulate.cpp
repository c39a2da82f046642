//===- Simulate.cpp - a cost model of a scheduled training step -----------===//
//
// Three streams (compute, all-gather, reduce-scatter), costs from types:
// FLOPs and bytes moved of each compute op (KernelOpInterface), and the
// nccl-tests bus-bandwidth model for collectives, on one level of network
// or two (inside a node, across nodes). What the schedule buys
// shows up as exposed communication: step time not covered by compute.
//
//===----------------------------------------------------------------------===//

#include "fsdp/Dialect/FSDP/Analysis/MemoryProfile.h"
#include "fsdp/Dialect/FSDP/Analysis/StepSimulator.h"
#include "fsdp/Dialect/FSDP/Transforms/Passes.h"

#include "mlir/Support/FileUtilities.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/ToolOutputFile.h"
#include "llvm/Support/raw_ostream.h"

#include <cmath>

namespace mlir::fsdp {
#define GEN_PASS_DEF_FSDPSIMULATEPASS
#include "fsdp/Dialect/FSDP/Transforms/Passes.h.inc"
} // namespace mlir::fsdp

using namespace mlir;
using namespace mlir::fsdp;

namespace {
struct FsdpSimulatePass
    : public mlir::fsdp::impl::FsdpSimulatePassBase<FsdpSimulatePass> {
  using FsdpSimulatePassBase::FsdpSimulatePassBase;
  void runOnOperation() override;

private:
  /// The named hardware with the rates the options override; fails after
  /// reporting an unknown name or a negative rate.
  FailureOr<Hardware> selectHardware();
  /// The network: the preset's one level, or the two levels the options
  /// give; fails after reporting options that do not fit together.
  FailureOr<NetworkTopology> selectNetwork(const Hardware &hw,
                                           int64_t worldSize);
  /// The report's lines (stderr).
  void printReport(const StepSimulator &sim, const NetworkTopology &net,
                   double peakBytes);
  /// Writes the events and the memory counters as a Chrome trace to
  /// `trace-path`.
  LogicalResult writeTrace(const StepSimulator &sim,
                           const MemoryProfile &memory);
};
} // namespace

FailureOr<Hardware> FsdpSimulatePass::selectHardware() {
  ModuleOp module = getOperation();
  std::optional<Hardware> named = lookupHardware(hardware);
  if (!named) {
    emitError(module.getLoc())
        << "fsdp-simulate: unknown hardware '" << hardware
        << "', expected h100-nvlink or ib-400g";
    return failure();
  }
  Hardware hw = *named;
  // Written so that NaN fails too (it would silently mean the preset's);
  // an infinite rate is an infinitely fast machine (every op takes no
  // time), an infinite latency no machine.
  auto rate = [](double v) { return v >= 0; };
  if (!rate(computeTflops) || !rate(busGBps) || !rate(memoryGBps)) {
    emitError(module.getLoc())
        << "fsdp-simulate: rates must be at least 0 (0: the preset's)";
    return failure();
  }
  if (std::isnan(latencyUs) || std::isinf(latencyUs)) {
    emitError(module.getLoc())
        << "fsdp-simulate: latency-us must be finite (negative: the "
           "preset's)";
    return failure();
  }
  if (computeTflops > 0) { // the f32 rate; bf16 keeps the preset's ratio
    hw.bf16Flops *= computeTflops * 1e12 / hw.flops;
    hw.flops = computeTflops * 1e12;
  }
  if (busGBps > 0)
    hw.busBytes = busGBps * 1e9;
  if (memoryGBps > 0)
    hw.memoryBytes = memoryGBps * 1e9;
  if (latencyUs >= 0)
    hw.latency = latencyUs * 1e-6;
  return hw;
}

FailureOr<NetworkTopology> FsdpSimulatePass::selectNetwork(const Hardware &hw,
                                                           int64_t worldSize) {
  Location loc = getOperation().getLoc();
  if (ranksPerNode < 0)
    return emitError(loc) << "fsdp-simulate: ranks-per-node must be at "
                             "least 0, got "
                          << int64_t(ranksPerNode);
  bool twoLevelOption = intraGBps.hasValue() || intraLatencyUs.hasValue() ||
                        nicGBps.hasValue() || nicsPerNode.hasValue() ||
                        interLatencyUs.hasValue() || nicShare.hasValue();
  if (ranksPerNode == 0) {
    if (twoLevelOption)
      return emitError(loc) << "fsdp-simulate: intra-gbps, intra-latency-us, "
                               "nic-gbps, nics-per-node, inter-latency-us and "
                               "nic-share describe a two-level network: give "
                               "ranks-per-node too";
    return singleLevelNetwork(hw, worldSize);
  }
  if (busGBps.hasValue() || latencyUs.hasValue())
    return emitError(loc) << "fsdp-simulate: bus-gbps and latency-us are the "
                             "one-level network's; with ranks-per-node give "
                             "intra-gbps, nic-gbps, nics-per-node and the "
                             "latencies";
  std::string error;
  NetworkTopology net =
      makeTwoLevelNetwork({ranksPerNode, intraGBps, intraLatencyUs, nicGBps,
                           nicsPerNode, interLatencyUs, nicShare},
                          worldSize, error);
  if (!error.empty())
    return emitError(loc) << "fsdp-simulate: " << error;
  return net;
}

/// The world size (the mesh's shard axis) of a sharded @train_step, or
/// failure after an error when there is none.
static FailureOr<int64_t> readWorldSize(ModuleOp module, func::FuncOp step) {
  if (!step || !isShardedStep(step.getBody().front())) {
    emitError(module.getLoc()) << "fsdp-simulate: no sharded @train_step (run "
                                  "--fsdp-shard and --fsdp-schedule first)";
    return failure();
  }
  // Every rank of the mesh: under hybrid sharding the replica groups span
  // the shard groups (StepSimulator::groupOf places each collective).
  return getNumRanks(module);
}

/// The memory counters of one rank: live bytes by kind at each op of the
/// profile, at the time the compute stream issues it, their total, and the
/// budget (when one is given) at the first and last sample. Ops issued at
/// one instant (views, frees, a gather's start before the kernel that
/// waits for it) give one sample, the op with the most live bytes, so that
/// the track's maximum is the profile's peak.
static void addMemoryCounters(llvm::json::Array &trace,
                              const StepSimulator &sim,
                              const MemoryProfile &memory, int64_t budget) {
  auto counter = [&](StringRef name, double at, llvm::json::Object args) {
    trace.push_back(llvm::json::Object{{"name", name},
                                       {"ph", "C"},
                                       {"pid", 0},
                                       {"ts", at * 1e6},
                                       {"args", std::move(args)}});
  };
  double last = 0.0;
  size_t count = memory.order.size();
  for (size_t i = 0; i < count; ++i) {
    double at = sim.issuedAt.lookup(memory.order[i]);
    size_t most = i;
    for (; i + 1 < count && sim.issuedAt.lookup(memory.order[i + 1]) == at; ++i)
      if (memory.live[i + 1].total() > memory.live[most].total())
        most = i + 1;
    const MemoryPoint &p = memory.live[most];
    last = std::max(last, at);
    counter(
        "memory by kind", at,
        llvm::json::Object{{"parameters", memory.shardBytes},
                           {"gradients", memory.shardBytes + p.bytes[FullGrad]},
                           {"optimizer", 2 * memory.shardBytes},
                           {"gathered", p.bytes[Gathered]},
                           {"activations", p.bytes[Activation]}});
    counter("memory total", at,
            llvm::json::Object{{"live", memory.steady + p.total()}});
  }
  if (budget > 0)
    for (double at : {0.0, std::max(last, sim.stepTime())})
      counter("memory budget", at, llvm::json::Object{{"bytes", budget}});
}

LogicalResult FsdpSimulatePass::writeTrace(const StepSimulator &sim,
                                           const MemoryProfile &memory) {
  ArrayRef<SimulatedEvent> events = sim.events;
  llvm::json::Array trace;
  trace.push_back(
      llvm::json::Object{{"name", "process_name"},
                         {"ph", "M"},
                         {"pid", 0},
                         {"args", llvm::json::Object{{"name", "rank (any)"}}}});
  const char *lanes[] = {"compute", "all-gather", "reduce-scatter"};
  for (int lane = 0; lane < 3; ++lane)
    trace.push_back(llvm::json::Object{
        {"name", "thread_name"},
        {"ph", "M"},
        {"pid", 0},
        {"tid", lane},
        {"args", llvm::json::Object{{"name", lanes[lane]}}}});
  for (const SimulatedEvent &e : events)
    trace.push_back(llvm::json::Object{{"name", e.name},
                                       {"ph", "X"},
                                       {"pid", 0},
                                       {"tid", e.stream},
                                       {"ts", e.start * 1e6},
                                       {"dur", e.duration * 1e6}});
  addMemoryCounters(trace, sim, memory, memoryBudget);
  std::string error;
  std::unique_ptr<llvm::ToolOutputFile> file =
      openOutputFile(tracePath, &error);
  if (!file)
    return emitError(getOperation().getLoc()) << "fsdp-simulate: " << error;
  file->os() << llvm::formatv("{0:2}", llvm::json::Value(llvm::json::Object{
                                           {"traceEvents", std::move(trace)},
                                           {"displayTimeUnit", "ms"}}));
  file->keep();
  return success();
}

void FsdpSimulatePass::printReport(const StepSimulator &sim,
                                   const NetworkTopology &net,
                                   double peakBytes) {
  double stepTime = sim.stepTime();
  double exposed = stepTime - sim.computeBusy;
  llvm::raw_ostream &os = llvm::errs();
  os << "fsdp-simulate: " << hardware << ", world size " << net.worldSize;
  if (net.isTwoLevel()) {
    int64_t nodes = (net.worldSize + net.ranksPerNode - 1) / net.ranksPerNode;
    os << llvm::format(
        " on %lld node%s of %lld (inside a node %g GB/s, "
        "across nodes %lld x %g GB/s NICs%s)",
        (long long)nodes, nodes == 1 ? "" : "s", (long long)net.ranksPerNode,
        net.intraBusBytes / 1e9, (long long)net.nicsPerNode, net.nicBytes / 1e9,
        net.nicShare == NicShare::Group ? ", shared by groups" : "");
  }
  os << llvm::format(": step %.3f ms, compute %.3f ms, exposed "
                     "communication %.3f ms (%.1f%%), peak %.3f GB "
                     "per rank\n",
                     stepTime * 1e3, sim.computeBusy * 1e3, exposed * 1e3,
                     stepTime > 0 ? 100.0 * exposed / stepTime : 0.0,
                     peakBytes / 1e9);
  if (net.isTwoLevel())
    os << llvm::format("  collectives: %lld inside a node (%.3f ms), %lld "
                       "across nodes (%.3f ms)\n",
                       (long long)sim.commCount[0], sim.commBusy[0] * 1e3,
                       (long long)sim.commCount[1], sim.commBusy[1] * 1e3);
}

void FsdpSimulatePass::runOnOperation() {
  ModuleOp module = getOperation();
  markAllAnalysesPreserved();
  FailureOr<Hardware> hw = selectHardware();
  if (failed(hw))
    return signalPassFailure();

  func::FuncOp step = getTrainStep(module);
  FailureOr<int64_t> world = readWorldSize(module, step);
  if (failed(world))
    return signalPassFailure();
  FailureOr<NetworkTopology> net = selectNetwork(*hw, *world);
  if (failed(net))
    return signalPassFailure();
  StepSimulator sim(*hw, *net);
  if (failed(sim.run(step)))
    return signalPassFailure();
  FailureOr<MemoryProfile> memory =
      computeMemoryProfile(module, step, "fsdp-simulate");
  if (failed(memory))
    return signalPassFailure();
  printReport(sim, *net, double(memory->peakBytes()));

  if (tracePath.empty())
    return;
  if (failed(writeTrace(sim, *memory)))
    return signalPassFailure();
}
