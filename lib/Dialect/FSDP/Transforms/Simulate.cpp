//===- Simulate.cpp - a cost model of a scheduled training step -----------===//
//
// Three streams (compute, all-gather, reduce-scatter), costs from types:
// FLOPs for the GEMM-like ops, bytes moved for everything else, and the
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

double elements(Value v) {
  return double(llvm::cast<RankedTensorType>(v.getType()).getNumElements());
}

/// FLOPs of the ops that are GEMMs (or made of them); 0 for the others.
double flopsOf(Operation *op) {
  if (auto linear = llvm::dyn_cast<LinearOp>(op))
    return 2.0 * elements(linear.getResult()) *
           llvm::cast<RankedTensorType>(linear.getWeight().getType())
               .getDimSize(1);
  if (auto grad = llvm::dyn_cast<LinearGradInputOp>(op))
    return 2.0 * elements(grad.getGrad()) *
           llvm::cast<RankedTensorType>(grad.getWeight().getType())
               .getDimSize(1);
  if (auto grad = llvm::dyn_cast<LinearGradWeightOp>(op))
    return 2.0 * elements(grad.getGrad()) *
           llvm::cast<RankedTensorType>(grad.getInput().getType())
               .getShape()
               .back();
  // Q K^T and P V: 2 * 2 * B * H * T * T * hs = 4 * T * (B * T * C).
  auto attentionFlops = [](Value qkv) {
    auto type = llvm::cast<RankedTensorType>(qkv.getType());
    return 4.0 * type.getDimSize(1) * double(type.getNumElements()) / 3.0;
  };
  if (auto attention = llvm::dyn_cast<AttentionOp>(op))
    return attentionFlops(attention.getQkv());
  if (auto attention = llvm::dyn_cast<AttentionBackwardOp>(op))
    return 2.0 * attentionFlops(attention.getQkv());
  return 0.0;
}

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
  auto world = module->getAttrOfType<IntegerAttr>(kWorldSizeAttrName);
  if (!step || !world || !isShardedStep(step.getBody().front())) {
    emitError(module.getLoc()) << "fsdp-simulate: no sharded @train_step (run "
                                  "--fsdp-shard and --fsdp-schedule first)";
    return signalPassFailure();
  }
  double N = double(world.getInt());
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
    double bytes = 0.0;
    for (Value v : op->getOperands())
      bytes += bytesOf(v);
    for (Value v : op->getResults())
      bytes += bytesOf(v);
    if (auto adamw = llvm::dyn_cast<AdamWShardOp>(op))
      bytes = 7.0 * bytesOf(adamw.getGrad()); // read p, g, m, v; write p, m, v
    double duration = std::max(flopsOf(op) / hw.flops, bytes / hw.memoryBytes);
    events.push_back(
        {op->getName().stripDialect().str(), 0, freeAt[0], duration});
    freeAt[0] += duration;
    computeBusy += duration;
  });
  double stepTime = *std::max_element(freeAt.begin(), freeAt.end());
  double exposed = stepTime - computeBusy;
  FailureOr<MemoryProfile> memory =
      computeMemoryProfile(module, step, "fsdp-simulate");
  if (failed(memory))
    return signalPassFailure();

  llvm::errs() << "fsdp-simulate: " << hardware << ", world size "
               << world.getInt()
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
