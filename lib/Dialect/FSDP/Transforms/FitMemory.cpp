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
/// The schedule's knobs a trial compiles with.
struct Knobs {
  int64_t forwardPrefetch = 0, backwardPrefetch = 0, bucketBytes = 0;
  bool reshardAfterForward = true;
  auto key() const {
    return std::make_tuple(forwardPrefetch, backwardPrefetch, bucketBytes,
                           reshardAfterForward);
  }
};

/// One rung: attention's form, and how many units (in forward order) are
/// selective and full; the first `full` of the selective ones are full.
struct Rung {
  bool blocked = false;
  int64_t selective = 0, full = 0;
  Knobs knobs;
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
  Rung rungAt(int64_t r, const Knobs &knobs) const;
  /// The trial of rung r with `knobs`, compiled once.
  FailureOr<Trial *> trialAt(int64_t r, const Knobs &knobs);
  /// The first rung that fits with `knobs` (the last must), by bisection.
  FailureOr<int64_t> firstFit(const Knobs &knobs);
  /// Among `knobs` and faster schedules at rung r, the fastest that fits.
  FailureOr<Knobs> fastestKnobs(int64_t r, const Knobs &knobs);
  void reportSmallest(const Rung &rung, const Trial &smallest);
  FailureOr<Trial> compile(const Rung &rung);
  void apply(ModuleOp module, const Rung &rung);
  void printDecision(const Rung &rung, const Trial &chosen,
                     const Trial &baseline);
  SmallVector<StringAttr> units; ///< in forward order
  Hardware hw;
  /// A std::map: trialAt hands out pointers that later trials keep valid.
  std::map<std::pair<int64_t, decltype(Knobs().key())>, Trial> trials;
};

/// Records the chosen schedule on the module for --fsdp-schedule, which
/// takes it over its own options.
void setScheduleChoice(ModuleOp module, const Knobs &k) {
  Builder b(module.getContext());
  module->setAttr(
      kScheduleChoiceAttrName,
      b.getDictionaryAttr(
          {b.getNamedAttr("forward_prefetch",
                          b.getI64IntegerAttr(k.forwardPrefetch)),
           b.getNamedAttr("backward_prefetch",
                          b.getI64IntegerAttr(k.backwardPrefetch)),
           b.getNamedAttr("bucket_bytes", b.getI64IntegerAttr(k.bucketBytes)),
           b.getNamedAttr("reshard_after_forward",
                          b.getBoolAttr(k.reshardAfterForward))}));
}

std::string describe(const Knobs &k) {
  return llvm::formatv("forward-prefetch={0} backward-prefetch={1} "
                       "bucket-bytes={2} reshard-after-forward={3}",
                       k.forwardPrefetch, k.backwardPrefetch, k.bucketBytes,
                       k.reshardAfterForward ? "true" : "false")
      .str();
}

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
    // Forward values: results of forward regions and of forward ops
    // between them; not gathers, not gradients (cross-entropy's).
    auto compute = llvm::dyn_cast<ComputeOp>(def);
    if (!(compute && compute.getPhase() == Phase::Forward) &&
        !llvm::isa<DifferentiableOpInterface>(def))
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
    if (op.getSaved().use_empty() &&
        (impl == AttentionImpl::Materialized || hasBlockedKernels(op)))
      setAttentionImpl(op, impl);
  Builder builder(module.getContext());
  SymbolTable symbols(module);
  for (auto [i, unit] : llvm::enumerate(units))
    if (Operation *op = symbols.lookup(unit))
      op->setAttr(kRematAttrName, builder.getStringAttr(rung.policyOf(i)));
}

FailureOr<Trial> FsdpFitMemoryPass::compile(const Rung &rung) {
  OwningOpRef<ModuleOp> copy(getOperation().clone());
  // The trial's knobs, not a choice an earlier run left on the module.
  (*copy)->removeAttr(kScheduleChoiceAttrName);
  apply(*copy, rung);
  PassManager pm(&getContext());
  pm.addPass(createFsdpAutodiffPass());
  pm.addPass(createFsdpRematPass());
  pm.addPass(createFsdpShardPass());
  FsdpMixedPrecisionPassOptions precision;
  precision.paramDtype = paramDtype;
  precision.reduceDtype = reduceDtype;
  pm.addPass(createFsdpMixedPrecisionPass(precision));
  if (gradClip != 0.0) {
    FsdpClipGradPassOptions clip;
    clip.maxNorm = gradClip;
    pm.addPass(createFsdpClipGradPass(clip));
  }
  FsdpSchedulePassOptions schedule;
  schedule.forwardPrefetch = rung.knobs.forwardPrefetch;
  schedule.backwardPrefetch = rung.knobs.backwardPrefetch;
  schedule.maxInflightGathers = maxInflightGathers;
  schedule.bucketBytes = rung.knobs.bucketBytes;
  schedule.reshardAfterForward = rung.knobs.reshardAfterForward;
  pm.addPass(createFsdpSchedulePass(schedule));
  if (failed(pm.run(*copy)))
    return failure();
  func::FuncOp step = getTrainStep(*copy);
  FailureOr<MemoryProfile> profile =
      computeMemoryProfile(*copy, step, "fsdp-fit-memory");
  StepSimulator sim(hw, getShardSize(*copy));
  if (failed(profile) || failed(sim.run(step)))
    return failure();
  Trial trial;
  trial.arena = profile->peakBytes();
  trial.steady = profile->steady;
  trial.atPeak = profile->live[profile->overall];
  trial.outside = getBudgetedOverhead(*copy, step, runtime);
  trial.stepTime = sim.stepTime();
  measureUnits(step, hw, trial);
  return trial;
}

void FsdpFitMemoryPass::printDecision(const Rung &rung, const Trial &chosen,
                                      const Trial &baseline) {
  llvm::raw_ostream &os = llvm::errs();
  os << llvm::format("fsdp-fit-memory: budget %.3f GB per rank (runtime "
                     "%s): peak %.3f GB (arena %.3f + outside %.3f), "
                     "simulated step %.3f ms on %s (%+.3f ms against the "
                     "first rung: attention as attention= allows, no "
                     "recomputation, the given schedule: peak %.3f GB)\n",
                     double(memoryBudget) / 1e9, runtime.c_str(),
                     double(chosen.total()) / 1e9, double(chosen.arena) / 1e9,
                     double(chosen.outside) / 1e9, chosen.stepTime * 1e3,
                     hardware.c_str(),
                     (chosen.stepTime - baseline.stepTime) * 1e3,
                     double(baseline.total()) / 1e9);
  os << "  attention: " << (rung.blocked ? "blocked" : "materialized") << "\n";
  os << "  schedule: " << describe(rung.knobs) << "\n";
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
Rung FsdpFitMemoryPass::rungAt(int64_t r, const Knobs &knobs) const {
  int64_t n = int64_t(units.size());
  Rung rung;
  rung.blocked = attention == "blocked" || (attention == "auto" && r >= 1);
  rung.selective = std::clamp<int64_t>(r - 1, 0, n);
  rung.full = std::clamp<int64_t>(r - 1 - n, 0, n);
  rung.knobs = knobs;
  return rung;
}

FailureOr<Trial *> FsdpFitMemoryPass::trialAt(int64_t r, const Knobs &knobs) {
  auto key = std::make_pair(r, knobs.key());
  auto it = trials.find(key);
  if (it != trials.end())
    return &it->second;
  FailureOr<Trial> t = compile(rungAt(r, knobs));
  if (failed(t))
    return failure();
  return &(trials[key] = std::move(*t));
}

FailureOr<int64_t> FsdpFitMemoryPass::firstFit(const Knobs &knobs) {
  int64_t lo = 0, hi = 1 + 2 * int64_t(units.size());
  while (lo < hi) {
    int64_t mid = lo + (hi - lo) / 2;
    FailureOr<Trial *> t = trialAt(mid, knobs);
    if (failed(t))
      return failure();
    if ((*t)->total() <= memoryBudget)
      hi = mid;
    else
      lo = mid + 1;
  }
  return hi;
}

/// Faster schedules than `knobs`, each one step away: a gather prefetched
/// a region earlier in both passes, two, collectives bucketed at 25 MB (as
/// PyTorch's DDP does), parameters kept gathered between the forward and
/// the backward.
static SmallVector<Knobs> fasterVariants(const Knobs &knobs) {
  SmallVector<Knobs> out;
  for (int64_t depth : {int64_t(1), int64_t(2)}) {
    Knobs k = knobs;
    k.forwardPrefetch = std::max(k.forwardPrefetch, depth);
    k.backwardPrefetch = std::max(k.backwardPrefetch, depth);
    out.push_back(k);
  }
  Knobs bucketed = knobs;
  bucketed.bucketBytes = std::max<int64_t>(knobs.bucketBytes, 25'000'000);
  out.push_back(bucketed);
  Knobs kept = knobs;
  kept.reshardAfterForward = false;
  out.push_back(kept);
  return out;
}

FailureOr<Knobs> FsdpFitMemoryPass::fastestKnobs(int64_t r,
                                                 const Knobs &knobs) {
  Knobs best = knobs;
  FailureOr<Trial *> current = trialAt(r, knobs);
  if (failed(current))
    return failure();
  double bestTime = (*current)->stepTime;
  for (const Knobs &k : fasterVariants(knobs)) {
    if (k.key() == knobs.key())
      continue;
    FailureOr<Trial *> t = trialAt(r, k);
    if (failed(t))
      return failure();
    if ((*t)->total() <= memoryBudget && (*t)->stepTime < bestTime) {
      best = k;
      bestTime = (*t)->stepTime;
    }
  }
  return best;
}

void FsdpFitMemoryPass::reportSmallest(const Rung &rung, const Trial &t) {
  emitError(getOperation().getLoc()) << llvm::formatv(
      "fsdp-fit-memory: no schedule fits {0} bytes per rank: the smallest "
      "peak reachable (attention {1}, every unit recomputed in full, {9}) "
      "is {2} "
      "bytes: {3} steady state (shards), {4} gathered parameters, {5} "
      "full-size gradients, {6} activations, {7} outside the arena ({8})",
      memoryBudget.getValue().bytes, rung.blocked ? "blocked" : "materialized",
      t.total(), t.steady, t.atPeak.bytes[Gathered], t.atPeak.bytes[FullGrad],
      t.atPeak.bytes[Activation], t.outside, runtime, describe(rung.knobs));
}

void FsdpFitMemoryPass::runOnOperation() {
  if (memoryBudget <= 0)
    return;
  if (failed(checkOptions()))
    return signalPassFailure();
  units = unitsInForwardOrder(getOperation());
  int64_t last = 1 + 2 * int64_t(units.size());
  Knobs given{forwardPrefetch, backwardPrefetch, bucketBytes,
              reshardAfterForward};
  // The leanest schedule: no prefetch, no buckets, parameters freed after
  // each forward region.
  Knobs lean;
  Knobs knobs = given;
  FailureOr<Trial *> baseline = trialAt(0, given),
                     smallest = trialAt(last, given);
  if (failed(baseline) || failed(smallest))
    return signalPassFailure();
  if ((*smallest)->total() > memoryBudget) {
    knobs = lean;
    smallest = trialAt(last, lean);
    if (failed(smallest))
      return signalPassFailure();
    if ((*smallest)->total() > memoryBudget) {
      reportSmallest(rungAt(last, lean), **smallest);
      return signalPassFailure();
    }
  }
  FailureOr<int64_t> rung = firstFit(knobs);
  if (failed(rung))
    return signalPassFailure();
  FailureOr<Knobs> fastest = fastestKnobs(*rung, knobs);
  if (failed(fastest))
    return signalPassFailure();
  Rung chosen = rungAt(*rung, *fastest);
  apply(getOperation(), chosen);
  setScheduleChoice(getOperation(), chosen.knobs);
  printDecision(chosen, **trialAt(*rung, *fastest), **baseline);
}
