//===- DataParallel.cpp - split the global batch across ranks -------------===//
//
// Every value of @forward that is computed from its inputs carries the
// batch as its first dimension (the model ops preserve the leading
// dimensions; statistics and attention probabilities keep them first; only
// the loss is a scalar). Dividing that dimension by N everywhere turns the
// global-batch forward into one rank's forward.
//
//===----------------------------------------------------------------------===//

#include "fsdp/Dialect/FSDP/Transforms/Passes.h"
#include "fsdp/Dialect/FSDP/Transforms/UnitRegions.h"

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
    : public fsdp::impl::FsdpDataParallelPassBase<FsdpDataParallelPass> {
  using FsdpDataParallelPassBase::FsdpDataParallelPassBase;
  void runOnOperation() override;
};
} // namespace

void FsdpDataParallelPass::runOnOperation() {
  ModuleOp module = getOperation();
  // Every rank of the mesh takes its own rows, whatever axis it is on.
  int64_t worldSize = getNumRanks(module);
  auto forward = module.lookupSymbol<func::FuncOp>(forwardName);
  if (worldSize == 1)
    return; // one rank takes the whole batch
  if (!forward || forward.isExternal() || !forward.getBody().hasOneBlock()) {
    emitError(module.getLoc())
        << "fsdp-data-parallel: no single-block function @" << forwardName;
    return signalPassFailure();
  }
  if (forward->hasAttr(kBatchSplitAttrName))
    return; // already split: running twice changes nothing
  OpBuilder builder(module.getContext());
  forward->setAttr(kBatchSplitAttrName, builder.getUnitAttr());

  Block &block = forward.getBody().front();
  int64_t batch = -1;
  for (BlockArgument arg : block.getArguments()) {
    auto type = llvm::dyn_cast<RankedTensorType>(arg.getType());
    if (!type || type.getRank() == 0) {
      emitError(forward.getLoc())
          << "fsdp-data-parallel: input #" << arg.getArgNumber()
          << " has no batch dimension: " << arg.getType();
      return signalPassFailure();
    }
    if (batch >= 0 && type.getDimSize(0) != batch) {
      emitError(forward.getLoc())
          << "fsdp-data-parallel: inputs disagree on the "
             "batch (first dimension): "
          << batch << " and " << type.getDimSize(0);
      return signalPassFailure();
    }
    batch = type.getDimSize(0);
  }
  if (batch < 0)
    return;
  if (batch % worldSize != 0) {
    emitError(forward.getLoc())
        << "fsdp-data-parallel: the global batch " << batch
        << " is not divisible by world size " << int64_t(worldSize)
        << "; every rank must get the same number of rows";
    return signalPassFailure();
  }

  UnitTagMap tags;
  inlineComputeRegions(block, tags);
  // Values computed from the inputs carry the batch first.
  llvm::DenseSet<Value> batched(block.getArguments().begin(),
                                block.getArguments().end());
  auto split = [&](Value v) -> LogicalResult {
    auto type = llvm::dyn_cast<RankedTensorType>(v.getType());
    if (!type || type.getRank() == 0)
      return success();
    if (type.getDimSize(0) != batch)
      return emitError(v.getLoc())
             << "fsdp-data-parallel: a value computed from the inputs has "
                "leading dimension "
             << type.getDimSize(0) << ", not the batch " << batch;
    SmallVector<int64_t> shape(type.getShape());
    shape[0] /= worldSize;
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
        return signalPassFailure();
    }
  }
  for (BlockArgument arg : block.getArguments())
    if (failed(split(arg)))
      return signalPassFailure();
  forward.setFunctionType(builder.getFunctionType(
      block.getArgumentTypes(), forward.getFunctionType().getResults()));
  outlineComputeRegions(block, tags);
  if (failed(verify(forward)))
    return signalPassFailure();
}
