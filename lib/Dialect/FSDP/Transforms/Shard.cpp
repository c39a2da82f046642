//===- Shard.cpp - the seed's FSDP cycle on @train_step -------------------===//
//
// Per unit: one flat parameter, sharded floor(k P / N) .. floor((k+1) P / N);
// all-gather / compute / free around every forward region; all-gather /
// compute / pack / reduce-scatter / free around the backward; AdamW on the
// local shard. The graph-level ops stay value-semantic; the collectives and
// frees carry memory effects that pin their order.
//
//===----------------------------------------------------------------------===//

#include "fsdp/Dialect/FSDP/Transforms/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/IR/Builders.h"
#include "llvm/ADT/MapVector.h"

namespace mlir::fsdp {
#define GEN_PASS_DEF_FSDPSHARDPASS
#include "fsdp/Dialect/FSDP/Transforms/Passes.h.inc"
} // namespace mlir::fsdp

using namespace mlir;
using namespace mlir::fsdp;

namespace {
/// A unit's flat layout: its parameters in unit order and their offsets.
struct FlatLayout {
  UnitOp unit;
  SmallVector<ParamOp> params;
  llvm::DenseMap<Attribute, int64_t> offsetOf; ///< param symbol -> offset
  int64_t size = 0;
  Type elementType;
};

struct FsdpShardPass
    : public mlir::fsdp::impl::FsdpShardPassBase<FsdpShardPass> {
  using FsdpShardPassBase::FsdpShardPassBase;
  void runOnOperation() override;

private:
  /// Each unit's flat layout (in unit order), and the unit of each
  /// parameter; fails on a unit that mixes element types or a parameter
  /// in no unit.
  LogicalResult buildLayouts(ModuleOp module);
  /// Forward and backward regions: gather, compute with views, free; after
  /// each unit's last backward region, pack and reduce-scatter its
  /// gradient (into gradShard).
  LogicalResult shardRegions(Block &block);
  /// One AdamW per unit, on its shard, where the unit's first AdamW was.
  LogicalResult shardOptimizer();

  /// Replicas of every shard: the mesh's replicate axis.
  int64_t replicas = 1;
  /// Under hybrid sharding (replicas > 1) every collective names its group;
  /// with one replica the only group is every rank, and the IR stays as it
  /// was before meshes had two axes.
  /// An expert-parallel unit's collectives always name theirs (the ranks
  /// of the shard group that hold its expert slice).
  template <typename OpT> void nameGroup(OpT op, const FlatLayout &layout) {
    if (UnitOp(layout.unit).getExpertParallel())
      op.setAxis(MeshAttr::kExpertShardGroup);
    else if (replicas > 1)
      op.setAxis(MeshAttr::kShardAxis);
  }
  llvm::MapVector<Attribute, FlatLayout> layouts;
  llvm::DenseMap<Attribute, Attribute> unitOfParam;        ///< param -> unit
  llvm::MapVector<Attribute, SmallVector<AdamWOp>> adamws; ///< per unit
  llvm::DenseMap<Attribute, Value> gradShard; ///< unit -> gradient shard
  /// Gathers the unit's flat parameter for `compute`, which then reads its
  /// parameters as views into it. Returns the gathered value.
  Value gatherInto(ComputeOp compute, const FlatLayout &layout);
  /// Packs the unit's full-size gradient at the builder's insertion point,
  /// reduce-scatters it into the local shard (returned) and frees it.
  Value reduceGradient(OpBuilder &builder, Location loc, FlatLayout &layout,
                       ArrayRef<AdamWOp> adamws);
};
} // namespace

Value FsdpShardPass::gatherInto(ComputeOp compute, const FlatLayout &layout) {
  OpBuilder builder(compute);
  auto flatType = RankedTensorType::get({layout.size}, layout.elementType);
  auto gather = AllGatherOp::create(builder, compute.getLoc(), flatType,
                                    compute.getUnitAttr(), StringAttr());
  nameGroup(gather, layout);
  Value full = gather.getResult();
  compute->insertOperands(compute->getNumOperands(), full);
  Block &body = compute.getBodyBlock();
  BlockArgument arg = body.addArgument(flatType, compute.getLoc());
  for (LoadOp load : llvm::make_early_inc_range(body.getOps<LoadOp>())) {
    builder.setInsertionPoint(load);
    Value view = ViewOp::create(
        builder, load.getLoc(), load.getType(), arg,
        builder.getI64IntegerAttr(layout.offsetOf.lookup(load.getParamAttr())));
    load.replaceAllUsesWith(view);
    load.erase();
  }
  return full;
}

Value FsdpShardPass::reduceGradient(OpBuilder &builder, Location loc,
                                    FlatLayout &layout,
                                    ArrayRef<AdamWOp> adamws) {
  // The unit's full-size gradient, packed in flat order from the gradients
  // its AdamW ops consume.
  llvm::DenseMap<Attribute, Value> gradOf;
  for (AdamWOp adamw : adamws)
    gradOf[adamw.getParamAttr()] = adamw.getGrad();
  SmallVector<Value> grads;
  for (ParamOp param : layout.params) {
    Value grad = gradOf.lookup(FlatSymbolRefAttr::get(param.getSymNameAttr()));
    if (!grad) {
      param.emitOpError() << "has no AdamW in @train_step";
      return {};
    }
    if (auto constant = grad.getDefiningOp<arith::ConstantOp>())
      grad = builder.clone(*constant)->getResult(0);
    grads.push_back(grad);
  }
  auto flatType = RankedTensorType::get({layout.size}, layout.elementType);
  Value flat = PackOp::create(builder, loc, flatType, grads);
  auto shardType = RankedTensorType::get(
      {getMaxShardSize(layout.size, layout.unit.getShardGroupSize())},
      layout.elementType);
  auto unit = FlatSymbolRefAttr::get(layout.unit.getSymNameAttr());
  auto scatter = ReduceScatterOp::create(builder, loc, shardType, flat, unit,
                                         StringAttr());
  nameGroup(scatter, layout);
  FreeOp::create(builder, loc, flat);
  if (replicas == 1)
    return scatter.getResult();
  // Hybrid sharding: the shard group's mean, averaged over the replicas
  // that hold the same shard, is the mean over every rank.
  return AllReduceMeanOp::create(builder, loc, scatter.getResult(), unit)
      .getResult();
}

/// The @train_step to shard, or null after an error: there must be one,
/// unsharded.
static func::FuncOp findStepToShard(ModuleOp module) {
  func::FuncOp step = getTrainStep(module);
  if (!step || !step.getBody().hasOneBlock()) {
    emitError(module.getLoc()) << "fsdp-shard: no single-block function marked "
                                  "fsdp.train_step (run --fsdp-autodiff first)";
    return {};
  }
  if (isShardedStep(step.getBody().front())) {
    emitError(module.getLoc()) << "fsdp-shard: @train_step is already sharded";
    return {};
  }
  return step;
}

LogicalResult FsdpShardPass::buildLayouts(ModuleOp module) {
  SymbolTable symbols(module);
  for (UnitOp unit : module.getOps<UnitOp>()) {
    FlatLayout &layout = layouts[unit.getSymNameAttr()];
    layout.unit = unit;
    for (Attribute ref : unit.getParams()) {
      auto param = symbols.lookup<ParamOp>(
          llvm::cast<FlatSymbolRefAttr>(ref).getValue());
      Type element = param.getTensorType().getElementType();
      if (layout.elementType && layout.elementType != element)
        return unit.emitOpError()
               << "mixes element types " << layout.elementType << " and "
               << element << "; a flat parameter has one";
      layout.elementType = element;
      layout.offsetOf[ref] = layout.size;
      layout.size += param.getNumElements();
      layout.params.push_back(param);
      unitOfParam[ref] = unit.getSymNameAttr();
    }
  }
  for (ParamOp param : module.getOps<ParamOp>())
    if (!unitOfParam.count(FlatSymbolRefAttr::get(param.getSymNameAttr())))
      return param.emitOpError() << "is in no unit; fsdp-shard shards units "
                                    "(run --fsdp-wrap first)";
  return success();
}

/// Every parameter read must be inside a unit region: only those get a
/// gather.
static LogicalResult checkLoadsInRegions(func::FuncOp step) {
  WalkResult stray = step.walk([&](LoadOp load) {
    if (!load->getParentOfType<ComputeOp>()) {
      load.emitOpError() << "reads a parameter outside every unit region; "
                            "after sharding it would not be gathered";
      return WalkResult::interrupt();
    }
    return WalkResult::advance();
  });
  return failure(stray.wasInterrupted());
}

LogicalResult FsdpShardPass::shardRegions(Block &block) {
  // The last backward region of each unit: its reduce-scatter follows it.
  llvm::DenseMap<Attribute, ComputeOp> lastBackward;
  for (ComputeOp compute : block.getOps<ComputeOp>())
    if (compute.getPhase() == Phase::Backward)
      lastBackward[compute.getUnitAttr().getAttr()] = compute;
  for (AdamWOp adamw : block.getOps<AdamWOp>())
    adamws[unitOfParam.lookup(adamw.getParamAttr())].push_back(adamw);

  OpBuilder builder(block.getParentOp()->getContext());
  for (ComputeOp compute :
       llvm::make_early_inc_range(block.getOps<ComputeOp>())) {
    Attribute unit = compute.getUnitAttr().getAttr();
    FlatLayout &layout = layouts[unit];
    Value full = gatherInto(compute, layout);
    builder.setInsertionPointAfter(compute);
    Location loc = compute.getLoc();
    if (lastBackward.lookup(unit) == compute) {
      gradShard[unit] = reduceGradient(builder, loc, layout, adamws[unit]);
      if (!gradShard[unit])
        return failure();
    }
    FreeOp::create(builder, loc, full);
  }
  return success();
}

/// The one weight decay of a unit's AdamW ops (0 for no_weight_decay
/// parameters, whose elements the runtime skips), or failure when two
/// parameters of the unit decay differently.
static FailureOr<float> unitDecay(ArrayRef<AdamWOp> ops, UnitOp unit) {
  float decay = 0.0f;
  for (AdamWOp op : ops) {
    float d = op.getWeightDecay().convertToFloat();
    if (d != 0.0f && decay != 0.0f && d != decay)
      return op.emitOpError() << "uses weight decay " << d << " where unit @"
                              << unit.getSymName() << " already uses " << decay
                              << "; a shard's AdamW has one decay";
    if (d != 0.0f)
      decay = d;
  }
  return decay;
}

LogicalResult FsdpShardPass::shardOptimizer() {
  OpBuilder builder(&getContext());
  for (auto &[unit, ops] : adamws) {
    FlatLayout &layout = layouts[unit];
    AdamWOp first = ops.front();
    FailureOr<float> decay = unitDecay(ops, layout.unit);
    if (failed(decay))
      return failure();
    builder.setInsertionPoint(first);
    Value shard = gradShard.lookup(unit);
    // A unit the loss does not depend on has no backward region: its zero
    // gradient is still reduced, so that every rank runs the same
    // collectives.
    if (!shard &&
        !(shard = reduceGradient(builder, first.getLoc(), layout, ops)))
      return failure();
    AdamWShardOp::create(
        builder, first.getLoc(),
        FlatSymbolRefAttr::get(unit.getContext(), llvm::cast<StringAttr>(unit)),
        shard, first.getStep(), /*scale=*/Value(), first.getLrAttr(),
        first.getBeta1Attr(), first.getBeta2Attr(), first.getEpsAttr(),
        builder.getF32FloatAttr(*decay));
    for (AdamWOp op : ops)
      op.erase();
  }
  return success();
}

void FsdpShardPass::runOnOperation() {
  ModuleOp module = getOperation();
  layouts.clear();
  unitOfParam.clear();
  adamws.clear();
  gradShard.clear();
  func::FuncOp step = findStepToShard(module);
  if (!step)
    return signalPassFailure();
  MeshAttr mesh = getMesh(module);
  replicas = mesh ? mesh.getReplicateSize() : 1;
  Block &block = step.getBody().front();
  if (failed(buildLayouts(module)) || failed(checkLoadsInRegions(step)) ||
      failed(shardRegions(block)) || failed(shardOptimizer()))
    return signalPassFailure();
  // Zero gradients of parameters the loss ignores were cloned into the
  // packs; the originals are dead now.
  for (Operation &op : llvm::make_early_inc_range(block))
    if (llvm::isa<arith::ConstantOp>(op) && op.use_empty())
      op.erase();
}
