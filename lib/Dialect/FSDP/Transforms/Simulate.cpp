//===- Simulate.cpp - a cost model of a scheduled training step -----------===//
//
// Three streams (compute, all-gather, reduce-scatter), costs from types:
// FLOPs and bytes moved of each compute op (KernelOpInterface), and the
// nccl-tests bus-bandwidth model for collectives. What the schedule buys
// shows up as exposed communication: step time not covered by compute.
//
//===----------------------------------------------------------------------===//

#include "fsdp/Dialect/FSDP/Transforms/MemoryProfile.h"
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

struct FsdpSimulatePass
    : public fsdp::impl::FsdpSimulatePassBase<FsdpSimulatePass> {
  using FsdpSimulatePassBase::FsdpSimulatePassBase;
  void runOnOperation() override;
};
} // namespace

void FsdpSimulatePass::runOnOperation() {
  ModuleOp module = getOperation();
  markAllAnalysesPreserved();
  Hardware hw;
  if (hardware == "h100-nvlink")
    hw = {400e12, 370e9, 3000e9, 5e-6};
  else if (hardware == "ib-400g")
    hw = {400e12, 47e9, 3000e9, 15e-6};
  else {
    emitError(module.getLoc())
        << "fsdp-simulate: unknown hardware '" << hardware
        << "', expected h100-nvlink or ib-400g";
    return signalPassFailure();
  }
  if (computeTflops < 0 || busGBps < 0 || memoryGBps < 0) {
    emitError(module.getLoc()) << "fsdp-simulate: rates must be positive";
    return signalPassFailure();
  }
  if (computeTflops > 0)
    hw.flops = computeTflops * 1e12;
  if (busGBps > 0)
    hw.busBytes = busGBps * 1e9;
  if (memoryGBps > 0)
    hw.memoryBytes = memoryGBps * 1e9;
  if (latencyUs >= 0)
    hw.latency = latencyUs * 1e-6;

  func::FuncOp step = getTrainStep(module);
  int64_t world = getShardSize(module);
  if (!step || !isShardedStep(step.getBody().front())) {
    emitError(module.getLoc()) << "fsdp-simulate: no sharded @train_step (run "
                                  "--fsdp-shard and --fsdp-schedule first)";
    return signalPassFailure();
  }
  double N = double(world);
  auto commTime = [&](double bytes) {
    return hw.latency + bytes * (N - 1) / N / hw.busBytes;
  };

  // Streams: 0 compute, 1 all-gather, 2 reduce-scatter.
  std::array<double, 3> freeAt{};
  double computeBusy = 0.0;
  llvm::DenseMap<Value, double> doneAt;
  std::vector<Event> events;
  auto collective = [&](Operation *op, int stream, double bytes, Value token) {
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
  };
  bool noCost = false;
  step.walk<WalkOrder::PreOrder>([&](Operation *op) {
    if (auto start = llvm::dyn_cast<AllGatherStartOp>(op))
      return collective(op, 1, bytesOf(start.getResult()), start.getToken());
    if (auto gather = llvm::dyn_cast<AllGatherOp>(op))
      return collective(op, 1, bytesOf(gather.getResult()), Value());
    if (auto start = llvm::dyn_cast<ReduceScatterStartOp>(op))
      return collective(op, 2, bytesOf(start.getSource()), start.getToken());
    if (auto scatter = llvm::dyn_cast<ReduceScatterOp>(op))
      return collective(op, 2, bytesOf(scatter.getSource()), Value());
    if (auto wait = llvm::dyn_cast<WaitOp>(op)) {
      freeAt[0] = std::max(freeAt[0], doneAt.lookup(wait.getToken()));
      return;
    }
    if (llvm::isa<ComputeOp, YieldOp, ViewOp, LoadOp, PackOp, FreeOp,
                  func::FuncOp, func::ReturnOp>(op) ||
        op->getDialect() != op->getContext()->getLoadedDialect<FSDPDialect>())
      return;
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
      noCost = true;
      return;
    }
    double duration = std::max(flops / hw.flops, bytes / hw.memoryBytes);
    events.push_back(
        {op->getName().stripDialect().str(), 0, freeAt[0], duration});
    freeAt[0] += duration;
    computeBusy += duration;
  });
  if (noCost)
    return signalPassFailure();
  double stepTime = *std::max_element(freeAt.begin(), freeAt.end());
  double exposed = stepTime - computeBusy;
  FailureOr<MemoryProfile> memory =
      computeMemoryProfile(module, step, "fsdp-simulate");
  if (failed(memory))
    return signalPassFailure();

  llvm::errs() << "fsdp-simulate: " << hardware << ", world size "
               << world
               << llvm::format(": step %.3f ms, compute %.3f ms, exposed "
                               "communication %.3f ms (%.1f%%), peak %.3f GB "
                               "per rank\n",
                               stepTime * 1e3, computeBusy * 1e3, exposed * 1e3,
                               stepTime > 0 ? 100.0 * exposed / stepTime : 0.0,
                               double(memory->peakBytes()) / 1e9);

  if (tracePath.empty())
    return;
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
  if (!file) {
    emitError(module.getLoc()) << "fsdp-simulate: " << error;
    return signalPassFailure();
  }
  file->os() << llvm::formatv("{0:2}", llvm::json::Value(llvm::json::Object{
                                           {"traceEvents", std::move(trace)},
                                           {"displayTimeUnit", "ms"}}));
  file->keep();
}
