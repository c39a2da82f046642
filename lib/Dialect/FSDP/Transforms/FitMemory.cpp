//===- FitMemory.cpp - choose a schedule that fits a memory budget --------===//
//
// Every trial is a real compile of a copy of the module up to the schedule,
// so its peak is the exact one the schedule's budget check will see, and
// its time the simulator's, recomputation included: the search trusts no
// estimate. What keeps it fast is the ladder: rungs ordered by falling
// peak and rising cost, searched by bisection.
//
//===----------------------------------------------------------------------===//

#include "fsdp/Dialect/FSDP/Analysis/MemoryProfile.h"
#include "fsdp/Dialect/FSDP/Analysis/RuntimeOverhead.h"
#include "fsdp/Dialect/FSDP/Analysis/StepSimulator.h"
#include "fsdp/Dialect/FSDP/Transforms/Passes.h"

#include "mlir/IR/Builders.h"
#include "mlir/Pass/PassManager.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/FormatVariadic.h"

#include <map>

namespace mlir::fsdp {
#define GEN_PASS_DEF_FSDPFITMEMORYPASS
#include "fsdp/Dialect/FSDP/Transforms/Passes.h.inc"
} // namespace mlir::fsdp

using namespace mlir;
using namespace mlir::fsdp;

namespace {
/// One rung: attention's form, and how many units (in forward order) are
/// selective and full; the first `full` of the selective ones are full.
struct Rung {
  bool blocked = false;
  int64_t selective = 0, full = 0;
  StringRef policyOf(size_t unitIndex) const {
    if (int64_t(unitIndex) < full)
      return "full";
    return int64_t(unitIndex) < selective ? "selective" : "none";
  }
};

/// What a trial compile measured.
struct Trial {
  int64_t arena = 0, outside = 0;
  double stepTime = 0.0;
  MemoryPoint atPeak;
  int64_t steady = 0;
  /// Per unit: bytes its backward regions read from before the backward
  /// (what it keeps), and the simulated time of the forward ops it runs
  /// again there.
  llvm::StringMap<int64_t> kept;
  llvm::StringMap<double> recompute;
  int64_t total() const { return arena + outside; }
};

struct FsdpFitMemoryPass
    : public fsdp::impl::FsdpFitMemoryPassBase<FsdpFitMemoryPass> {
  using FsdpFitMemoryPassBase::FsdpFitMemoryPassBase;
  void runOnOperation() override;

private:
  LogicalResult checkOptions();
  Rung rungAt(int64_t r) const;
  /// The trial of rung r, compiled once.
  FailureOr<Trial *> trialAt(int64_t r);
  void reportSmallest(const Rung &rung, const Trial &smallest);
  FailureOr<Trial> compile(const Rung &rung);
  void apply(ModuleOp module, const Rung &rung);
  void printDecision(const Rung &rung, const Trial &chosen,
                     const Trial &baseline);
  SmallVector<StringAttr> units; ///< in forward order
  Hardware hw;
  /// A std::map: trialAt hands out pointers that later trials keep valid.
  std::map<int64_t, Trial> trials;
};

/// The units in the order the forward first runs them.
SmallVector<StringAttr> unitsInForwardOrder(ModuleOp module) {
  SmallVector<StringAttr> order;
  llvm::SmallDenseSet<StringAttr> seen;
  module.walk([&](ComputeOp compute) {
    StringAttr unit = compute.getUnitAttr().getAttr();
    if (seen.insert(unit).second)
      order.push_back(unit);
  });
  return order;
}

/// What each unit's backward keeps and recomputes, from the trial's step:
/// it keeps the tensors it reads that exist before the backward starts
/// (activations and inputs; not gradients, not gathered parameters), and
/// recomputes the forward ops inside its regions.
void measureUnits(func::FuncOp step, const Hardware &hw, Trial &trial) {
  Block &block = step.getBody().front();
  llvm::DenseMap<Operation *, int64_t> position;
  int64_t firstBackward = -1;
  for (auto [i, op] : llvm::enumerate(block)) {
    position[&op] = int64_t(i);
    auto compute = llvm::dyn_cast<ComputeOp>(op);
    if (firstBackward < 0 && compute && compute.getPhase() == Phase::Backward)
      firstBackward = int64_t(i);
  }
  auto beforeBackward = [&](Value v) {
    Operation *def = v.getDefiningOp();
    if (!def)
      return true; // an input of the step
    if (llvm::isa<AllGatherOp, AllGatherStartOp, WaitOp, ViewOp>(def))
      return false;
    return position.lookup(def) < firstBackward;
  };
  for (ComputeOp compute : block.getOps<ComputeOp>()) {
    if (compute.getPhase() != Phase::Backward)
      continue;
    StringRef unit = compute.getUnitAttr().getValue();
    for (Value input : compute.getInputs())
      if (llvm::isa<RankedTensorType>(input.getType()) && beforeBackward(input))
        trial.kept[unit] += getSizeInBytes(input.getType());
    compute.getBodyBlock().walk([&](Operation *op) {
      if (llvm::isa<DifferentiableOpInterface>(op))
        trial.recompute[unit] += std::max(0.0, computeTime(op, hw));
    });
  }
}
} // namespace

/// Sets `rung` on `module`: attention's form on every attention, the
/// policy on every unit (`fsdp.remat`, which --fsdp-remat follows).
void FsdpFitMemoryPass::apply(ModuleOp module, const Rung &rung) {
  AttentionImpl impl =
      rung.blocked ? AttentionImpl::Blocked : AttentionImpl::Materialized;
  SmallVector<AttentionOp> attention;
  module.walk([&](AttentionOp op) { attention.push_back(op); });
  for (AttentionOp op : attention)
    if (op.getSaved().use_empty())
      setAttentionImpl(op, impl);
  Builder builder(module.getContext());
  SymbolTable symbols(module);
  for (auto [i, unit] : llvm::enumerate(units))
    if (Operation *op = symbols.lookup(unit))
      op->setAttr("fsdp.remat", builder.getStringAttr(rung.policyOf(i)));
}

FailureOr<Trial> FsdpFitMemoryPass::compile(const Rung &rung) {
  OwningOpRef<ModuleOp> copy(getOperation().clone());
  apply(*copy, rung);
  PassManager pm(&getContext());
  pm.addPass(createFsdpAutodiffPass());
  pm.addPass(createFsdpRematPass());
  pm.addPass(createFsdpShardPass());
  FsdpSchedulePassOptions schedule;
  schedule.forwardPrefetch = forwardPrefetch;
  schedule.backwardPrefetch = backwardPrefetch;
  schedule.maxInflightGathers = maxInflightGathers;
  schedule.bucketBytes = bucketBytes;
  schedule.reshardAfterForward = reshardAfterForward;
  pm.addPass(createFsdpSchedulePass(schedule));
  if (failed(pm.run(*copy)))
    return failure();
  func::FuncOp step = getTrainStep(*copy);
  FailureOr<MemoryProfile> profile =
      computeMemoryProfile(*copy, step, "fsdp-fit-memory");
  StepSimulator sim(hw, double(getShardSize(*copy)));
  if (failed(profile) || failed(sim.run(step)))
    return failure();
  Trial trial;
  trial.arena = profile->peakBytes();
  trial.steady = profile->steady;
  trial.atPeak = profile->live[profile->overall];
  trial.outside = runtime == "none"
                      ? 0
                      : estimateRuntimeOverhead(*copy, step, runtime).total();
  trial.stepTime = sim.stepTime();
  measureUnits(step, hw, trial);
  return trial;
}

void FsdpFitMemoryPass::printDecision(const Rung &rung, const Trial &chosen,
                                      const Trial &baseline) {
  llvm::raw_ostream &os = llvm::errs();
  os << llvm::format("fsdp-fit-memory: budget %.3f GB per rank (runtime "
                     "%s): peak %.3f GB (arena %.3f + outside %.3f), "
                     "simulated step %.3f ms on %s, %.3f ms more than "
                     "without recomputation and with materialized attention "
                     "(peak %.3f GB)\n",
                     double(memoryBudget) / 1e9, runtime.c_str(),
                     double(chosen.total()) / 1e9, double(chosen.arena) / 1e9,
                     double(chosen.outside) / 1e9, chosen.stepTime * 1e3,
                     hardware.c_str(),
                     (chosen.stepTime - baseline.stepTime) * 1e3,
                     double(baseline.total()) / 1e9);
  os << "  attention: " << (rung.blocked ? "blocked" : "materialized") << "\n";
  os << llvm::format("  %-24s %-10s %16s %14s\n", "unit", "policy",
                     "bytes saved", "recompute ms");
  for (auto [i, unit] : llvm::enumerate(units)) {
    StringRef name = unit.getValue();
    int64_t saved = baseline.kept.lookup(name) - chosen.kept.lookup(name);
    double extra =
        chosen.recompute.lookup(name) - baseline.recompute.lookup(name);
    os << llvm::format(
        "  %-24s %-10s %16lld %14.3f\n", ("@" + name).str().c_str(),
        rung.policyOf(i).str().c_str(), (long long)saved, extra * 1e3);
  }
}

LogicalResult FsdpFitMemoryPass::checkOptions() {
  Location loc = getOperation().getLoc();
  std::optional<Hardware> named = lookupHardware(hardware);
  if (!named)
    return emitError(loc) << "fsdp-fit-memory: unknown hardware '" << hardware
                          << "', expected h100-nvlink or ib-400g";
  if (runtime != "none" &&
      !llvm::is_contained(getOverheadBackends(), StringRef(runtime)))
    return emitError(loc) << "fsdp-fit-memory: runtime must be cpu, cuda or "
                             "none, got '"
                          << runtime << "'";
  if (attention != "auto" && attention != "materialized" &&
      attention != "blocked")
    return emitError(loc) << "fsdp-fit-memory: attention must be auto, "
                             "materialized or blocked, got '"
                          << attention << "'";
  hw = *named;
  return success();
}

// Rung r: 0 materialized; 1 blocked; 1 + k: k units selective;
// 1 + n + k: every unit selective, k of them full (attention= can pin the
// form).
Rung FsdpFitMemoryPass::rungAt(int64_t r) const {
  int64_t n = int64_t(units.size());
  Rung rung;
  rung.blocked = attention == "blocked" || (attention == "auto" && r >= 1);
  rung.selective = std::clamp<int64_t>(r - 1, 0, n);
  rung.full = std::clamp<int64_t>(r - 1 - n, 0, n);
  return rung;
}

FailureOr<Trial *> FsdpFitMemoryPass::trialAt(int64_t r) {
  auto it = trials.find(r);
  if (it != trials.end())
    return &it->second;
  FailureOr<Trial> t = compile(rungAt(r));
  if (failed(t))
    return failure();
  return &(trials[r] = std::move(*t));
}

void FsdpFitMemoryPass::reportSmallest(const Rung &rung, const Trial &t) {
  emitError(getOperation().getLoc()) << llvm::formatv(
      "fsdp-fit-memory: no schedule fits {0} bytes per rank: the smallest "
      "peak reachable (attention {1}, every unit recomputed in full) is {2} "
      "bytes: {3} steady state (shards), {4} gathered parameters, {5} "
      "full-size gradients, {6} activations, {7} outside the arena ({8})",
      memoryBudget.getValue().bytes, rung.blocked ? "blocked" : "materialized",
      t.total(), t.steady, t.atPeak.bytes[Gathered], t.atPeak.bytes[FullGrad],
      t.atPeak.bytes[Activation], t.outside, runtime);
}

void FsdpFitMemoryPass::runOnOperation() {
  if (memoryBudget <= 0)
    return;
  if (failed(checkOptions()))
    return signalPassFailure();
  units = unitsInForwardOrder(getOperation());
  int64_t last = 1 + 2 * int64_t(units.size());
  FailureOr<Trial *> baseline = trialAt(0), smallest = trialAt(last);
  if (failed(baseline) || failed(smallest))
    return signalPassFailure();
  if ((*smallest)->total() > memoryBudget) {
    reportSmallest(rungAt(last), **smallest);
    return signalPassFailure();
  }
  // The first rung that fits: peaks fall along the ladder.
  int64_t lo = 0, hi = last;
  while (lo < hi) {
    int64_t mid = lo + (hi - lo) / 2;
    FailureOr<Trial *> t = trialAt(mid);
    if (failed(t))
      return signalPassFailure();
    if ((*t)->total() <= memoryBudget)
      hi = mid;
    else
      lo = mid + 1;
  }
  apply(getOperation(), rungAt(hi));
  printDecision(rungAt(hi), trials[hi], **baseline);
}
