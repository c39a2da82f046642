//===- MemoryReport.cpp - what every rank holds, from the sharded IR ------===//
//
// Reads only types and program order; never materialises a tensor, so it
// reports a 175B-parameter model on a laptop. Aliasing follows the IR:
// region arguments are their operands, region results what the region
// yields, views are the gathered flat parameter, and the gradients a pack
// assembles are written in place into the unit's full-size gradient.
//
//===----------------------------------------------------------------------===//

#include "fsdp/Dialect/FSDP/Transforms/MemoryProfile.h"
#include "fsdp/Dialect/FSDP/Transforms/Passes.h"

#include "llvm/ADT/MapVector.h"
#include "llvm/Support/CheckedArithmetic.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/raw_ostream.h"

namespace mlir::fsdp {
#define GEN_PASS_DEF_FSDPMEMORYREPORTPASS
#include "fsdp/Dialect/FSDP/Transforms/Passes.h.inc"
} // namespace mlir::fsdp

using namespace mlir;
using namespace mlir::fsdp;

namespace {
struct Storage {
  int64_t bytes = 0, first = -1, last = -1;
  MemoryClass kind = Activation;
};

struct FsdpMemoryReportPass
    : public fsdp::impl::FsdpMemoryReportPassBase<FsdpMemoryReportPass> {
  void runOnOperation() override;
};
} // namespace

FailureOr<MemoryProfile> mlir::fsdp::computeMemoryProfile(ModuleOp module,
                                                          func::FuncOp step,
                                                          StringRef passName) {
  MemoryProfile profile;
  int64_t N = getShardSize(module);
  // Sums and products of sizes, checked: the first overflow is reported,
  // naming what was being computed, and the profile fails.
  bool overflowed = false;
  auto fits = [&](std::optional<int64_t> result, StringRef what) -> int64_t {
    if (result || overflowed)
      return result.value_or(0);
    overflowed = true;
    emitError(module.getLoc())
        << passName << ": " << what << " would take more than "
        << std::numeric_limits<int64_t>::max()
        << " bytes, the most the compiler can count (int64)";
    return 0;
  };
  auto add = [&](int64_t &sum, int64_t value, StringRef what) {
    sum = fits(llvm::checkedAdd(sum, value), what);
  };

  // Shards: every rank holds ceil(P_u / N) elements of each unit's flat
  // parameter, gradient and two AdamW moments (the last shard of a unit
  // may leave one element unused).
  SymbolTable symbols(module);
  int64_t P = 0, units = 0, shardBytes = 0, elementBytes = 0;
  int64_t largestUnit = 0, smallestUnit = INT64_MAX;
  StringRef largestName;
  for (UnitOp unit : module.getOps<UnitOp>()) {
    int64_t size = 0;
    for (Attribute ref : unit.getParams()) {
      auto param = symbols.lookup<ParamOp>(
          llvm::cast<FlatSymbolRefAttr>(ref).getValue());
      size += param.getNumElements(); // bounded by the unit's verifier
      elementBytes =
          getElementSizeInBytes(param.getTensorType().getElementType());
    }
    add(P, size, "the parameters");
    ++units;
    add(shardBytes, getMaxShardSize(size, N) * elementBytes,
        "a rank's parameter shards");
    if (size > largestUnit) {
      largestUnit = size;
      largestName = unit.getSymName();
    }
    smallestUnit = std::min(smallestUnit, size);
  }
  // Parameters, gradients and two AdamW moments per rank; the report also
  // prints them over all ranks and the DDP baseline, all of it on every
  // rank.
  int64_t steady =
      fits(llvm::checkedMul(int64_t(4), shardBytes), "a rank's training state");
  fits(llvm::checkedMul(steady, N), "the training state over all ranks");
  fits(llvm::checkedMul(P, 4 * elementBytes),
       "the training state of one rank holding everything (DDP)");

  // Program order, and the storage each value lives in.
  llvm::DenseMap<Operation *, int64_t> index;
  SmallVector<Operation *> order;
  step.walk<WalkOrder::PreOrder>([&](Operation *op) {
    if (op == step)
      return;
    index[op] = order.size();
    order.push_back(op);
  });
  llvm::DenseMap<Value, Value> packOf;
  std::function<Value(Value)> root = [&](Value v) -> Value {
    if (auto arg = llvm::dyn_cast<BlockArgument>(v))
      if (auto compute =
              llvm::dyn_cast<ComputeOp>(arg.getOwner()->getParentOp()))
        return root(compute.getInputs()[arg.getArgNumber()]);
    if (auto compute = v.getDefiningOp<ComputeOp>()) {
      auto yield = llvm::cast<YieldOp>(compute.getBodyBlock().getTerminator());
      return root(yield.getValues()[llvm::cast<OpResult>(v).getResultNumber()]);
    }
    if (auto view = v.getDefiningOp<ViewOp>())
      return root(view.getSource());
    auto it = packOf.find(v);
    return it == packOf.end() ? v : it->second;
  };
  for (Operation *op : order)
    if (auto pack = llvm::dyn_cast<PackOp>(op))
      for (Value operand : pack.getValues())
        packOf[root(operand)] = pack.getResult();

  llvm::MapVector<Value, Storage> storage;
  auto touch = [&](Value v, int64_t at) {
    if (!llvm::isa<RankedTensorType>(v.getType()))
      return;
    Value r = root(v);
    Storage &s = storage[r];
    if (s.first < 0) {
      s.bytes = getSizeInBytes(r.getType());
      Operation *def = r.getDefiningOp();
      s.kind = getGatheredTensor(def) == r          ? Gathered
               : llvm::isa_and_nonnull<PackOp>(def) ? FullGrad
                                                    : Activation;
      s.first = at;
    }
    s.first = std::min(s.first, at);
    s.last = std::max(s.last, at);
  };
  for (BlockArgument arg : step.getArguments())
    touch(arg, 0);
  for (auto [i, op] : llvm::enumerate(order)) {
    for (Value operand : op->getOperands())
      touch(operand, i);
    // A region's results are the values it yields, defined inside it.
    if (!llvm::isa<ComputeOp>(op))
      for (Value result : op->getResults())
        touch(result, i);
  }
  // Gradient shards are part of the steady state, not a transient.
  for (Operation &op : step.getBody().front())
    if (Value shard = getScatteredShard(&op))
      storage.erase(shard);

  // Live bytes by a sweep over lifetime starts and ends. The running sums
  // are the live bytes at each point; the deltas stay below them.
  SmallVector<MemoryPoint> live(order.size() + 1);
  for (auto &[value, s] : storage) {
    add(live[s.first].bytes[s.kind], s.bytes, "the live bytes of the step");
    live[s.last + 1].bytes[s.kind] -= s.bytes;
  }
  live.pop_back();
  for (size_t i = 0; i < live.size(); ++i) {
    if (i > 0)
      for (int k = 0; k < NumMemoryClasses; ++k)
        add(live[i].bytes[k], live[i - 1].bytes[k],
            "the live bytes of the step");
    // The steady state and all classes together, over all ranks (the
    // report's total peak), must fit too.
    int64_t total = steady;
    for (int k = 0; k < NumMemoryClasses; ++k)
      add(total, live[i].bytes[k], "the live bytes of the step");
    fits(llvm::checkedMul(total, N),
         "the live bytes of the step over all ranks");
  }
  if (overflowed)
    return failure();

  // The forward ends where the loss is computed.
  Value loss = step.getBody().front().getTerminator()->getOperand(0);
  int64_t forwardEnd = index.lookup(loss.getDefiningOp());
  auto peakIn = [&](int64_t begin, int64_t end) {
    int64_t best = begin;
    for (int64_t i = begin; i < end; ++i)
      if (live[i].total() > live[best].total())
        best = i;
    return best;
  };
  int64_t forwardPeak = peakIn(0, forwardEnd + 1);
  int64_t backwardPeak = peakIn(forwardEnd + 1, int64_t(order.size()));
  int64_t overall = live[forwardPeak].total() >= live[backwardPeak].total()
                        ? forwardPeak
                        : backwardPeak;

  profile.worldSize = N;
  profile.params = P;
  profile.units = units;
  profile.elementBytes = elementBytes;
  profile.shardBytes = shardBytes;
  profile.steady = steady;
  profile.largestUnit = largestUnit;
  profile.smallestUnit = smallestUnit;
  profile.largestName = largestName.str();
  profile.order = std::move(order);
  profile.live = std::move(live);
  profile.forwardPeak = forwardPeak;
  profile.backwardPeak = backwardPeak;
  profile.overall = overall;
  return profile;
}

void FsdpMemoryReportPass::runOnOperation() {
  ModuleOp module = getOperation();
  markAllAnalysesPreserved();
  func::FuncOp step = getTrainStep(module);
  if (!step || !isShardedStep(step.getBody().front())) {
    emitError(module.getLoc())
        << "fsdp-memory-report: no sharded @train_step (run "
           "--fsdp-shard first)";
    return signalPassFailure();
  }
  FailureOr<MemoryProfile> computed =
      computeMemoryProfile(module, step, "fsdp-memory-report");
  if (failed(computed))
    return signalPassFailure();
  MemoryProfile &profile = *computed;
  int64_t N = profile.worldSize, P = profile.params, units = profile.units,
          elementBytes = profile.elementBytes, shardBytes = profile.shardBytes,
          steady = profile.steady, largestUnit = profile.largestUnit,
          smallestUnit = profile.smallestUnit,
          forwardPeak = profile.forwardPeak,
          backwardPeak = profile.backwardPeak, overall = profile.overall;
  StringRef largestName = profile.largestName;
  const SmallVector<Operation *> &order = profile.order;
  const SmallVector<MemoryPoint> &live = profile.live;
  llvm::raw_ostream &os = llvm::errs();
  auto gb = [](double bytes) { return bytes / 1e9; };
  auto row = [&](StringRef name, int64_t bytes, const Twine &note) {
    os << llvm::format("  %-24s %18lld bytes %11.3f GB", name.str().c_str(),
                       (long long)bytes, gb(bytes))
       << (note.isTriviallyEmpty() ? "" : "   ") << note << "\n";
  };
  auto formula = [&](StringRef text, double bytes) {
    std::string s;
    llvm::raw_string_ostream(s)
        << text << " = " << llvm::format("%.3f GB", gb(bytes));
    return s;
  };
  double eb = double(elementBytes);
  os << "fsdp-memory-report: world size " << N << ", " << units << " units, "
     << P << " parameters (P), " << elementBytes
     << " bytes per element; per rank:\n";
  row("parameters (shard)", shardBytes, formula("4P/N", eb * P / N));
  row("gradients (shard)", shardBytes, formula("4P/N", eb * P / N));
  row("optimizer states", 2 * shardBytes, formula("8P/N", 2 * eb * P / N));
  row("steady state", steady, formula("16P/N", 4 * eb * P / N));
  row("largest gathered unit", largestUnit * elementBytes,
      "@" + largestName + formula(", 4P/M", eb * P / units));

  auto describe = [&](StringRef name, int64_t at) {
    const MemoryPoint &p = live[at];
    Operation *op = order[at];
    std::string where;
    llvm::raw_string_ostream w(where);
    w << "at #" << at << " " << op->getName().getStringRef();
    if (auto compute = op->getParentOfType<ComputeOp>())
      w << " in @" << compute.getUnit() << " "
        << stringifyPhase(compute.getPhase());
    row(name, steady + p.total(), where);
    row("  steady state", steady, "");
    row("  gathered parameters", p.bytes[Gathered], "");
    row("  full-size gradients", p.bytes[FullGrad], "");
    row("  activations", p.bytes[Activation], "");
  };
  describe("forward peak", forwardPeak);
  if (largestUnit == smallestUnit) {
    // M equal units: the seed's forward-peak formula, checked.
    double seed = 4 * eb * P / N + eb * P / units +
                  double(live[forwardPeak].bytes[Activation]);
    bool matches = std::abs(seed - double(steady + live[forwardPeak].total())) <
                   4 * eb * units;
    os << "    seed: 16P/N + 4P/M + activations = "
       << llvm::format("%.0f bytes (%s)\n", seed,
                       matches ? "matches" : "differs");
  }
  if (backwardPeak < int64_t(order.size()))
    describe("backward peak", backwardPeak);
  row("peak", steady + live[overall].total(),
      overall == forwardPeak ? "in the forward" : "in the backward");
  row("DDP baseline", 4 * elementBytes * P, "16P: every rank holds everything");
  os << "total over " << N << " ranks:\n";
  row("steady state", N * steady, formula("16P", 4 * eb * P));
  row("peak", N * (steady + live[overall].total()), "");
  ShardRange first = getShardRange(largestUnit, 0, N),
             lastRank = getShardRange(largestUnit, N - 1, N);
  os << "  shards of @" << largestName << ": rank 0 owns elements "
     << first.begin << " .. " << first.end - 1 << ", rank " << N - 1 << " owns "
     << lastRank.begin << " .. " << lastRank.end - 1
     << " (at most one element apart)\n";
}
