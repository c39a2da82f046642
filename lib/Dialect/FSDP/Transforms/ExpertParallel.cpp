//===- ExpertParallel.cpp - split experts over the mesh's expert groups ---===//
//
// Per mixture-of-experts layer: find the experts' ops (the grouped linears
// that read a sort's offsets and what runs on their rows until the
// combine), narrow their stacked weights to this rank's slice in a unit of
// their own, and put the exchange around them: counts, rows out, regroup,
// the experts, regroup back, rows home. The forward keeps its value, so the
// backward (the reverse exchanges) follows from autodiff.
//
//===----------------------------------------------------------------------===//

#include "fsdp/Dialect/FSDP/Analysis/UnitRegions.h"
#include "fsdp/Dialect/FSDP/Transforms/Passes.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/Verifier.h"
#include "llvm/ADT/SetVector.h"

#include <cmath>

namespace mlir::fsdp {
#define GEN_PASS_DEF_FSDPEXPERTPARALLELPASS
#include "fsdp/Dialect/FSDP/Transforms/Passes.h.inc"
} // namespace mlir::fsdp

using namespace mlir;
using namespace mlir::fsdp;

namespace {
struct FsdpExpertParallelPass
    : public mlir::fsdp::impl::FsdpExpertParallelPassBase<
          FsdpExpertParallelPass> {
  using FsdpExpertParallelPassBase::FsdpExpertParallelPassBase;
  void runOnOperation() override;
};

/// One layer's experts: the ops between the permuted rows and the combine.
struct ExpertOps {
  MoeSortOp sort;
  llvm::SetVector<Operation *> ops; ///< in block order once sorted
  Value rows;                       ///< the permuted rows they read
  Value out;                        ///< the rows the combine reads
  MoeCombineOp combine;
  SmallVector<LoadOp> weights; ///< the stacked weights' loads
};
} // namespace

/// The experts' ops of `sort`'s layer: every op reached from the grouped
/// linears that read its offsets, up to the combine. Fails, naming the op,
/// on a shape the exchange cannot carry.
static FailureOr<ExpertOps> findExperts(MoeSortOp sort) {
  ExpertOps found;
  found.sort = sort;
  SmallVector<Operation *> work;
  for (Operation *user : sort.getOffsets().getUsers()) {
    if (!llvm::isa<MoeGroupedLinearOp>(user))
      return user->emitOpError()
             << "reads a sort's offsets; --fsdp-expert-parallel knows only "
                "grouped linears there";
    work.push_back(user);
  }
  if (work.empty())
    return sort.emitOpError() << "has offsets no grouped linear reads";
  while (!work.empty()) {
    Operation *op = work.pop_back_val();
    if (!found.ops.insert(op))
      continue;
    for (Operation *user : op->getUsers())
      if (!llvm::isa<MoeCombineOp>(user))
        work.push_back(user);
  }
  Block *block = sort->getBlock();
  for (Operation *op : found.ops)
    if (op->getBlock() != block)
      return op->emitOpError() << "is in another block than its layer's sort";
  SmallVector<Operation *> ordered(found.ops.begin(), found.ops.end());
  llvm::sort(ordered,
             [](Operation *a, Operation *b) { return a->isBeforeInBlock(b); });
  found.ops = llvm::SetVector<Operation *>(ordered.begin(), ordered.end());
  return found;
}

/// Fills `experts`' entry (rows), exit (out, combine) and weights, and
/// checks that every value they make has the pairs' rows first.
static LogicalResult checkBoundary(ExpertOps &experts, int64_t pairs) {
  for (Operation *op : experts.ops) {
    for (Value operand : op->getOperands()) {
      Operation *def = operand.getDefiningOp();
      if (def && experts.ops.contains(def))
        continue;
      if (operand == experts.sort.getOffsets())
        continue;
      auto linear = llvm::dyn_cast<MoeGroupedLinearOp>(op);
      if (linear && operand == linear.getWeight()) {
        auto load = operand.getDefiningOp<LoadOp>();
        if (!load)
          return op->emitOpError() << "takes expert weights that are not a "
                                      "parameter's load";
        experts.weights.push_back(load);
        continue;
      }
      if (linear && operand == linear.getInput() &&
          (!experts.rows || experts.rows == operand)) {
        experts.rows = operand;
        continue;
      }
      return op->emitOpError()
             << "reads a value from outside its layer's experts other than "
                "the permuted rows, the offsets and the weights; expert "
                "parallelism cannot send it along";
    }
    for (Value result : op->getResults()) {
      auto type = llvm::dyn_cast<RankedTensorType>(result.getType());
      if (!type || type.getRank() < 1 || type.getDimSize(0) != pairs)
        return op->emitOpError()
               << "makes " << result.getType() << " among a layer's experts, "
               << "whose values have the " << pairs << " pairs' rows first";
      for (OpOperand &use : result.getUses()) {
        if (experts.ops.contains(use.getOwner()))
          continue;
        auto combine = llvm::dyn_cast<MoeCombineOp>(use.getOwner());
        if (!combine || use.get() != combine.getRows() ||
            (experts.out && experts.out != result))
          return use.getOwner()->emitOpError()
                 << "reads the experts' rows; only one fsdp.moe_combine may";
        experts.out = result;
        experts.combine = combine;
      }
    }
  }
  if (!experts.rows || !experts.out)
    return experts.sort.emitOpError()
           << "has experts whose rows come from no permute or reach no "
              "combine";
  return success();
}

/// Narrows a stacked weight's parameter and its loads to `experts` rows.
static LogicalResult narrowWeight(ModuleOp module, LoadOp load,
                                  int64_t numExperts, int64_t experts) {
  auto param = module.lookupSymbol<ParamOp>(load.getParamAttr().getAttr());
  RankedTensorType type = param.getTensorType();
  if (type.getRank() >= 1 && type.getDimSize(0) == experts)
    return success(); // another linear of the layer read it: done
  bool onlyExperts = true;
  module.walk([&](LoadOp other) {
    if (other.getParamAttr() == load.getParamAttr())
      for (Operation *user : other->getUsers())
        onlyExperts &= llvm::isa<MoeGroupedLinearOp>(user);
  });
  if (!onlyExperts)
    return param.emitOpError() << "holds stacked experts but is read by "
                                  "other ops too; expert parallelism splits "
                                  "it";
  if (type.getRank() < 1 || type.getDimSize(0) != numExperts)
    return param.emitOpError() << "is read as " << numExperts
                               << " stacked experts but has type " << type;
  SmallVector<int64_t> shape(type.getShape());
  shape[0] = experts;
  auto narrowed = RankedTensorType::get(shape, type.getElementType());
  param.setTypeAttr(TypeAttr::get(narrowed));
  module.walk([&](LoadOp other) {
    if (other.getParamAttr() == load.getParamAttr())
      other.getResult().setType(narrowed);
  });
  return success();
}

/// Moves `weights`' parameters from `unit` into a new expert-parallel unit
/// right after it, and returns the new unit's name.
static StringAttr splitUnit(ModuleOp module, StringAttr unitName,
                            ArrayRef<LoadOp> weights) {
  auto unit = module.lookupSymbol<UnitOp>(unitName);
  llvm::SetVector<Attribute> moved;
  for (LoadOp load : weights)
    moved.insert(load.getParamAttr());
  SmallVector<Attribute> kept;
  for (Attribute ref : unit.getParams())
    if (!moved.contains(ref))
      kept.push_back(ref);
  OpBuilder builder(module.getContext());
  unit.setParamsAttr(builder.getArrayAttr(kept));
  // After the parent and the expert units already split from it, so that
  // the units stay in layer order.
  Operation *after = unit;
  for (UnitOp other : module.getOps<UnitOp>())
    if (other.getSymName().starts_with(
            (unitName.getValue() + ".experts").str()))
      after = other;
  builder.setInsertionPointAfter(after);
  // One expert unit per layer: a unit that holds several layers (a size
  // policy's) gets `<unit>.experts`, `<unit>.experts.1`, ...
  auto name = builder.getStringAttr(unitName.getValue() + ".experts");
  for (int k = 1; module.lookupSymbol(name); ++k)
    name = builder.getStringAttr(unitName.getValue() + ".experts." + Twine(k));
  auto experts = UnitOp::create(
      builder, unit.getLoc(), name, builder.getArrayAttr(moved.getArrayRef()),
      /*expert_parallel=*/true, /*shard_copy=*/nullptr);
  // The budget search's recomputation choice covers the layer's experts.
  if (Attribute remat = unit->getAttr(kRematAttrName))
    experts->setAttr(kRematAttrName, remat);
  return name;
}

/// The received rows' bound of `sort`'s layer over `group` ranks: every
/// token of every rank of the group choosing as many of this rank's
/// experts as it can; a capacity factor (> 0) plans for less.
static int64_t receivedBound(MoeSortOp sort, int64_t group, double capacity) {
  auto choices = llvm::cast<RankedTensorType>(sort.getExperts().getType());
  int64_t k = choices.getShape().back();
  int64_t pairs = choices.getNumElements(), tokens = pairs / k;
  int64_t local = sort.getNumExperts() / group;
  int64_t bound = group * tokens * std::min(k, local);
  if (capacity > 0.0)
    bound = std::clamp<int64_t>(int64_t(std::ceil(capacity * double(pairs))), 1,
                                bound);
  return bound;
}

namespace {
/// One layer's exchange: the counts each way and the ops' common types.
struct Exchange {
  Value counts, sent, recv; ///< G x L: the sort's, what travels each way
  RankedTensorType countsType;
  StringAttr axis;
  int64_t bound = 0, pairs = 0;
  bool drop = false;
  RankedTensorType atBound(Type type) const {
    auto ranked = llvm::cast<RankedTensorType>(type);
    SmallVector<int64_t> shape(ranked.getShape());
    shape[0] = bound;
    return RankedTensorType::get(shape, ranked.getElementType());
  }
};
} // namespace

/// The counts exchange and the rows' all-to-all to the experts' ranks, at
/// the builder; returns the received rows. Dropping: the receiver keeps
/// what fits, the senders learn what it kept, and only those rows travel
/// (packed).
static Value dispatch(OpBuilder &builder, Location loc, ExpertOps &experts,
                      Exchange &x) {
  x.counts = MoeExpertCountsOp::create(builder, loc, x.countsType,
                                       experts.sort.getOffsets());
  x.recv =
      AllToAllCountsOp::create(builder, loc, x.countsType, x.counts, x.axis);
  x.sent = x.counts;
  Value rows = experts.rows;
  if (x.drop) {
    auto trim = MoeCapacityTrimOp::create(
        builder, loc,
        TypeRange{x.countsType,
                  RankedTensorType::get({1}, builder.getI32Type())},
        x.recv, builder.getI64IntegerAttr(x.bound));
    x.recv = trim.getKept();
    x.sent =
        AllToAllCountsOp::create(builder, loc, x.countsType, x.recv, x.axis);
    rows = MoeCompactOp::create(builder, loc, rows.getType(), rows, x.counts,
                                x.sent, false);
  }
  return AllToAllOp::create(builder, loc, x.atBound(rows.getType()), rows,
                            x.sent, x.recv, x.axis);
}

/// Rewrites one layer: the exchange around its experts, which move to just
/// before the combine, in the expert unit `unit`; `group` ranks.
static void exchange(ExpertOps &experts, int64_t group, double capacity,
                     bool drop, StringAttr unit, UnitTagMap &tags) {
  MoeSortOp sort = experts.sort;
  OpBuilder builder(experts.combine);
  Location loc = sort.getLoc();
  int64_t local = sort.getNumExperts() / group;
  Exchange x;
  x.countsType = RankedTensorType::get({group, local}, builder.getI32Type());
  x.axis = builder.getStringAttr(MeshAttr::kExpertAxis);
  x.bound = receivedBound(sort, group, capacity);
  x.pairs = llvm::cast<RankedTensorType>(sort.getExperts().getType())
                .getNumElements();
  x.drop = drop;

  UnitTag expertTag{unit, Phase::Forward};
  Value received = dispatch(builder, loc, experts, x);
  auto regroup = MoeRegroupOp::create(builder, loc, received.getType(),
                                      received, x.recv, false);
  auto offsets = MoeLocalOffsetsOp::create(
      builder, loc, RankedTensorType::get({local + 1}, builder.getI32Type()),
      x.recv);
  tags[regroup] = tags[offsets] = expertTag;

  for (Operation *op : experts.ops) {
    op->moveBefore(experts.combine);
    tags[op] = expertTag;
    for (OpOperand &operand : op->getOpOperands()) {
      if (operand.get() == experts.rows)
        operand.set(regroup.getResult());
      else if (operand.get() == sort.getOffsets())
        operand.set(offsets.getResult());
    }
    for (Value result : op->getResults())
      result.setType(x.atBound(result.getType()));
    // On average a rank receives as many rows as it sends: its FLOPs.
    if (llvm::isa<MoeGroupedLinearOp>(op))
      op->setAttr(kActiveRowsAttrName, builder.getI64IntegerAttr(x.pairs));
  }
  for (LoadOp load : experts.weights)
    tags[load] = expertTag;

  // The results home: back to rank order, the reverse all-to-all, and
  // (dropping) back into their runs with the dropped pairs zero.
  builder.setInsertionPoint(experts.combine);
  auto back = MoeRegroupOp::create(builder, loc, experts.out.getType(),
                                   experts.out, x.recv, true);
  tags[back] = expertTag;
  auto outType = llvm::cast<RankedTensorType>(experts.out.getType());
  SmallVector<int64_t> homeShape(outType.getShape());
  homeShape[0] = x.pairs;
  auto homeType = RankedTensorType::get(homeShape, outType.getElementType());
  Value home = AllToAllOp::create(builder, loc, homeType, back.getResult(),
                                  x.recv, x.sent, x.axis);
  if (drop)
    home = MoeCompactOp::create(builder, loc, homeType, home, x.counts, x.sent,
                                true);
  experts.combine.getRowsMutable().assign(home);
}

void FsdpExpertParallelPass::runOnOperation() {
  ModuleOp module = getOperation();
  MeshAttr mesh = getMesh(module);
  int64_t group = mesh ? mesh.getExpertSize() : 1;
  if (group == 1)
    return;
  if (!(capacityFactor >= 0.0) || std::isinf(capacityFactor)) {
    emitError(module.getLoc())
        << "fsdp-expert-parallel: capacity-factor must be 0 (the worst case) "
           "or positive and finite, got "
        << capacityFactor.getValue();
    return signalPassFailure();
  }
  if (overflow != "fail" && overflow != "drop") {
    emitError(module.getLoc()) << "fsdp-expert-parallel: overflow must be "
                                  "fail or drop, got '"
                               << overflow << "'";
    return signalPassFailure();
  }
  if (overflow == "drop" && capacityFactor == 0.0) {
    emitError(module.getLoc())
        << "fsdp-expert-parallel: overflow=drop needs a capacity factor (the "
           "worst-case bound is never exceeded: nothing would drop)";
    return signalPassFailure();
  }
  auto forward = module.lookupSymbol<func::FuncOp>(forwardName);
  if (!forward || forward.isExternal() || !forward.getBody().hasOneBlock()) {
    emitError(module.getLoc())
        << "fsdp-expert-parallel: no single-block function @" << forwardName;
    return signalPassFailure();
  }
  Block &block = forward.getBody().front();
  UnitTagMap tags;
  inlineComputeRegions(block, tags);
  SmallVector<MoeSortOp> sorts(block.getOps<MoeSortOp>());
  if (sorts.empty()) {
    emitError(module.getLoc())
        << "fsdp-expert-parallel: the mesh has expert groups of " << group
        << " ranks, but the model has no mixture-of-experts layer";
    return signalPassFailure();
  }
  for (MoeSortOp sort : sorts) {
    int64_t numExperts = sort.getNumExperts();
    if (numExperts % group != 0) {
      sort.emitOpError() << "sorts over " << numExperts
                         << " experts, which expert groups of " << group
                         << " ranks cannot split evenly";
      return signalPassFailure();
    }
    auto pairs = llvm::cast<RankedTensorType>(sort.getExperts().getType())
                     .getNumElements();
    FailureOr<ExpertOps> experts = findExperts(sort);
    if (failed(experts) || failed(checkBoundary(*experts, pairs)))
      return signalPassFailure();
    StringAttr parent = tags.lookup(experts->ops.front()).unit;
    if (!parent) {
      experts->ops.front()->emitOpError()
          << "is in no unit; expert parallelism gives a layer's experts a "
             "unit of their own beside it";
      return signalPassFailure();
    }
    for (LoadOp load : experts->weights)
      if (failed(narrowWeight(module, load, numExperts, numExperts / group)))
        return signalPassFailure();
    StringAttr unit = splitUnit(module, parent, experts->weights);
    exchange(*experts, group, capacityFactor, overflow == "drop", unit, tags);
  }
  outlineComputeRegions(block, tags);
  if (failed(verify(module)))
    return signalPassFailure();
}
