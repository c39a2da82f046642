//===- Attention.cpp - choose each attention's form -----------------------===//
//
// The form is a property of the forward op (it fixes the type of what the
// op saves), so it is chosen before autodiff builds the backward from it.
//
//===----------------------------------------------------------------------===//

#include "fsdp/Dialect/FSDP/Transforms/Passes.h"

#include "mlir/IR/Builders.h"

namespace mlir::fsdp {
#define GEN_PASS_DEF_FSDPATTENTIONPASS
#include "fsdp/Dialect/FSDP/Transforms/Passes.h.inc"
} // namespace mlir::fsdp

using namespace mlir;
using namespace mlir::fsdp;

namespace {
struct FsdpAttentionPass
    : public mlir::fsdp::impl::FsdpAttentionPassBase<FsdpAttentionPass> {
  using FsdpAttentionPassBase::FsdpAttentionPassBase;
  void runOnOperation() override;
};

/// The form `choice` asks for at this op: auto is blocked wherever the
/// log-sum-exp (B x H x T) is smaller than the probabilities (B x H x T x T)
/// and both backends have blocked kernels for its shape.
AttentionImpl chosenImpl(AttentionOp op, StringRef choice) {
  if (choice == "materialized")
    return AttentionImpl::Materialized;
  if (choice == "blocked")
    return AttentionImpl::Blocked;
  int64_t seq =
      llvm::cast<RankedTensorType>(op.getQkv().getType()).getDimSize(1);
  return seq > 1 && hasBlockedKernels(op) ? AttentionImpl::Blocked
                                          : AttentionImpl::Materialized;
}

} // namespace

void FsdpAttentionPass::runOnOperation() {
  if (impl != "auto" && impl != "materialized" && impl != "blocked") {
    getOperation().emitError()
        << "fsdp-attention: impl must be auto, materialized or blocked, got '"
        << impl << "'";
    return signalPassFailure();
  }
  SmallVector<AttentionOp> ops;
  getOperation().walk([&](AttentionOp op) { ops.push_back(op); });
  for (AttentionOp op : ops) {
    AttentionImpl want = chosenImpl(op, impl);
    // A forward that reads what attention saves keeps it.
    if (want != op.getImpl() && op.getSaved().use_empty())
      setAttentionImpl(op, want);
  }
}
