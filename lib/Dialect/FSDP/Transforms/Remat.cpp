//===- Remat.cpp - recompute a unit's forward in its backward ------------===//
//
// After autodiff a unit's forward region yields every activation its
// backward reads, and those stay live from the forward to the backward:
// the activations are the peak. Here, per unit and by policy, the backward
// recomputes some of them instead, from what the policy keeps. The move is
// made on the flat step (UnitRegions.h inlines the regions, remembering
// each op's unit and phase): a saved value's defining ops are cloned, tagged
// as the unit's backward, right before the backward op that first reads
// it, and outlining the regions again makes the forward region yield less
// and the backward region take the kept values instead. The clones are the
// same kernels on the same inputs (the unit's parameters are gathered for
// its backward anyway), so the step computes the same bits.
//
//===----------------------------------------------------------------------===//

#include "fsdp/Dialect/FSDP/Analysis/UnitRegions.h"
#include "fsdp/Dialect/FSDP/Transforms/Passes.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/IRMapping.h"
#include "llvm/Support/GlobPattern.h"

namespace mlir::fsdp {
#define GEN_PASS_DEF_FSDPREMATPASS
#include "fsdp/Dialect/FSDP/Transforms/Passes.h.inc"
} // namespace mlir::fsdp

using namespace mlir;
using namespace mlir::fsdp;

namespace {
enum class Policy { None, Full, Selective };

std::optional<Policy> parsePolicy(StringRef text) {
  return llvm::StringSwitch<std::optional<Policy>>(text)
      .Case("none", Policy::None)
      .Case("full", Policy::Full)
      .Case("selective", Policy::Selective)
      .Default(std::nullopt);
}

/// The policy of each unit: the unit's own fsdp.remat (set by
/// --fsdp-fit-memory), else the last override whose pattern matches the
/// unit's name, else the default.
struct PolicyTable {
  Policy fallback = Policy::None;
  SmallVector<std::pair<llvm::GlobPattern, Policy>> overrides;
  llvm::StringMap<Policy> chosen;
  Policy lookup(StringRef unit) const {
    auto it = chosen.find(unit);
    if (it != chosen.end())
      return it->second;
    Policy policy = fallback;
    for (const auto &[pattern, p] : overrides)
      if (pattern.match(unit))
        policy = p;
    return policy;
  }
};

struct FsdpRematPass
    : public mlir::fsdp::impl::FsdpRematPassBase<FsdpRematPass> {
  using FsdpRematPassBase::FsdpRematPassBase;
  void runOnOperation() override;
  FailureOr<PolicyTable> parseOptions();
};

/// Recomputes saved activations of one unit's backward run: `clones` maps a
/// forward value to its recomputed copy in this run.
class RunRecompute {
public:
  RunRecompute(UnitTagMap &tags, UnitTag backward, Policy policy)
      : tags(tags), backward(backward), policy(policy) {}

  /// The value `op` should read in place of `v`: its recomputed copy,
  /// cloned before `op`, when the policy recomputes it; `v` otherwise.
  Value rewrite(Value v, Operation *op) {
    if (!recomputes(v))
      return v;
    if (Value done = clones.lookupOrNull(v))
      return done;
    Operation *def = v.getDefiningOp();
    for (Value operand : def->getOperands())
      (void)rewrite(operand, op);
    OpBuilder builder(op);
    Operation *clone = builder.clone(*def, clones);
    tags[clone] = backward;
    return clones.lookup(v);
  }

private:
  /// A value of this unit's forward that the policy does not keep: full
  /// keeps only the unit's inputs (values from outside its forward); both
  /// keep what loads and constants give (each region loads its own).
  /// Selective keeps what GEMMs produce (their outputs, attention's output
  /// and statistics) and recomputes the rest.
  bool recomputes(Value v) const {
    Operation *def = v.getDefiningOp();
    // Only what can run twice: a pure op (not a collective, not an RNG).
    if (!def || isRematerializable(def) || !isPure(def))
      return false;
    auto it = tags.find(def);
    if (it == tags.end() || it->second.unit != backward.unit ||
        it->second.phase != Phase::Forward)
      return false;
    if (policy == Policy::Selective)
      if (auto kernel = llvm::dyn_cast<KernelOpInterface>(def))
        return kernel.getFlops() == 0.0;
    return true;
  }

  UnitTagMap &tags;
  UnitTag backward;
  Policy policy;
  IRMapping clones;
};
} // namespace

FailureOr<PolicyTable> FsdpRematPass::parseOptions() {
  PolicyTable table;
  std::optional<Policy> fallback = parsePolicy(policy);
  if (!fallback) {
    getOperation().emitError()
        << "fsdp-remat: policy must be none, full or selective, got '" << policy
        << "'";
    return failure();
  }
  table.fallback = *fallback;
  for (const std::string &entry : overrides) {
    auto [pattern, name] = StringRef(entry).rsplit('=');
    std::optional<Policy> p = parsePolicy(name);
    llvm::Expected<llvm::GlobPattern> glob = llvm::GlobPattern::create(pattern);
    if (!glob || !p || pattern.empty()) {
      if (!glob)
        llvm::consumeError(glob.takeError());
      getOperation().emitError() << "fsdp-remat: override '" << entry
                                 << "' is not UNIT-PATTERN=none|full|selective";
      return failure();
    }
    table.overrides.push_back({std::move(*glob), *p});
  }
  for (UnitOp unit : getOperation().getOps<UnitOp>()) {
    auto attr = unit->getAttrOfType<StringAttr>(kRematAttrName);
    if (!attr)
      continue;
    std::optional<Policy> p = parsePolicy(attr.getValue());
    if (!p) {
      unit.emitError() << "fsdp-remat: " << kRematAttrName
                       << " must be none, full or selective, got " << attr;
      return failure();
    }
    table.chosen[unit.getSymName()] = *p;
  }
  return table;
}

void FsdpRematPass::runOnOperation() {
  FailureOr<PolicyTable> table = parseOptions();
  if (failed(table))
    return signalPassFailure();
  auto step = getOperation().lookupSymbol<func::FuncOp>("train_step");
  if (!step || step.isExternal()) {
    getOperation().emitError()
        << "fsdp-remat: no @train_step (run --fsdp-autodiff first)";
    return signalPassFailure();
  }
  Block &block = step.getBody().front();
  UnitTagMap tags;
  inlineComputeRegions(block, tags);

  // Runs of backward ops of one unit, in order; loads and constants do not
  // end a run (outlining clones them into the regions that use them).
  std::optional<RunRecompute> run;
  UnitTag current;
  SmallVector<Operation *> ops;
  for (Operation &op : block.without_terminator())
    ops.push_back(&op);
  for (Operation *op : ops) {
    if (isRematerializable(op))
      continue;
    auto it = tags.find(op);
    bool isBackward = it != tags.end() && it->second.phase == Phase::Backward;
    if (!isBackward) {
      run.reset();
      continue;
    }
    if (!run || !(it->second == current)) {
      current = it->second;
      Policy p = table->lookup(current.unit.getValue());
      if (p == Policy::None) {
        run.reset();
        continue;
      }
      run.emplace(tags, current, p);
    }
    for (OpOperand &operand : op->getOpOperands())
      operand.set(run->rewrite(operand.get(), op));
  }
  // A forward op that computed only what the backward now recomputes.
  for (Operation &op : llvm::make_early_inc_range(llvm::reverse(block)))
    if (op.use_empty() && isPure(&op) && !op.hasTrait<OpTrait::IsTerminator>())
      op.erase();
  outlineComputeRegions(block, tags);
}
