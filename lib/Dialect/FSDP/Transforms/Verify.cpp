//===- Verify.cpp - the FSDP contract of a sharded training step ----------===//

#include "fsdp/Dialect/FSDP/Transforms/Passes.h"

#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/MapVector.h"

namespace mlir::fsdp {
#define GEN_PASS_DEF_FSDPVERIFYPASS
#include "fsdp/Dialect/FSDP/Transforms/Passes.h.inc"
} // namespace mlir::fsdp

using namespace mlir;
using namespace mlir::fsdp;

namespace {
struct FsdpVerifyPass
    : public mlir::fsdp::impl::FsdpVerifyPassBase<FsdpVerifyPass> {
  void runOnOperation() override;
  LogicalResult verifyStep(func::FuncOp step);
};

/// The op of `block` that contains `op` (op itself when it is in `block`).
Operation *ancestorIn(Block &block, Operation *op) {
  while (op && op->getBlock() != &block)
    op = op->getParentOp();
  return op;
}

/// The step being verified, and whether a check failed: every check reports
/// all it finds, so one run lists every broken rule.
struct StepCheck {
  Block &block;
  bool ok = true;

  InFlightDiagnostic fail(Operation *op) {
    ok = false;
    return op->emitOpError();
  }
};
} // namespace

/// Every gathered parameter and packed gradient is freed once, and not
/// used after that.
static void checkFreed(StepCheck &check, Operation *def, Value value) {
  SmallVector<FreeOp> frees;
  for (Operation *user : value.getUsers())
    if (auto free = llvm::dyn_cast<FreeOp>(user))
      frees.push_back(free);
  llvm::sort(frees, [](FreeOp a, FreeOp b) { return a->isBeforeInBlock(b); });
  if (frees.empty()) {
    check.fail(def) << "produces a tensor that is never freed (fsdp.free): "
                       "the gathered memory would stay for the rest of the "
                       "step";
    return;
  }
  if (frees.size() > 1) {
    InFlightDiagnostic diag = check.fail(frees[1]) << "frees a tensor twice";
    diag.attachNote(frees[0].getLoc()) << "first freed here";
    return;
  }
  for (OpOperand &use : value.getUses()) {
    Operation *user = ancestorIn(check.block, use.getOwner());
    if (user != frees[0] && frees[0]->isBeforeInBlock(user)) {
      InFlightDiagnostic diag = check.fail(use.getOwner())
                                << "uses a tensor after it was freed";
      diag.attachNote(frees[0].getLoc()) << "freed here";
    }
  }
}

/// Collectives run at the top level only: a fixed sequence on every rank.
static void checkTopLevel(StepCheck &check, func::FuncOp step) {
  step.walk([&](Operation *op) {
    if (llvm::isa<AllGatherOp, AllGatherStartOp, ReduceScatterOp,
                  ReduceScatterStartOp, WaitOp, FreeOp, AdamWShardOp,
                  AllReduceSumOp, AllReduceMeanOp, AllReduceMeanStartOp,
                  AllToAllCountsOp, AllToAllOp, AllToAllStartOp>(op) &&
        op->getBlock() != &check.block)
      check.fail(op)
          << "is nested in a region; inside control flow it could run a "
             "different number of times on different ranks";
  });
}

/// Parameters are read only through views of their unit's gather, so that
/// every read sees gathered (whole) parameters of the right unit.
static void checkParamReads(StepCheck &check, func::FuncOp step) {
  step.walk([&](LoadOp load) {
    check.fail(load) << "reads parameter " << load.getParamAttr()
                     << " without gathering it: a sharded step reads "
                        "parameters as views of their unit's fsdp.all_gather";
  });
  step.walk([&](ViewOp view) {
    Value source = view.getSource();
    auto compute = view->getParentOfType<ComputeOp>();
    if (auto arg = llvm::dyn_cast<BlockArgument>(source);
        arg && compute && arg.getOwner() == &compute.getBodyBlock())
      source = compute.getInputs()[arg.getArgNumber()];
    Operation *gather = source.getDefiningOp();
    if (!getGatheredTensor(gather)) {
      check.fail(view) << "views a tensor that is not a gathered parameter";
      return;
    }
    if (compute && getCollectiveUnit(gather) != compute.getUnitAttr()) {
      InFlightDiagnostic diag =
          check.fail(view) << "in a region of unit " << compute.getUnitAttr()
                           << " views the parameters of unit "
                           << getCollectiveUnit(gather);
      diag.attachNote(gather->getLoc()) << "gathered here";
    }
  });
}

/// Started collectives: each token awaited exactly once, and the result
/// read only after that wait (before it, the result may be incomplete).
static void checkWaits(StepCheck &check) {
  for (Operation &op : check.block) {
    if (!llvm::isa<AllGatherStartOp, ReduceScatterStartOp, AllReduceMeanStartOp,
                   AllToAllStartOp>(op))
      continue;
    Value token = op.getResult(0), result = op.getResult(1);
    SmallVector<Operation *> waits(token.getUsers());
    if (waits.size() != 1) {
      check.fail(&op) << (waits.empty() ? "is never waited for: its result "
                                          "would never be known to be "
                                          "complete"
                                        : "is waited for more than once");
      continue;
    }
    Operation *wait = waits.front();
    for (OpOperand &use : result.getUses()) {
      Operation *user = ancestorIn(check.block, use.getOwner());
      if (user->isBeforeInBlock(wait) && !llvm::isa<FreeOp>(user)) {
        InFlightDiagnostic diag =
            check.fail(use.getOwner())
            << "reads the result of a collective before waiting for it";
        diag.attachNote(wait->getLoc()) << "the wait is here";
      }
    }
  }
}

/// The in-flight limit the schedule promised: gathers started and not yet
/// freed, at every point of the step.
static void checkInflightLimit(StepCheck &check, func::FuncOp step) {
  auto limit = step->getParentOfType<ModuleOp>()->getAttrOfType<IntegerAttr>(
      kMaxInflightGathersAttrName);
  if (!limit)
    return;
  walkInflightGathers(check.block, [&](Operation *op, int64_t inflight) {
    if (getGatheredTensor(op) && inflight > limit.getInt())
      check.fail(op) << "starts gather number " << inflight
                     << " in flight; the schedule allows " << limit.getInt();
    return true;
  });
}

/// Each unit: one reduce-scatter, consumed by its AdamW, so that every
/// gradient shard is reduced once and applied.
static void checkScatters(StepCheck &check) {
  llvm::MapVector<Attribute, SmallVector<Operation *>> scatters;
  for (Operation &op : check.block)
    if (getScatteredShard(&op))
      scatters[getCollectiveUnit(&op)].push_back(&op);
  // A reduce-scatter consumes its input (the CPU ring accumulates in it, to
  // need no staging memory): after it, the full-size gradient may only be
  // freed.
  for (auto &[unit, ops] : scatters)
    for (Operation *scatter : ops)
      for (Operation *user : scatter->getOperand(0).getUsers()) {
        Operation *top = check.block.findAncestorOpInBlock(*user);
        if (top && top != scatter && scatter->isBeforeInBlock(top) &&
            !llvm::isa<FreeOp>(user)) {
          InFlightDiagnostic diag =
              check.fail(user) << "reads the full-size gradient of unit "
                               << unit << " after its reduce-scatter, which "
                               << "consumes it";
          diag.attachNote(scatter->getLoc()) << "reduce-scatter here";
        }
      }
  for (auto &[unit, ops] : scatters)
    if (ops.size() > 1) {
      InFlightDiagnostic diag = check.fail(ops[1]) << "reduce-scatters unit "
                                                   << unit << " a second time";
      diag.attachNote(ops[0]->getLoc()) << "first reduce-scatter here";
    }
  for (auto adamw : check.block.getOps<AdamWShardOp>()) {
    // Through the cast of a shard reduced in bf16 back to f32, and the
    // replica all-reduce of hybrid sharding.
    Value grad = adamw.getGrad();
    if (auto cast = grad.getDefiningOp<CastOp>())
      grad = cast.getSource();
    if (getReplicaMean(grad.getDefiningOp()))
      grad = grad.getDefiningOp()->getOperand(0);
    Operation *scatter = grad.getDefiningOp();
    if (!getScatteredShard(scatter) ||
        getCollectiveUnit(scatter) != adamw.getUnitAttr())
      check.fail(adamw) << "updates unit " << adamw.getUnitAttr()
                        << " from a gradient that is not that unit's "
                           "reduce-scatter: the gradient shard would be "
                           "missing";
  }
}

/// The reduce-scatter shard `v` is (through a cast and a replica
/// all-reduce), or null.
static Operation *scatterOf(Value v) {
  if (auto cast = v.getDefiningOp<CastOp>())
    v = cast.getSource();
  if (getReplicaMean(v.getDefiningOp()))
    v = v.getDefiningOp()->getOperand(0);
  Operation *def = v.getDefiningOp();
  return getScatteredShard(def) ? def : nullptr;
}

/// The chain of sums of squares that ends in `sum`: every link is a
/// grad_sq_sum of its unit's reduce-scattered shard, and no unit is summed
/// twice. Returns the units summed.
static llvm::DenseSet<Attribute> checkSumChain(StepCheck &check, Value sum) {
  SmallVector<GradSqSumOp> chain; // from the end
  for (; sum; sum = chain.back().getAcc()) {
    auto link = sum.getDefiningOp<GradSqSumOp>();
    if (!link) {
      check.fail(sum.getDefiningOp() ? sum.getDefiningOp()
                                     : check.block.getParentOp())
          << "is part of a gradient norm but is no fsdp.grad_sq_sum: the "
             "norm would not be the gradients'";
      break;
    }
    chain.push_back(link);
  }
  llvm::DenseMap<Attribute, GradSqSumOp> summed;
  for (GradSqSumOp link : llvm::reverse(chain)) {
    Operation *scatter = scatterOf(link.getGrad());
    if (!scatter || getCollectiveUnit(scatter) != link.getUnitAttr())
      check.fail(link) << "sums the squares of a tensor that is not unit "
                       << link.getUnitAttr() << "'s reduce-scattered shard";
    auto [it, fresh] = summed.try_emplace(link.getUnitAttr(), link);
    if (!fresh) {
      InFlightDiagnostic diag = check.fail(link)
                                << "sums the squares of unit "
                                << link.getUnitAttr() << "'s gradient twice";
      diag.attachNote(it->second.getLoc()) << "also summed here";
    }
  }
  llvm::DenseSet<Attribute> units;
  for (auto &entry : summed)
    units.insert(entry.first);
  return units;
}

/// Gradient clipping: where one AdamW scales its gradient, every AdamW
/// scales it by the one coefficient, computed from the all-reduced sum of
/// squares of every unit's shard, so that every rank clips every unit by
/// the global norm.
static void checkClipping(StepCheck &check) {
  SmallVector<AdamWShardOp> adamws(check.block.getOps<AdamWShardOp>());
  auto scaled =
      llvm::find_if(adamws, [](AdamWShardOp a) { return bool(a.getScale()); });
  if (scaled == adamws.end())
    return;
  Value scale = scaled->getScale();
  for (AdamWShardOp adamw : adamws)
    if (adamw.getScale() != scale) {
      InFlightDiagnostic diag = check.fail(adamw)
                                << "updates unit " << adamw.getUnitAttr()
                                << " without the clipping scale of unit "
                                << scaled->getUnitAttr();
      diag.attachNote(scaled->getLoc()) << "scaled here";
    }
  auto clip = scale.getDefiningOp<ClipCoefficientOp>();
  if (!clip) {
    check.fail(*scaled) << "scales its gradient by a value that is no "
                           "fsdp.clip_coefficient";
    return;
  }
  auto reduce = clip.getSumSq().getDefiningOp<AllReduceSumOp>();
  if (!reduce) {
    check.fail(clip) << "clips by a sum of squares that is not all-reduced "
                        "over the ranks: each rank would clip by its own norm";
    return;
  }
  llvm::DenseSet<Attribute> summed = checkSumChain(check, reduce.getValue());
  for (AdamWShardOp adamw : adamws)
    if (!summed.contains(adamw.getUnitAttr()))
      check.fail(clip) << "clips by a norm that leaves out unit "
                       << adamw.getUnitAttr() << "'s gradient";
}

/// Hybrid sharding's groups. Every member of a group runs this one
/// top-level program (checkTopLevel), so the collectives of a group are
/// issued by all its members in program order, and a bucket runs over one
/// group (the ops' verifiers): the order agrees once each collective names
/// the group the mesh gives it. Under a replicate axis every collective
/// names its axis, and each unit's reduce-scatter is followed by one
/// replica all-reduce of its shard, which its AdamW reads (else the
/// replicas would drift apart); with one replica there is none.
static void checkGroups(StepCheck &check, MeshAttr mesh) {
  int64_t replicas = mesh ? mesh.getReplicateSize() : 1;
  llvm::DenseMap<Attribute, Operation *> meanOf;
  for (Operation &op : check.block) {
    StringRef axis = getCollectiveAxis(&op);
    if (axis.empty())
      continue;
    if (replicas > 1 && !op.hasAttr("axis"))
      check.fail(&op) << "names no mesh axis; under the mesh " << mesh
                      << " every collective names the group it runs over";
    if (!getReplicaMean(&op))
      continue;
    if (replicas == 1) {
      check.fail(&op) << "averages over replicas, but the mesh has none";
      continue;
    }
    Operation *source = op.getOperand(0).getDefiningOp();
    if (!getScatteredShard(source) ||
        getCollectiveUnit(source) != getCollectiveUnit(&op))
      check.fail(&op) << "averages a tensor that is not unit "
                      << getCollectiveUnit(&op) << "'s reduce-scattered shard";
    auto [it, fresh] = meanOf.try_emplace(getCollectiveUnit(&op), &op);
    if (!fresh) {
      InFlightDiagnostic diag = check.fail(&op)
                                << "averages unit " << getCollectiveUnit(&op)
                                << " over the replicas a second time";
      diag.attachNote(it->second->getLoc()) << "first averaged here";
    }
  }
  if (replicas == 1)
    return;
  for (auto adamw : check.block.getOps<AdamWShardOp>()) {
    Value grad = adamw.getGrad();
    if (auto cast = grad.getDefiningOp<CastOp>())
      grad = cast.getSource();
    if (!getReplicaMean(grad.getDefiningOp()))
      check.fail(adamw) << "updates unit " << adamw.getUnitAttr()
                        << " from a shard not averaged over the replicas: "
                           "the replicas of its shard would drift apart";
  }
}

LogicalResult FsdpVerifyPass::verifyStep(func::FuncOp step) {
  StepCheck check{step.getBody().front()};
  checkTopLevel(check, step);
  for (Operation &op : check.block) {
    if (Value gathered = getGatheredTensor(&op))
      checkFreed(check, &op, gathered);
    if (auto pack = llvm::dyn_cast<PackOp>(op))
      checkFreed(check, pack, pack.getResult());
  }
  checkParamReads(check, step);
  checkWaits(check);
  checkInflightLimit(check, step);
  checkScatters(check);
  checkClipping(check);
  checkGroups(check, getMesh(step));
  return success(check.ok);
}

void FsdpVerifyPass::runOnOperation() {
  markAllAnalysesPreserved();
  func::FuncOp step = getTrainStep(getOperation());
  if (step && step.getBody().hasOneBlock() &&
      isShardedStep(step.getBody().front()) && failed(verifyStep(step)))
    return signalPassFailure();
}
