//===- ClipGrad.cpp - gradient clipping by global norm, in the step -------===//
//
// The global norm is a sum over every rank's shard of every unit, so it is
// a collective, and it belongs to the compiled step with the other
// collectives (docs/Rationale.md): per-unit sums of squares chained on each
// rank, one scalar all-reduce, PyTorch's coefficient, and AdamW on the
// scaled gradient.
//
//===----------------------------------------------------------------------===//

#include "fsdp/Dialect/FSDP/Transforms/Passes.h"

#include "mlir/IR/Builders.h"

#include <cmath>
#include <cstdio>

namespace mlir::fsdp {
#define GEN_PASS_DEF_FSDPCLIPGRADPASS
#include "fsdp/Dialect/FSDP/Transforms/Passes.h.inc"
} // namespace mlir::fsdp

using namespace mlir;
using namespace mlir::fsdp;

namespace {
/// A unit's AdamW and the gradient shard its reduce-scatter gave (before a
/// cast to the master type under mixed precision).
struct Update {
  AdamWShardOp adamw;
  Value shard;
};

struct FsdpClipGradPass
    : public mlir::fsdp::impl::FsdpClipGradPassBase<FsdpClipGradPass> {
  using FsdpClipGradPassBase::FsdpClipGradPassBase;
  void runOnOperation() override;
};
} // namespace

/// The reduce-scatter's shard that `grad` is, through a cast; null when it
/// is none.
static Value reducedShard(Value grad) {
  if (auto cast = grad.getDefiningOp<CastOp>())
    grad = cast.getSource();
  Operation *def = grad.getDefiningOp();
  return getScatteredShard(def) || getReplicaMean(def) ? grad : Value();
}

/// The step to clip: sharded, not yet scheduled nor clipped; null after an
/// error.
static func::FuncOp findStepToClip(ModuleOp module) {
  func::FuncOp step = getTrainStep(module);
  if (!step || !step.getBody().hasOneBlock() ||
      !isShardedStep(step.getBody().front())) {
    emitError(module.getLoc()) << "fsdp-clip-grad: no sharded function marked "
                                  "fsdp.train_step (run --fsdp-shard first)";
    return {};
  }
  Block &block = step.getBody().front();
  if (!block.getOps<AllGatherStartOp>().empty() ||
      !block.getOps<ReduceScatterStartOp>().empty()) {
    emitError(module.getLoc()) << "fsdp-clip-grad: @train_step is already "
                                  "scheduled: run --fsdp-clip-grad before "
                                  "--fsdp-schedule";
    return {};
  }
  if (!block.getOps<ClipCoefficientOp>().empty()) {
    emitError(module.getLoc())
        << "fsdp-clip-grad: @train_step already clips its gradients";
    return {};
  }
  return step;
}

/// Every unit's update, in the order their shards are reduced (the order
/// the sums chain in); fails on an AdamW whose gradient is no shard.
static FailureOr<SmallVector<Update>> collectUpdates(Block &block) {
  SmallVector<Update> updates;
  for (AdamWShardOp adamw : block.getOps<AdamWShardOp>()) {
    Value shard = reducedShard(adamw.getGrad());
    if (!shard)
      return adamw.emitOpError()
             << "updates from a gradient that is no reduce-scatter's "
                "shard: fsdp-clip-grad cannot sum its squares";
    updates.push_back({adamw, shard});
  }
  if (updates.empty()) {
    emitError(block.getParentOp()->getLoc())
        << "fsdp-clip-grad: @train_step has no fsdp.adamw_shard to clip";
    return failure();
  }
  llvm::stable_sort(updates, [](const Update &a, const Update &b) {
    return a.shard.getDefiningOp()->isBeforeInBlock(b.shard.getDefiningOp());
  });
  return updates;
}

void FsdpClipGradPass::runOnOperation() {
  ModuleOp module = getOperation();
  // The coefficient's attribute is an f32: the norm must be one too.
  if (float norm = float(maxNorm); !(norm > 0.0f) || std::isinf(norm)) {
    char text[32];
    std::snprintf(text, sizeof(text), "%g", double(maxNorm));
    emitError(module.getLoc())
        << "fsdp-clip-grad: max-norm must be a positive, finite f32, got "
        << text;
    return signalPassFailure();
  }
  func::FuncOp step = findStepToClip(module);
  if (!step)
    return signalPassFailure();
  Block &block = step.getBody().front();
  FailureOr<SmallVector<Update>> updates = collectUpdates(block);
  if (failed(updates))
    return signalPassFailure();

  // The chain, the all-reduce and the coefficient after everything the
  // step computed; then the updates, in their order.
  Operation *end = block.getTerminator();
  OpBuilder builder(end);
  Location loc = updates->front().adamw.getLoc();
  Value sum;
  for (Update &u : *updates)
    sum = GradSqSumOp::create(builder, loc, u.adamw.getUnitAttr(), u.shard, sum)
              .getResult();
  // Under hybrid sharding the replicas hold identical shards (after the
  // replica all-reduce): summing over the shard group counts each element
  // once, summing over every rank would count it R times.
  auto reduce =
      AllReduceSumOp::create(builder, loc, sum.getType(), sum, StringAttr());
  if (MeshAttr mesh = getMesh(module); mesh && mesh.getReplicateSize() > 1)
    reduce.setAxis(MeshAttr::kShardAxis);
  Value global = reduce.getResult();
  Value coefficient = ClipCoefficientOp::create(
      builder, loc, global, builder.getF32FloatAttr(float(maxNorm)));
  SmallVector<AdamWShardOp> inOrder(block.getOps<AdamWShardOp>());
  for (AdamWShardOp adamw : inOrder) {
    // A cast of the shard to the master type goes with its AdamW (it is
    // used there only): cast shards live no longer than before.
    if (auto cast = adamw.getGrad().getDefiningOp<CastOp>();
        cast && cast->hasOneUse())
      cast->moveBefore(end);
    adamw->moveBefore(end);
    adamw.getScaleMutable().assign(coefficient);
  }
}
