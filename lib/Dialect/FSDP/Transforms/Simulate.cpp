//===- Simulate.cpp - a cost model of a scheduled training step -----------===//
//
// Three streams (compute, all-gather, reduce-scatter), costs from types:
// FLOPs and bytes moved of each compute op (KernelOpInterface), and the
// nccl-tests bus-bandwidth model for collectives. What the schedule buys
// shows up as exposed communication: step time not covered by compute.
//
//===----------------------------------------------------------------------===//

#include "fsdp/Dialect/FSDP/Analysis/MemoryProfile.h"
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
struct Hardware {
  double flops, busBytes, memoryBytes, latency; // per second, seconds
};

double bytesOf(Value v) { return double(getSizeInBytes(v.getType())); }

struct Event {
  std::string name;
  int stream;
  double start, duration;
};

/// The three streams of a step, op by op: when each is free, what compute
/// has cost, and the events of the trace.
class StepSimulator {
public:
  StepSimulator(const Hardware &hw, double N) : hw(hw), N(N) {}

  /// Runs the step in program order; fails after reporting an op that has
  /// no cost.
  LogicalResult run(func::FuncOp step);

  double stepTime() const {
    return *std::max_element(freeAt.begin(), freeAt.end());
  }
  double computeBusy = 0.0;
  std::vector<Event> events;

private:
  /// The nccl-tests bus-bandwidth model of a collective moving `bytes`.
  double commTime(double bytes) const {
    return hw.latency + bytes * (N - 1) / N / hw.busBytes;
  }
  /// A collective on `stream`: started under `token`, or synchronous.
  void collective(Operation *op, int stream, double bytes, Value token);
  /// A compute op on stream 0; fails after reporting an op with no cost.
  LogicalResult compute(Operation *op);
  /// One op of the step: a collective, a wait, a compute op or nothing.
  LogicalResult visit(Operation *op);

  const Hardware &hw;
  double N;
  // Streams: 0 compute, 1 all-gather, 2 reduce-scatter.
  std::array<double, 3> freeAt{};
  llvm::DenseMap<Value, double> doneAt;
};

struct FsdpSimulatePass
    : public fsdp::impl::FsdpSimulatePassBase<FsdpSimulatePass> {
  using FsdpSimulatePassBase::FsdpSimulatePassBase;
  void runOnOperation() override;

private:
  /// The named hardware with the rates the options override; fails after
  /// reporting an unknown name or a negative rate.
  FailureOr<Hardware> selectHardware();
  /// Writes the events as a Chrome trace to `trace-path`.
  LogicalResult writeTrace(ArrayRef<Event> events);
};
} // namespace

void StepSimulator::collective(Operation *op, int stream, double bytes,
                               Value token) {
  double start = std::max(freeAt[0], freeAt[stream]);
  // A grouped start is part of its bucket's one fused collective: it adds
  // its bytes, not another latency.
  double end =
      start + commTime(bytes) - (op->hasAttr("grouped") ? hw.latency : 0.0);
  freeAt[stream] = end;
  std::string name = op->getName().stripDialect().str() + " @" +
                     getCollectiveUnit(op).getValue().str();
  events.push_back({name, stream, start, end - start});
  if (token)
    doneAt[token] = end;
  else // a synchronous collective: compute waits for it at once
    freeAt[0] = std::max(freeAt[0], end);
}

LogicalResult StepSimulator::compute(Operation *op) {
  // A compute op's costs are its own (KernelOpInterface); the shard's
  // AdamW reads p, g, m, v and writes p, m, v; what else is left of the
  // dialect here (adamw of an unsharded parameter) moves its operands.
  double flops = 0.0, bytes = 0.0;
  if (auto kernelOp = llvm::dyn_cast<KernelOpInterface>(op)) {
    flops = kernelOp.getFlops();
    bytes = kernelOp.getBytesMoved();
  } else if (auto adamw = llvm::dyn_cast<AdamWShardOp>(op)) {
    bytes = 7.0 * bytesOf(adamw.getGrad());
  } else if (llvm::isa<AdamWOp>(op)) {
    bytes = bytesOf(llvm::cast<AdamWOp>(op).getGrad());
  } else {
    op->emitOpError() << "has no cost in fsdp-simulate (a compute op "
                         "implements KernelOpInterface)";
    return failure();
  }
  double duration = std::max(flops / hw.flops, bytes / hw.memoryBytes);
  events.push_back(
      {op->getName().stripDialect().str(), 0, freeAt[0], duration});
  freeAt[0] += duration;
  computeBusy += duration;
  return success();
}

LogicalResult StepSimulator::visit(Operation *op) {
  if (auto start = llvm::dyn_cast<AllGatherStartOp>(op)) {
    collective(op, 1, bytesOf(start.getResult()), start.getToken());
    return success();
  }
  if (auto gather = llvm::dyn_cast<AllGatherOp>(op)) {
    collective(op, 1, bytesOf(gather.getResult()), Value());
    return success();
  }
  if (auto start = llvm::dyn_cast<ReduceScatterStartOp>(op)) {
    collective(op, 2, bytesOf(start.getSource()), start.getToken());
    return success();
  }
  if (auto scatter = llvm::dyn_cast<ReduceScatterOp>(op)) {
    collective(op, 2, bytesOf(scatter.getSource()), Value());
    return success();
  }
  if (auto wait = llvm::dyn_cast<WaitOp>(op)) {
    freeAt[0] = std::max(freeAt[0], doneAt.lookup(wait.getToken()));
    return success();
  }
  if (llvm::isa<ComputeOp, YieldOp, ViewOp, LoadOp, PackOp, FreeOp,
                func::FuncOp, func::ReturnOp>(op) ||
      op->getDialect() != op->getContext()->getLoadedDialect<FSDPDialect>())
    return success();
  return compute(op);
}

LogicalResult StepSimulator::run(func::FuncOp step) {
  bool noCost = false;
  step.walk<WalkOrder::PreOrder>([&](Operation *op) {
    if (failed(visit(op)))
      noCost = true;
  });
  return failure(noCost);
}

FailureOr<Hardware> FsdpSimulatePass::selectHardware() {
  ModuleOp module = getOperation();
  Hardware hw;
  if (hardware == "h100-nvlink")
    hw = {400e12, 370e9, 3000e9, 5e-6};
  else if (hardware == "ib-400g")
    hw = {400e12, 47e9, 3000e9, 15e-6};
  else {
    emitError(module.getLoc())
        << "fsdp-simulate: unknown hardware '" << hardware
        << "', expected h100-nvlink or ib-400g";
    return failure();
  }
  if (computeTflops < 0 || busGBps < 0 || memoryGBps < 0) {
    emitError(module.getLoc()) << "fsdp-simulate: rates must be positive";
    return failure();
  }
  if (computeTflops > 0)
    hw.flops = computeTflops * 1e12;
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

LogicalResult FsdpSimulatePass::writeTrace(ArrayRef<Event> events) {
  llvm::json::Array trace;
  const char *lanes[] = {"compute", "all-gather", "reduce-scatter"};
  for (int lane = 0; lane < 3; ++lane)
    trace.push_back(llvm::json::Object{
        {"name", "thread_name"},
        {"ph", "M"},
        {"pid", 0},
        {"tid", lane},
        {"args", llvm::json::Object{{"name", lanes[lane]}}}});
  for (const Event &e : events)
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
