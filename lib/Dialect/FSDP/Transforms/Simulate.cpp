//===- Simulate.cpp - a cost model of a scheduled training step -----------===//
//
// Three streams (compute, all-gather, reduce-scatter), costs from types:
// FLOPs and bytes moved of each compute op (KernelOpInterface), and the
// nccl-tests bus-bandwidth model for collectives. What the schedule buys
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

namespace mlir::fsdp {
#define GEN_PASS_DEF_FSDPSIMULATEPASS
#include "fsdp/Dialect/FSDP/Transforms/Passes.h.inc"
} // namespace mlir::fsdp

using namespace mlir;
using namespace mlir::fsdp;

namespace {
struct FsdpSimulatePass
    : public fsdp::impl::FsdpSimulatePassBase<FsdpSimulatePass> {
  using FsdpSimulatePassBase::FsdpSimulatePassBase;
  void runOnOperation() override;

private:
  /// The named hardware with the rates the options override; fails after
  /// reporting an unknown name or a negative rate.
  FailureOr<Hardware> selectHardware();
  /// Writes the events as a Chrome trace to `trace-path`.
  LogicalResult writeTrace(ArrayRef<SimulatedEvent> events);
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
  if (computeTflops < 0 || busGBps < 0 || memoryGBps < 0) {
    emitError(module.getLoc()) << "fsdp-simulate: rates must be positive";
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

/// The world size (the mesh's shard axis) of a sharded @train_step, or
/// failure after an error when there is none.
static FailureOr<int64_t> readWorldSize(ModuleOp module, func::FuncOp step) {
  if (!step || !isShardedStep(step.getBody().front())) {
    emitError(module.getLoc()) << "fsdp-simulate: no sharded @train_step (run "
                                  "--fsdp-shard and --fsdp-schedule first)";
    return failure();
  }
  return getShardSize(module);
}

LogicalResult FsdpSimulatePass::writeTrace(ArrayRef<SimulatedEvent> events) {
  llvm::json::Array trace;
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
  StepSimulator sim(*hw, double(*world));
  if (failed(sim.run(step)))
    return signalPassFailure();
  double stepTime = sim.stepTime();
  double computeBusy = sim.computeBusy;
  double exposed = stepTime - computeBusy;
  FailureOr<MemoryProfile> memory =
      computeMemoryProfile(module, step, "fsdp-simulate");
  if (failed(memory))
    return signalPassFailure();

  llvm::errs() << "fsdp-simulate: " << hardware << ", world size " << *world
               << llvm::format(": step %.3f ms, compute %.3f ms, exposed "
                               "communication %.3f ms (%.1f%%), peak %.3f GB "
                               "per rank\n",
                               stepTime * 1e3, computeBusy * 1e3, exposed * 1e3,
                               stepTime > 0 ? 100.0 * exposed / stepTime : 0.0,
                               double(memory->peakBytes()) / 1e9);

  if (tracePath.empty())
    return;
  if (failed(writeTrace(sim.events)))
    return signalPassFailure();
}
