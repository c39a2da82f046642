//===- FSDPOpUtils.cpp - queries and rewrites on fsdp ops -----------------===//
//
// The free functions FSDP.h declares over the ops, for the passes: which
// collective an op is and on which unit and axis, the train step, the
// gathers in flight, and switching attention between its forms.
//
//===----------------------------------------------------------------------===//

#include "VerifierHelpers.h"
#include "fsdp/Dialect/FSDP/IR/FSDP.h"

#include "mlir/IR/Builders.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;
using namespace mlir::fsdp;
using namespace mlir::fsdp::detail;

Value mlir::fsdp::getGatheredTensor(Operation *op) {
  if (auto gather = llvm::dyn_cast_or_null<AllGatherOp>(op))
    return gather.getResult();
  if (auto start = llvm::dyn_cast_or_null<AllGatherStartOp>(op))
    return start.getResult();
  return {};
}

bool mlir::fsdp::isFullGradient(Value v) {
  if (auto cast = v.getDefiningOp<CastOp>())
    v = cast.getSource();
  return v.getDefiningOp<PackOp>() != nullptr;
}

Value mlir::fsdp::getScatteredShard(Operation *op) {
  if (auto scatter = llvm::dyn_cast_or_null<ReduceScatterOp>(op))
    return scatter.getResult();
  if (auto start = llvm::dyn_cast_or_null<ReduceScatterStartOp>(op))
    return start.getResult();
  return {};
}

bool mlir::fsdp::isLocalCopy(Operation *op) {
  Value gathered = getGatheredTensor(op), shard = getScatteredShard(op);
  if (!gathered && !shard)
    return false;
  auto unit =
      SymbolTable::lookupNearestSymbolFrom<UnitOp>(op, getCollectiveUnit(op));
  if (!unit || unit.getExpertParallel() || unit.getShardGroupSize() != 1)
    return false;
  auto elementOf = [](Type type) {
    return llvm::cast<ShapedType>(type).getElementType();
  };
  if (shard) // mixed precision may reduce in bf16 into an f32 shard
    return elementOf(shard.getType()) == elementOf(op->getOperand(0).getType());
  // The shard holds the parameters' type; mixed precision gathers bf16,
  // from the unit's copy of its shard in that type where it keeps one.
  Type element = elementOf(gathered.getType());
  if (unit.getShardCopy() == element)
    return true;
  return llvm::all_of(unit.getParams(), [&](Attribute ref) {
    auto param = SymbolTable::lookupNearestSymbolFrom<ParamOp>(
        unit, llvm::cast<FlatSymbolRefAttr>(ref));
    return param && param.getTensorType().getElementType() == element;
  });
}

FlatSymbolRefAttr mlir::fsdp::getCollectiveUnit(Operation *op) {
  return llvm::TypeSwitch<Operation *, FlatSymbolRefAttr>(op)
      .Case<AllGatherOp, AllGatherStartOp, ReduceScatterOp,
            ReduceScatterStartOp, AllReduceMeanOp, AllReduceMeanStartOp>(
          [](auto op) { return op.getUnitAttr(); })
      .Default([](Operation *) { return FlatSymbolRefAttr(); });
}

Value mlir::fsdp::getReplicaMean(Operation *op) {
  if (auto mean = llvm::dyn_cast_or_null<AllReduceMeanOp>(op))
    return mean.getResult();
  if (auto start = llvm::dyn_cast_or_null<AllReduceMeanStartOp>(op))
    return start.getResult();
  return {};
}

StringRef mlir::fsdp::getCollectiveAxis(Operation *op) {
  return llvm::TypeSwitch<Operation *, StringRef>(op)
      .Case<AllGatherOp, AllGatherStartOp, ReduceScatterOp,
            ReduceScatterStartOp, AllReduceSumOp>(
          [](auto op) { return op.getAxis().value_or(MeshAttr::kShardAxis); })
      .Case<AllReduceMeanOp, AllReduceMeanStartOp, AllToAllOp, AllToAllStartOp,
            AllToAllCountsOp>([](auto op) { return op.getAxis(); })
      .Default([](Operation *) { return StringRef(); });
}

func::FuncOp mlir::fsdp::getTrainStep(ModuleOp module) {
  for (func::FuncOp func : module.getOps<func::FuncOp>())
    if (func->hasAttr(FSDPDialect::kTrainStepAttrName))
      return func;
  return {};
}

Operation *mlir::fsdp::getFirstReader(Block &block, Value value) {
  Operation *first = block.getTerminator();
  for (Operation *user : value.getUsers())
    if (Operation *top = block.findAncestorOpInBlock(*user);
        top && top->isBeforeInBlock(first))
      first = top;
  return first;
}

bool mlir::fsdp::isShardedStep(Block &block) {
  return llvm::any_of(
      block, [](Operation &op) { return bool(getGatheredTensor(&op)); });
}

void mlir::fsdp::walkInflightGathers(
    Block &block, llvm::function_ref<bool(Operation *, int64_t)> visit) {
  llvm::DenseMap<Operation *, Operation *> leaderOf;
  llvm::DenseMap<Operation *, int64_t> unfreed; // by bucket leader
  Operation *leader = nullptr;
  int64_t inflight = 0;
  for (Operation &op : block) {
    if (auto start = llvm::dyn_cast<AllGatherStartOp>(op)) {
      if (!start.getGrouped() || !leader)
        leader = start;
      leaderOf[start] = leader;
      if (unfreed[leader]++ == 0)
        ++inflight;
    } else if (llvm::isa<AllGatherOp>(op)) {
      leaderOf[&op] = &op;
      unfreed[&op] = 1;
      ++inflight;
    } else if (auto free = llvm::dyn_cast<FreeOp>(op)) {
      Operation *def = free.getValue().getDefiningOp();
      if (Operation *bucket = def ? leaderOf.lookup(def) : nullptr)
        if (--unfreed[bucket] == 0)
          --inflight;
    }
    if (!visit(&op, inflight))
      return;
  }
}

//===----------------------------------------------------------------------===//
// Attention's forms
//===----------------------------------------------------------------------===//

bool mlir::fsdp::hasBlockedKernels(AttentionOp op) {
  ArrayRef<int64_t> qkv = tensorOf(op.getQkv()).getShape();
  int64_t headSize = qkv[2] / (op.getHeads() + 2 * op.getKvHeadCount());
  return headSize <= 128 && qkv[1] <= int64_t(65535) * 16;
}

std::optional<int64_t> mlir::fsdp::enumParamValue(Attribute attr) {
  if (auto scaling = llvm::dyn_cast_or_null<RopeScalingAttr>(attr))
    return int64_t(scaling.getValue());
  if (auto scoring = llvm::dyn_cast_or_null<MoeScoringAttr>(attr))
    return int64_t(scoring.getValue());
  // A flag (moe_router's normalize) is 0 or 1 (an i1's integer reads -1).
  if (auto flag = llvm::dyn_cast_or_null<BoolAttr>(attr))
    return int64_t(flag.getValue());
  return std::nullopt;
}

void mlir::fsdp::setAttentionImpl(AttentionOp op, AttentionImpl impl) {
  assert(op.getSaved().use_empty() && "the saved result changes type");
  auto qkv = llvm::cast<RankedTensorType>(op.getQkv().getType());
  int64_t batch = qkv.getDimSize(0), seq = qkv.getDimSize(1),
          heads = op.getHeads();
  SmallVector<int64_t> saved = {batch, heads, seq};
  if (impl == AttentionImpl::Materialized)
    saved.push_back(seq);
  OpBuilder builder(op);
  auto rebuilt = AttentionOp::create(
      builder, op.getLoc(), op.getResult().getType(),
      RankedTensorType::get(saved, qkv.getElementType()), op.getQkv(),
      op.getHeadsAttr(), AttentionImplAttr::get(op.getContext(), impl),
      op.getKvHeadsAttr(), op.getWindowAttr());
  rebuilt->setDiscardableAttrs(op->getDiscardableAttrDictionary());
  op.getResult().replaceAllUsesWith(rebuilt.getResult());
  op.erase();
}
