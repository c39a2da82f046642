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

#include <cmath>
#include <cstdio>
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
  /// Expert parallelism's exchanges started beside the compute (which
  /// holds the split regions' values longer) or in place.
  bool overlapAllToAll = false;
  /// Mixed precision's shard copies at a shard group of one (2P bytes
  /// that spare the step its rounding gathers).
  bool shardCopy = true;
  auto key() const {
    return std::make_tuple(forwardPrefetch, backwardPrefetch, bucketBytes,
                           reshardAfterForward, overlapAllToAll, shardCopy);
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

/// What the search chose at one mesh: the rung, the trial it measured and
/// the first rung's (the baseline the report compares with).
struct Choice {
  Rung rung;
  Trial chosen, baseline;
};

struct FsdpFitMemoryPass
    : public mlir::fsdp::impl::FsdpFitMemoryPassBase<FsdpFitMemoryPass> {
  using FsdpFitMemoryPassBase::FsdpFitMemoryPassBase;
  void runOnOperation() override;

private:
  LogicalResult checkOptions();
  LogicalResult selectNetwork();
  std::string onNetwork() const;
  Rung rungAt(int64_t r, const Knobs &knobs) const;
  /// The trial of rung r with `knobs`, compiled once.
  FailureOr<Trial *> trialAt(int64_t r, const Knobs &knobs);
  /// The first rung that fits with `knobs` (the last must), by bisection.
  FailureOr<int64_t> firstFit(const Knobs &knobs);
  /// Among `knobs` and faster schedules at rung r, the fastest that fits.
  FailureOr<Knobs> fastestKnobs(int64_t r, const Knobs &knobs);
  void reportSmallest(const Rung &rung, const Trial &smallest);
  /// The search at the module's mesh: the fastest rung and schedule that
  /// fit, or std::nullopt with the smallest peak's rung and trial in
  /// `smallestRung` and `smallest` when none does; failure when a trial
  /// does not compile.
  FailureOr<std::optional<Choice>> search(Rung &smallestRung, Trial &smallest);
  /// mesh=auto: the search at every candidate mesh, the fastest that fits.
  LogicalResult chooseMesh();
  SmallVector<MeshAttr> meshCandidates();
  /// Applies `choice` to the module and prints the decision.
  void commit(const Choice &choice);
  FailureOr<Trial> compile(const Rung &rung);
  void apply(ModuleOp module, const Rung &rung);
  void printDecision(const Rung &rung, const Trial &chosen,
                     const Trial &baseline);
  SmallVector<StringAttr> units; ///< in forward order
  Hardware hw;
  /// The network trials are priced on (checkOptions: --fsdp-simulate's).
  NetworkTopology net;
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
                          b.getBoolAttr(k.reshardAfterForward)),
           b.getNamedAttr("overlap_all_to_all",
                          b.getBoolAttr(k.overlapAllToAll)),
           b.getNamedAttr("shard_copy", b.getBoolAttr(k.shardCopy))}));
}

std::string describe(const Knobs &k) {
  return llvm::formatv("forward-prefetch={0} backward-prefetch={1} "
                       "bucket-bytes={2} reshard-after-forward={3}{4}{5}",
                       k.forwardPrefetch, k.backwardPrefetch, k.bucketBytes,
                       k.reshardAfterForward ? "true" : "false",
                       k.overlapAllToAll ? "" : " overlap-all-to-all=false",
                       k.shardCopy ? "" : " shard-copy=false")
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
  FsdpExpertParallelPassOptions experts;
  experts.capacityFactor = moeCapacityFactor;
  experts.overflow = moeOverflow;
  pm.addPass(createFsdpExpertParallelPass(experts));
  pm.addPass(createFsdpAutodiffPass());
  pm.addPass(createFsdpRematPass());
  pm.addPass(createFsdpShardPass());
  FsdpMixedPrecisionPassOptions precision;
  precision.paramDtype = paramDtype;
  precision.reduceDtype = reduceDtype;
  precision.shardCopy = rung.knobs.shardCopy;
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
  schedule.overlapAllToAll = rung.knobs.overlapAllToAll;
  pm.addPass(createFsdpSchedulePass(schedule));
  if (failed(pm.run(*copy)))
    return failure();
  func::FuncOp step = getTrainStep(*copy);
  FailureOr<MemoryProfile> profile =
      computeMemoryProfile(*copy, step, "fsdp-fit-memory");
  StepSimulator sim(hw, net);
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

/// The machine the step times are for: the preset, and the nodes when the
/// network has two levels.
std::string FsdpFitMemoryPass::onNetwork() const {
  if (!net.isTwoLevel())
    return hardware;
  int64_t nodes = (net.worldSize + net.ranksPerNode - 1) / net.ranksPerNode;
  return llvm::formatv("{0}, {1} node{2} of {3}, NICs shared by {4}",
                       hardware.getValue(), nodes, nodes == 1 ? "" : "s",
                       net.ranksPerNode,
                       net.nicShare == NicShare::Group ? "groups" : "ranks")
      .str();
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
                     onNetwork().c_str(),
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
  if (mesh != "" && mesh != "auto")
    return emitError(loc) << "fsdp-fit-memory: mesh must be auto (choose "
                             "it) or left out (the module's), got '"
                          << mesh << "'";
  if (experts != "" && experts != "auto")
    return emitError(loc) << "fsdp-fit-memory: experts must be auto (choose "
                             "the expert axis) or left out (the module's), "
                             "got '"
                          << experts << "'";
  if ((mesh == "auto" || experts == "auto") && !getMesh(getOperation()))
    return emitError(loc) << "fsdp-fit-memory: mesh=auto needs a world "
                             "size: run --fsdp-mesh first (its ranks are "
                             "the world the mesh is chosen for)";
  // Checked here, once: each trial compile would refuse it again.
  if (float norm = float(gradClip);
      gradClip != 0.0 && (!(norm > 0.0f) || std::isinf(norm))) {
    char text[32];
    std::snprintf(text, sizeof(text), "%g", double(gradClip));
    return emitError(loc) << "fsdp-fit-memory: grad-clip must be 0 (no "
                             "clipping) or a positive, finite f32, got "
                          << text;
  }
  return selectNetwork();
}

// As --fsdp-simulate chooses its network, over every rank of the mesh.
LogicalResult FsdpFitMemoryPass::selectNetwork() {
  Location loc = getOperation().getLoc();
  int64_t world = getNumRanks(getOperation());
  if (ranksPerNode < 0)
    return emitError(loc) << "fsdp-fit-memory: ranks-per-node must be at "
                             "least 0, got "
                          << int64_t(ranksPerNode);
  if (ranksPerNode == 0) {
    // Against the defaults, not hasValue(): the pipeline hands over a
    // whole options struct, every option set.
    FsdpFitMemoryPassOptions d;
    if (intraGBps != d.intraGBps || intraLatencyUs != d.intraLatencyUs ||
        nicGBps != d.nicGBps || nicsPerNode != d.nicsPerNode ||
        interLatencyUs != d.interLatencyUs || nicShare != d.nicShare)
      return emitError(loc) << "fsdp-fit-memory: intra-gbps, "
                               "intra-latency-us, nic-gbps, nics-per-node, "
                               "inter-latency-us and nic-share describe a "
                               "two-level network: give ranks-per-node too";
    net = singleLevelNetwork(hw, world);
    return success();
  }
  std::string error;
  net = makeTwoLevelNetwork({ranksPerNode, intraGBps, intraLatencyUs, nicGBps,
                             nicsPerNode, interLatencyUs, nicShare},
                            world, error);
  if (!error.empty())
    return emitError(loc) << "fsdp-fit-memory: " << error;
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
/// the backward, and (under expert parallelism, where `overlap` allows
/// it) the exchanges overlapped.
static SmallVector<Knobs> fasterVariants(const Knobs &knobs, bool overlap) {
  SmallVector<Knobs> out;
  if (overlap) {
    Knobs k = knobs;
    k.overlapAllToAll = true;
    out.push_back(k);
  }
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
  MeshAttr mesh = getMesh(getOperation());
  bool experts = mesh && mesh.getExpertSize() > 1;
  for (const Knobs &k : fasterVariants(knobs, experts && overlapAllToAll)) {
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

FailureOr<std::optional<Choice>> FsdpFitMemoryPass::search(Rung &smallestRung,
                                                           Trial &smallest) {
  int64_t last = 1 + 2 * int64_t(units.size());
  Knobs given{forwardPrefetch,     backwardPrefetch, bucketBytes,
              reshardAfterForward, overlapAllToAll,  shardCopy};
  // The leanest schedule: no prefetch, no buckets, parameters freed after
  // each forward region, expert parallelism's exchanges in place, and no
  // shard copies under mixed precision (the simulator does not price the
  // gathers they spare, so they stay as given unless nothing else fits).
  MeshAttr mesh = getMesh(getOperation());
  Knobs lean;
  lean.overlapAllToAll =
      mesh && mesh.getExpertSize() > 1 ? false : overlapAllToAll;
  Type requested = getRequestedParamDtype(getOperation());
  bool narrower = paramDtype.empty() ? requested && !requested.isF32()
                                     : paramDtype != "f32";
  lean.shardCopy = shardCopy && !narrower;
  Knobs knobs = given;
  FailureOr<Trial *> baseline = trialAt(0, given), least = trialAt(last, given);
  if (failed(baseline) || failed(least))
    return failure();
  if ((*least)->total() > memoryBudget) {
    knobs = lean;
    least = trialAt(last, lean);
    if (failed(least))
      return failure();
    if ((*least)->total() > memoryBudget) {
      smallestRung = rungAt(last, lean);
      smallest = **least;
      return std::optional<Choice>();
    }
  }
  FailureOr<int64_t> rung = firstFit(knobs);
  if (failed(rung))
    return failure();
  FailureOr<Knobs> fastest = fastestKnobs(*rung, knobs);
  if (failed(fastest))
    return failure();
  FailureOr<Trial *> chosen = trialAt(*rung, *fastest);
  if (failed(chosen))
    return failure();
  return std::optional<Choice>(
      Choice{rungAt(*rung, *fastest), **chosen, **baseline});
}

void FsdpFitMemoryPass::commit(const Choice &choice) {
  apply(getOperation(), choice.rung);
  setScheduleChoice(getOperation(), choice.rung.knobs);
  printDecision(choice.rung, choice.chosen, choice.baseline);
}

/// The shard sizes mesh=auto tries for `world` ranks, largest first (full
/// sharding first): every divisor of the world, and on a two-level network
/// only those that divide a node's ranks or are a multiple of them (shard
/// groups that fill whole nodes or sit inside one).
static SmallVector<int64_t> meshShardSizes(int64_t world,
                                           int64_t ranksPerNode) {
  SmallVector<int64_t> sizes;
  for (int64_t s = world; s >= 1; --s) {
    if (world % s != 0)
      continue;
    if (ranksPerNode > 0 && ranksPerNode % s != 0 && s % ranksPerNode != 0)
      continue;
    sizes.push_back(s);
  }
  return sizes;
}

/// The mesh replicate=R x shard=S (expert=G) as --fsdp-mesh writes it (an
/// axis of size 1 but the shard axis left out).
static MeshAttr makeMesh(MLIRContext *context, int64_t replicate, int64_t shard,
                         int64_t experts) {
  SmallVector<MeshAxisAttr> axes;
  if (replicate > 1)
    axes.push_back(
        MeshAxisAttr::get(context, MeshAttr::kReplicateAxis, replicate));
  axes.push_back(MeshAxisAttr::get(context, MeshAttr::kShardAxis, shard));
  if (experts > 1)
    axes.push_back(MeshAxisAttr::get(context, MeshAttr::kExpertAxis, experts));
  return MeshAttr::get(context, ArrayRef<MeshAxisAttr>(axes));
}

/// The expert group sizes experts=auto tries at shard size `shard`: every
/// G dividing it and each mixture-of-experts layer's expert count,
/// smallest first (1, no expert parallelism, always).
static SmallVector<int64_t> expertGroupSizes(ModuleOp module, int64_t shard) {
  SmallVector<int64_t> counts;
  module.walk([&](MoeSortOp sort) { counts.push_back(sort.getNumExperts()); });
  SmallVector<int64_t> sizes;
  for (int64_t g = 1; g <= shard; ++g)
    if (shard % g == 0 &&
        llvm::all_of(counts, [&](int64_t e) { return e % g == 0; }) &&
        (g == 1 || !counts.empty()))
      sizes.push_back(g);
  return sizes;
}

/// "1x16", or "1x16 expert=8" with expert parallelism.
static std::string meshText(MeshAttr mesh) {
  std::string text =
      llvm::formatv("{0}x{1}", mesh.getReplicateSize(), mesh.getShardSize())
          .str();
  if (mesh.getExpertSize() > 1)
    text += llvm::formatv(" expert={0}", mesh.getExpertSize()).str();
  return text;
}

/// The meshes the search runs at: mesh=auto's every RxS of the world (or
/// the module's), each with experts=auto's every G (or the module's).
SmallVector<MeshAttr> FsdpFitMemoryPass::meshCandidates() {
  ModuleOp module = getOperation();
  MeshAttr given = getMesh(module);
  int64_t world = getNumRanks(module);
  SmallVector<int64_t> shards =
      mesh == "auto" ? meshShardSizes(world, net.ranksPerNode)
                     : SmallVector<int64_t>{given.getShardSize()};
  SmallVector<MeshAttr> meshes;
  for (int64_t s : shards) {
    SmallVector<int64_t> groups =
        experts == "auto" ? expertGroupSizes(module, s)
                          : SmallVector<int64_t>{given.getExpertSize()};
    for (int64_t g : groups)
      if (s % g == 0)
        meshes.push_back(makeMesh(&getContext(), world / s, s, g));
  }
  return meshes;
}

// Every candidate mesh runs the whole search (the trials are the mesh's
// own: the cache is emptied between meshes). The fastest simulated step
// that fits wins; equal steps go to the lower peak, then to the larger
// shard group (tried first: less replicated state).
LogicalResult FsdpFitMemoryPass::chooseMesh() {
  ModuleOp module = getOperation();
  int64_t world = getNumRanks(module);
  std::optional<std::pair<MeshAttr, Choice>> best;
  std::optional<std::pair<MeshAttr, int64_t>> least; // mesh, peak
  std::string tried;
  for (MeshAttr candidate : meshCandidates()) {
    module->setAttr(kMeshAttrName, candidate);
    trials.clear();
    Rung smallestRung;
    Trial smallest;
    FailureOr<std::optional<Choice>> choice = search(smallestRung, smallest);
    if (failed(choice))
      return failure();
    tried += " " + meshText(candidate);
    if (!*choice) {
      tried += " (does not fit)";
      if (!least || smallest.total() < least->second)
        least.emplace(candidate, smallest.total());
      continue;
    }
    const Trial &t = (*choice)->chosen;
    tried += llvm::formatv(" {0:F3} ms", t.stepTime * 1e3).str();
    if (!best || t.stepTime < best->second.chosen.stepTime ||
        (t.stepTime == best->second.chosen.stepTime &&
         t.total() < best->second.chosen.total()))
      best.emplace(candidate, **choice);
  }
  std::string what = mesh == "auto" && experts == "auto"
                         ? "mesh=auto experts=auto"
                     : mesh == "auto" ? "mesh=auto"
                                      : "experts=auto";
  if (!best) {
    return emitError(module.getLoc()) << llvm::formatv(
               "fsdp-fit-memory: {0}: no mesh of {1} ranks fits {2} "
               "bytes per rank: the smallest peak reachable is {3} bytes, "
               "at mesh {4} (tried:{5})",
               what, world, memoryBudget.getValue().bytes, least->second,
               meshText(least->first), tried);
  }
  MeshAttr chosen = best->first;
  module->setAttr(kMeshAttrName, chosen);
  commit(best->second);
  llvm::errs() << llvm::formatv(
      "  mesh: replicate={0} shard={1}{2} ({3}, "
      "of{4})\n",
      chosen.getReplicateSize(), chosen.getShardSize(),
      chosen.getExpertSize() > 1
          ? llvm::formatv(" expert={0}", chosen.getExpertSize()).str()
          : std::string(),
      what, tried);
  return success();
}

void FsdpFitMemoryPass::runOnOperation() {
  if (memoryBudget <= 0) {
    if (experts == "auto") {
      emitError(getOperation().getLoc())
          << "fsdp-fit-memory: experts=auto picks the expert axis in the "
             "budget's search: give memory-budget too";
      return signalPassFailure();
    }
    if (mesh == "auto") {
      emitError(getOperation().getLoc())
          << "fsdp-fit-memory: mesh=auto picks the mesh in the budget's "
             "search: give memory-budget too";
      signalPassFailure();
    }
    return;
  }
  if (failed(checkOptions()))
    return signalPassFailure();
  units = unitsInForwardOrder(getOperation());
  if (mesh == "auto" || experts == "auto") {
    if (failed(chooseMesh()))
      signalPassFailure();
    return;
  }
  Rung smallestRung;
  Trial smallest;
  FailureOr<std::optional<Choice>> choice = search(smallestRung, smallest);
  if (failed(choice))
    return signalPassFailure();
  if (!*choice) {
    reportSmallest(smallestRung, smallest);
    return signalPassFailure();
  }
  commit(**choice);
}
