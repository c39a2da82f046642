//===- DataParallel.cpp - split the global batch across ranks -------------===//
//
// Every value of @forward that is computed from its inputs carries the
// batch as its first dimension (the model ops preserve the leading
// dimensions; statistics and attention probabilities keep them first; only
// the loss is a scalar), or a multiple of it: a mixture of experts' rows
// in expert order are the B S K (token, choice) pairs, whose count divides
// as the batch does. Dividing that dimension by N everywhere turns the
// global-batch forward into one rank's forward. A sort's offsets (one per
// expert, plus one), the load-balancing statistics (two per expert) and
// expert parallelism's counts are the values without rows: they keep
// their size.
//
//===----------------------------------------------------------------------===//

#include "fsdp/Dialect/FSDP/Analysis/UnitRegions.h"
#include "fsdp/Dialect/FSDP/Transforms/Passes.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/Verifier.h"
#include "llvm/ADT/DenseSet.h"

namespace mlir::fsdp {
#define GEN_PASS_DEF_FSDPDATAPARALLELPASS
#include "fsdp/Dialect/FSDP/Transforms/Passes.h.inc"
} // namespace mlir::fsdp

using namespace mlir;
using namespace mlir::fsdp;

namespace {
struct FsdpDataParallelPass
    : public mlir::fsdp::impl::FsdpDataParallelPassBase<FsdpDataParallelPass> {
  using FsdpDataParallelPassBase::FsdpDataParallelPassBase;
  void runOnOperation() override;
};
} // namespace

/// The global batch: the first dimension every input of `forward` shares,
/// checked to divide into `ranks` equal parts; -1 for a forward without
/// inputs, failure after an error.
static FailureOr<int64_t> findGlobalBatch(func::FuncOp forward, int64_t ranks) {
  int64_t batch = -1;
  for (BlockArgument arg : forward.getBody().front().getArguments()) {
    auto type = llvm::dyn_cast<RankedTensorType>(arg.getType());
    if (!type || type.getRank() == 0)
      return emitError(forward.getLoc())
             << "fsdp-data-parallel: input #" << arg.getArgNumber()
             << " has no batch dimension: " << arg.getType();
    if (batch >= 0 && type.getDimSize(0) != batch)
      return emitError(forward.getLoc())
             << "fsdp-data-parallel: inputs disagree on the "
                "batch (first dimension): "
             << batch << " and " << type.getDimSize(0);
    batch = type.getDimSize(0);
  }
  if (batch >= 0 && batch % ranks != 0)
    return emitError(forward.getLoc())
           << "fsdp-data-parallel: the global batch " << batch
           << " is not divisible by world size " << ranks
           << "; every rank must get the same number of rows";
  return batch;
}

/// A value sized by the experts, not the rows: a sort's offsets (E + 1),
/// the load-balancing statistics (2 x E), and expert parallelism's counts
/// (G x L) and local offsets (L + 1).
static bool isPerExpert(Value v) {
  if (auto sort = v.getDefiningOp<MoeSortOp>())
    return v == sort.getOffsets();
  Operation *def = v.getDefiningOp();
  return def && llvm::isa<MoeAuxStatsOp, MoeExpertCountsOp, AllToAllCountsOp,
                          MoeLocalOffsetsOp, MoeCapacityTrimOp>(def);
}

/// Divides the leading dimension of every value of `block` computed from
/// its arguments (and of the arguments) from `batch` to batch / ranks.
static LogicalResult splitBatch(Block &block, int64_t batch, int64_t ranks) {
  // Values computed from the inputs carry the batch first.
  llvm::DenseSet<Value> batched(block.getArguments().begin(),
                                block.getArguments().end());
  auto split = [&](Value v) -> LogicalResult {
    auto type = llvm::dyn_cast<RankedTensorType>(v.getType());
    if (!type || type.getRank() == 0)
      return success();
    if (isPerExpert(v))
      return success();
    if (type.getDimSize(0) % batch != 0)
      return emitError(v.getLoc())
             << "fsdp-data-parallel: a value computed from the inputs has "
                "leading dimension "
             << type.getDimSize(0) << ", not the batch " << batch
             << " or a multiple of it";
    SmallVector<int64_t> shape(type.getShape());
    shape[0] /= ranks;
    v.setType(RankedTensorType::get(shape, type.getElementType()));
    return success();
  };
  for (Operation &op : block.without_terminator()) {
    if (llvm::none_of(op.getOperands(),
                      [&](Value v) { return batched.contains(v); }))
      continue;
    for (Value result : op.getResults()) {
      batched.insert(result);
      if (failed(split(result)))
        return failure();
    }
  }
  for (BlockArgument arg : block.getArguments())
    if (failed(split(arg)))
      return failure();
  return success();
}

void FsdpDataParallelPass::runOnOperation() {
  ModuleOp module = getOperation();
  // Every rank of the mesh takes its own rows, whatever axis it is on.
  int64_t ranks = getNumRanks(module);
  if (ranks == 1)
    return; // one rank takes the whole batch
  auto forward = module.lookupSymbol<func::FuncOp>(forwardName);
  if (!forward || forward.isExternal() || !forward.getBody().hasOneBlock()) {
    emitError(module.getLoc())
        << "fsdp-data-parallel: no single-block function @" << forwardName;
    return signalPassFailure();
  }
  if (forward->hasAttr(kBatchSplitAttrName))
    return; // already split: running twice changes nothing
  FailureOr<int64_t> batch = findGlobalBatch(forward, ranks);
  if (failed(batch))
    return signalPassFailure();
  if (*batch < 0)
    return;

  Block &block = forward.getBody().front();
  // The split sees through unit regions: inline them, split, outline again.
  UnitTagMap tags;
  inlineComputeRegions(block, tags);
  if (failed(splitBatch(block, *batch, ranks)))
    return signalPassFailure();
  OpBuilder builder(module.getContext());
  forward.setFunctionType(builder.getFunctionType(
      block.getArgumentTypes(), forward.getFunctionType().getResults()));
  outlineComputeRegions(block, tags);
  forward->setAttr(kBatchSplitAttrName, builder.getUnitAttr());
  if (failed(verify(forward)))
    return signalPassFailure();
}
