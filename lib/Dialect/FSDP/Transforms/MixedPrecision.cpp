//===- MixedPrecision.cpp - bf16 compute over f32 master shards -----------===//
//
// FSDP2's MixedPrecisionPolicy(param_dtype, reduce_dtype) on the sharded
// @train_step. The shards at rest keep the parameters' type (the master
// weights, their gradient shards and AdamW's moments); what changes is
// everything in between:
//
//   * a gather's result takes `param-dtype`: each rank rounds its shard
//     into its own slot of the gathered buffer, and the collective moves
//     2 bytes per element (see fsdp.all_gather);
//   * every compute op that reads a gathered parameter runs in that type,
//     and so do the ops downstream of it: activations and gradients take
//     it too, except what the kernel table says is F32 (layer norm's
//     statistics, attention's log-sum-exp, the loss);
//   * a unit's full-size gradient is cast to `reduce-dtype` before its
//     reduce-scatter; a reduced shard not in the master type is cast back
//     to it where anything but AdamW reads it, and AdamW reads it as it is
//     (fsdp.adamw_shard widens a bf16 gradient itself, exactly: the cast's
//     numbers without its pass and its f32 buffer);
//   * at a shard group of one, where nothing is reduced, a gradient in a
//     narrower type than `reduce-dtype` is not widened before its local
//     copy either (before or after it, widening is exact): AdamW reads the
//     bf16 gradient directly;
//   * at a shard group of one, each unit keeps a copy of its shard in the
//     compute type (`shard_copy`), which AdamW writes as it updates the
//     shard: its gathers become local copies, and the regions read the
//     copy in place instead of rounding the shard twice a step.
//
// The pass rewrites types in program order (every definition before its
// uses, a region's arguments before its body, its results after), so each
// op sees its operands' final types.
//
//===----------------------------------------------------------------------===//

#include "fsdp/Dialect/FSDP/Transforms/Passes.h"
#include "fsdp/runtime/PlanFormat.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/IR/Builders.h"

namespace mlir::fsdp {
#define GEN_PASS_DEF_FSDPMIXEDPRECISIONPASS
#include "fsdp/Dialect/FSDP/Transforms/Passes.h.inc"
} // namespace mlir::fsdp

using namespace mlir;
using namespace mlir::fsdp;
namespace plan = ::fsdp::plan;

FailureOr<Type> mlir::fsdp::parseFloatType(MLIRContext *context,
                                           StringRef name) {
  if (name == "f32")
    return Type(Float32Type::get(context));
  if (name == "bf16")
    return Type(BFloat16Type::get(context));
  return failure();
}

namespace {
Type elementOf(Value v) {
  return llvm::cast<ShapedType>(v.getType()).getElementType();
}

RankedTensorType withElement(Type type, Type element) {
  return RankedTensorType::get(llvm::cast<RankedTensorType>(type).getShape(),
                               element);
}

/// Rewrites the sharded step for one policy.
class Converter {
public:
  Converter(MLIRContext *context, Type param, Type reduce)
      : builder(context), param(param), reduce(reduce) {}

  LogicalResult convertBlock(Block &block);

private:
  LogicalResult convertOp(Operation *op);
  void convertKernel(Operation *op, const plan::KernelInfo &info);
  void convertCompute(ComputeOp compute);
  void convertPack(PackOp pack);
  void convertScatter(ReduceScatterOp scatter);
  /// `v` in element type `element`: itself, a splat constant rebuilt in
  /// that type, or an fsdp.cast right after its definition (one per value
  /// and type, shared by all uses).
  Value castTo(Value v, Type element);

  OpBuilder builder;
  Type param, reduce;
  llvm::DenseMap<std::pair<Value, Type>, Value> casts;
};
} // namespace

Value Converter::castTo(Value v, Type element) {
  if (elementOf(v) == element)
    return v;
  Value &cast = casts[{v, element}];
  if (cast)
    return cast;
  OpBuilder::InsertionGuard guard(builder);
  if (auto arg = llvm::dyn_cast<BlockArgument>(v))
    builder.setInsertionPointToStart(arg.getOwner());
  else
    builder.setInsertionPointAfter(v.getDefiningOp());
  RankedTensorType type = withElement(v.getType(), element);
  if (auto constant = v.getDefiningOp<arith::ConstantOp>())
    if (auto splat = llvm::dyn_cast<SplatElementsAttr>(constant.getValue())) {
      APFloat value = splat.getSplatValue<APFloat>();
      bool lost = false;
      value.convert(llvm::cast<FloatType>(element).getFloatSemantics(),
                    APFloat::rmNearestTiesToEven, &lost);
      return cast =
                 arith::ConstantOp::create(builder, v.getLoc(), type,
                                           DenseElementsAttr::get(type, value));
    }
  return cast = CastOp::create(builder, v.getLoc(), type, v);
}

void Converter::convertKernel(Operation *op, const plan::KernelInfo &info) {
  // The op runs in `param` when one of its Float operands already is.
  bool narrow = false;
  for (auto [i, operand] : llvm::enumerate(op->getOperands()))
    narrow |= info.ins[i].rule == plan::ElementRule::Float &&
              elementOf(operand) == param;
  Type f32 = Float32Type::get(op->getContext());
  if (!narrow) {
    // An op without Float operands (a mixture-of-experts router) still
    // reads its F32 ones in f32, also where a bf16 value reaches them.
    for (auto [i, operand] : llvm::enumerate(op->getOperands()))
      if (info.ins[i].rule == plan::ElementRule::F32 &&
          elementOf(operand) != f32)
        op->setOperand(i, castTo(operand, f32));
    return;
  }
  for (auto [i, operand] : llvm::enumerate(op->getOperands())) {
    plan::ElementRule rule = info.ins[i].rule;
    if (rule == plan::ElementRule::Float)
      op->setOperand(i, castTo(operand, param));
    else if (rule == plan::ElementRule::F32)
      op->setOperand(i, castTo(operand, f32));
  }
  for (auto [i, result] : llvm::enumerate(op->getResults()))
    if (info.outs[i].rule == plan::ElementRule::Float)
      result.setType(withElement(result.getType(), param));
}

void Converter::convertCompute(ComputeOp compute) {
  Block &body = compute.getBodyBlock();
  for (auto [arg, input] : llvm::zip(body.getArguments(), compute.getInputs()))
    arg.setType(input.getType());
  (void)convertBlock(body);
  auto yield = llvm::cast<YieldOp>(body.getTerminator());
  for (auto [result, value] :
       llvm::zip(compute.getResults(), yield.getValues()))
    result.setType(value.getType());
}

void Converter::convertPack(PackOp pack) {
  // A full-size gradient is in the compute type, also one of constants
  // only (a unit the loss ignores).
  for (OpOperand &operand : pack->getOpOperands())
    operand.set(castTo(operand.get(), param));
  pack.getResult().setType(withElement(pack.getType(), param));
}

/// Whether `scatter` of `unit` (its unit) is no expert-parallel unit's,
/// has a shard group of one and no replica all-reduce: a local copy that
/// reduces nothing.
static bool reducesNothing(ReduceScatterOp scatter, UnitOp unit) {
  if (!unit || unit.getExpertParallel() || unit.getShardGroupSize() != 1)
    return false;
  return llvm::none_of(scatter.getResult().getUsers(), [](Operation *user) {
    return llvm::isa<AllReduceMeanOp>(user);
  });
}

/// Whether `unit` holds a mixture of experts' selection bias, whose
/// gradient slot carries a load signal that AdamW's f32 path reads.
static bool holdsSelectionBias(UnitOp unit) {
  return llvm::any_of(unit.getParams(), [&](Attribute ref) {
    auto param = SymbolTable::lookupNearestSymbolFrom<ParamOp>(
        unit, llvm::cast<FlatSymbolRefAttr>(ref));
    return param && param.getSelectionBias();
  });
}

void Converter::convertScatter(ReduceScatterOp scatter) {
  Value full = scatter.getSource();
  Type master = elementOf(scatter.getResult());
  auto unit = SymbolTable::lookupNearestSymbolFrom<UnitOp>(
      scatter, scatter.getUnitAttr());
  // Widening is exact: where nothing is reduced, the gradient keeps its
  // narrower type through the local copy, and the widening goes into
  // AdamW below.
  Type reduceAs = reduce;
  if (elementOf(full).getIntOrFloatBitWidth() <
          reduce.getIntOrFloatBitWidth() &&
      reducesNothing(scatter, unit) && !holdsSelectionBias(unit))
    reduceAs = elementOf(full);
  if (elementOf(full) != reduceAs) {
    // FSDP2's reduce_dtype: the full-size gradient is cast, then reduced.
    // The uncast one is freed right after the cast, the cast one where
    // the uncast one was freed.
    builder.setInsertionPoint(scatter);
    Value cast = CastOp::create(builder, scatter.getLoc(),
                                withElement(full.getType(), reduceAs), full);
    scatter.getSourceMutable().assign(cast);
    for (Operation *user : llvm::make_early_inc_range(full.getUsers()))
      if (auto free = llvm::dyn_cast<FreeOp>(user)) {
        builder.setInsertionPoint(free);
        FreeOp::create(builder, free.getLoc(), cast);
        free->moveAfter(cast.getDefiningOp());
      }
  }
  Value shard = scatter.getResult();
  shard.setType(withElement(shard.getType(), reduceAs));
  // Hybrid sharding: the replica all-reduce averages the shard in the
  // reduce type too, and the cast follows it.
  if (shard.hasOneUse())
    if (auto mean =
            llvm::dyn_cast<AllReduceMeanOp>(*shard.getUsers().begin())) {
      mean.getResult().setType(llvm::cast<RankedTensorType>(shard.getType()));
      shard = mean.getResult();
    }
  if (reduceAs == master)
    return;
  // AdamW reads the reduced shard in its own type, except a selection
  // bias's unit (its update reads an f32 load signal). Anything else
  // reads it in the master type: cast where it is used, so that the
  // reduce-scatter's wait, which the schedule puts before the first use,
  // stays late and the reduction overlaps the rest of the backward.
  bool adamwWidens = !unit || !holdsSelectionBias(unit);
  for (OpOperand &use : llvm::make_early_inc_range(shard.getUses())) {
    if (adamwWidens && llvm::isa<AdamWShardOp>(use.getOwner()))
      continue;
    builder.setInsertionPoint(use.getOwner());
    use.set(CastOp::create(builder, scatter.getLoc(),
                           withElement(shard.getType(), master), shard));
  }
}

LogicalResult Converter::convertOp(Operation *op) {
  if (auto gather = llvm::dyn_cast<AllGatherOp>(op)) {
    gather.getResult().setType(withElement(gather.getType(), param));
    return success();
  }
  if (auto compute = llvm::dyn_cast<ComputeOp>(op)) {
    convertCompute(compute);
    return success();
  }
  if (auto view = llvm::dyn_cast<ViewOp>(op)) {
    view.getResult().setType(
        withElement(view.getType(), elementOf(view.getSource())));
    return success();
  }
  if (auto pack = llvm::dyn_cast<PackOp>(op)) {
    convertPack(pack);
    return success();
  }
  if (auto scatter = llvm::dyn_cast<ReduceScatterOp>(op)) {
    convertScatter(scatter);
    return success();
  }
  if (llvm::isa<CastOp>(op))
    return success(); // the model's own: their types are the model's
  if (auto exchange = llvm::dyn_cast<AllToAllOp>(op)) {
    // Rows move in the type they have (bf16 rows: half the bytes).
    exchange.getResult().setType(withElement(exchange.getResult().getType(),
                                             elementOf(exchange.getInput())));
    return success();
  }
  if (auto kernel = llvm::dyn_cast<KernelOpInterface>(op)) {
    convertKernel(op, *plan::findKernel(kernel.getKernelOpcode()));
    return success();
  }
  if (llvm::isa<AllGatherStartOp, ReduceScatterStartOp, AllReduceMeanStartOp>(
          op))
    return op->emitOpError()
           << "is already scheduled: run --fsdp-mixed-precision before "
              "--fsdp-schedule";
  return success(); // frees, AdamW on shards, constants, the return
}

LogicalResult Converter::convertBlock(Block &block) {
  // Casts this inserts come after the op being converted; they are
  // already in their final types.
  SmallVector<Operation *> ops;
  for (Operation &op : block)
    ops.push_back(&op);
  for (Operation *op : ops)
    if (failed(convertOp(op)))
      return failure();
  return success();
}

/// With `compute` (null: none), marks every unit over a shard group of
/// one (no expert slice) to keep its shard in that type too: then its
/// gathers in that type are local copies (isLocalCopy), which the
/// lowering elides, reading the copy. Every other unit keeps none, also
/// where the module it was given said otherwise.
static void setShardCopies(ModuleOp module, Type compute) {
  for (UnitOp unit : module.getOps<UnitOp>())
    if (compute && !unit.getExpertParallel() && unit.getShardGroupSize() == 1)
      unit.setShardCopy(compute);
    else
      unit.removeShardCopyAttr();
}

namespace {
struct FsdpMixedPrecisionPass
    : public mlir::fsdp::impl::FsdpMixedPrecisionPassBase<
          FsdpMixedPrecisionPass> {
  using FsdpMixedPrecisionPassBase::FsdpMixedPrecisionPassBase;
  void runOnOperation() override;
};
} // namespace

void FsdpMixedPrecisionPass::runOnOperation() {
  ModuleOp module = getOperation();
  MLIRContext *context = &getContext();
  // Not given: what the model asks for (fsdp-gen --dtype bf16), else f32.
  FailureOr<Type> paramType = Type(Float32Type::get(context));
  if (!paramDtype.empty())
    paramType = parseFloatType(context, paramDtype);
  else if (Type requested = getRequestedParamDtype(module))
    paramType = requested;
  FailureOr<Type> reduceType = parseFloatType(context, reduceDtype);
  if (failed(paramType) || failed(reduceType)) {
    emitError(module.getLoc())
        << "fsdp-mixed-precision: param-dtype and reduce-dtype expect f32 or "
           "bf16, got '"
        << paramDtype << "' and '" << reduceDtype << "'";
    return signalPassFailure();
  }
  func::FuncOp step = getTrainStep(module);
  if (!step || !step.getBody().hasOneBlock() ||
      !isShardedStep(step.getBody().front())) {
    emitError(module.getLoc())
        << "fsdp-mixed-precision: no sharded function marked "
           "fsdp.train_step (run --fsdp-shard first)";
    return signalPassFailure();
  }
  for (ParamOp p : module.getOps<ParamOp>())
    if (!p.getTensorType().getElementType().isF32()) {
      p.emitOpError() << "is " << p.getType()
                      << ": mixed precision keeps f32 master parameters";
      return signalPassFailure();
    }
  Converter converter(context, *paramType, *reduceType);
  if (failed(converter.convertBlock(step.getBody().front())))
    return signalPassFailure();
  // --fsdp-fit-memory's choice, where it made one, over the option.
  bool copies = shardCopy;
  if (auto choice =
          module->getAttrOfType<DictionaryAttr>(kScheduleChoiceAttrName))
    if (auto chosen = choice.getAs<BoolAttr>("shard_copy"))
      copies = chosen.getValue();
  setShardCopies(module, copies && !paramType->isF32() ? *paramType : Type());
}
