//===- FSDPShardingOps.cpp - the sharding ops' verifiers ------------------===//
//
// The rules of the ops FSDPShardingOps.td defines: gathers, reduce-scatters
// and replica all-reduces against their unit's flat size, grouped starts,
// mesh axes, views, packs and gradient clipping.
//
//===----------------------------------------------------------------------===//

#include "VerifierHelpers.h"
#include "fsdp/Dialect/FSDP/IR/FSDP.h"

#include "llvm/Support/CheckedArithmetic.h"

#include <cmath>
#include <limits>

using namespace mlir;
using namespace mlir::fsdp;
using namespace mlir::fsdp::detail;

/// The unit `ref` names, with its flat size (elements over all its
/// parameters) and the module's world size (1 when unsharded).
static UnitOp lookupUnit(Operation *op, SymbolTableCollection &symbolTable,
                         FlatSymbolRefAttr ref, int64_t &flatSize,
                         int64_t &worldSize) {
  auto unit = symbolTable.lookupNearestSymbolFrom<UnitOp>(op, ref);
  if (!unit) {
    op->emitOpError() << "refers to unknown unit " << ref;
    return {};
  }
  // The unit's verifier rejects a flat size that overflows, but symbol
  // uses are verified in module order: this op may come first.
  std::optional<int64_t> flat = 0;
  for (Attribute param : unit.getParams())
    if (auto decl = symbolTable.lookupNearestSymbolFrom<ParamOp>(
            unit, llvm::cast<FlatSymbolRefAttr>(param)))
      if (flat)
        flat = llvm::checkedAdd(*flat, decl.getNumElements());
  if (!flat) {
    op->emitOpError() << "refers to unit " << ref
                      << ", whose flat parameter has more elements than "
                         "int64 can count";
    return {};
  }
  flatSize = *flat;
  worldSize = unit.getShardGroupSize();
  // An expert-parallel unit is sharded over its expert shard group, every
  // other over the shard axis; the replica all-reduce is neither.
  auto axis = op->getAttrOfType<StringAttr>("axis");
  bool expertGroup = axis && axis.getValue() == MeshAttr::kExpertShardGroup;
  if (llvm::isa<AllGatherOp, AllGatherStartOp, ReduceScatterOp,
                ReduceScatterStartOp>(op) &&
      expertGroup != unit.getExpertParallel()) {
    op->emitOpError() << "runs over "
                      << (expertGroup ? "the expert shard group"
                                      : "the shard axis")
                      << " for unit " << ref << ", which is "
                      << (unit.getExpertParallel() ? "" : "not ")
                      << "expert-parallel";
    return {};
  }
  return unit;
}

static LogicalResult expectElements(Operation *op, StringRef what, Value v,
                                    int64_t elements, StringRef why) {
  int64_t n = tensorOf(v).getNumElements();
  if (n == elements)
    return success();
  return op->emitOpError() << what << " has " << n << " elements, expected "
                           << elements << " (" << why << ")";
}

/// A gather's result is the unit's whole flat parameter.
static LogicalResult verifyGather(Operation *op,
                                  SymbolTableCollection &symbolTable,
                                  FlatSymbolRefAttr unit, Value result) {
  int64_t flat, world;
  if (!lookupUnit(op, symbolTable, unit, flat, world))
    return failure();
  return expectElements(op, "result", result, flat, "the unit's flat size");
}

/// A reduce-scatter takes the unit's full gradient (`source`, or none for
/// AdamW) and gives the largest shard.
static LogicalResult verifyShard(Operation *op,
                                 SymbolTableCollection &symbolTable,
                                 FlatSymbolRefAttr unit, Value source,
                                 StringRef what, Value shard) {
  int64_t flat, world;
  if (!lookupUnit(op, symbolTable, unit, flat, world) ||
      (source && failed(expectElements(op, "source", source, flat,
                                       "the unit's flat size"))))
    return failure();
  return expectElements(op, what, shard, getMaxShardSize(flat, world),
                        "the largest shard, ceil(flat size / world size)");
}

LogicalResult
AllGatherOp::verifySymbolUses(SymbolTableCollection &symbolTable) {
  return verifyGather(*this, symbolTable, getUnitAttr(), getResult());
}

LogicalResult
AllGatherStartOp::verifySymbolUses(SymbolTableCollection &symbolTable) {
  return verifyGather(*this, symbolTable, getUnitAttr(), getResult());
}

/// A grouped start directly follows a start of the same kind on the same
/// stream: the group is one contiguous run of starts, issued together.
template <typename StartOp> static LogicalResult verifyGrouped(StartOp op) {
  if (!op.getGrouped())
    return success();
  auto previous = llvm::dyn_cast_or_null<StartOp>(op->getPrevNode());
  if (!previous)
    return op.emitOpError() << "is grouped but does not directly follow a '"
                            << StartOp::getOperationName() << "' to group with";
  if (previous.getStream() != op.getStream())
    return op.emitOpError()
           << "is grouped with a start on stream " << previous.getStream()
           << " but runs on stream " << op.getStream();
  return success();
}

/// A collective's group is an axis of the mesh: the sharding collectives
/// (gathers, reduce-scatters, clipping's sum) run over "shard", the replica
/// all-reduce over "replicate"; leaving `axis` out means "shard".
static LogicalResult verifyAxis(Operation *op, std::optional<StringRef> axis,
                                StringRef expected) {
  if (!axis || *axis == expected)
    return success();
  return op->emitOpError() << "runs over mesh axis \"" << *axis
                           << "\"; it must run over \"" << expected << "\"";
}

/// A unit's gather or reduce-scatter: over the shard axis, or an
/// expert-parallel unit's expert shard group (checked against the unit
/// with its symbol).
static LogicalResult verifyUnitAxis(Operation *op,
                                    std::optional<StringRef> axis) {
  if (axis && *axis == MeshAttr::kExpertShardGroup)
    return success();
  return verifyAxis(op, axis, MeshAttr::kShardAxis);
}

/// A grouped start joins the collective before it, so the two must run
/// over one group.
template <typename StartOp> static LogicalResult verifyGroupedAxis(StartOp op) {
  if (!op.getGrouped())
    return success();
  auto previous = llvm::cast<StartOp>(op->getPrevNode());
  if (previous.getAxis() == op.getAxis())
    return success();
  return op.emitOpError() << "is grouped with a start over another mesh axis; "
                             "a fused collective runs over one group";
}

template <typename StartOp> static LogicalResult verifyStart(StartOp op) {
  if (failed(verifyGrouped(op)) || failed(verifyGroupedAxis(op)))
    return failure();
  return verifyUnitAxis(op, op.getAxis());
}

LogicalResult AllGatherStartOp::verify() { return verifyStart(*this); }
LogicalResult ReduceScatterStartOp::verify() { return verifyStart(*this); }
LogicalResult AllGatherOp::verify() { return verifyUnitAxis(*this, getAxis()); }
LogicalResult ReduceScatterOp::verify() {
  return verifyUnitAxis(*this, getAxis());
}
LogicalResult AllReduceSumOp::verify() {
  return verifyAxis(*this, getAxis(), MeshAttr::kShardAxis);
}

// The replica all-reduce runs over "replicate" (its result has the source's
// type: AllTypesMatch).
LogicalResult AllReduceMeanOp::verify() {
  return verifyAxis(*this, getAxis(), MeshAttr::kReplicateAxis);
}
LogicalResult AllReduceMeanStartOp::verify() {
  return verifyAxis(*this, getAxis(), MeshAttr::kReplicateAxis);
}
LogicalResult
AllReduceMeanOp::verifySymbolUses(SymbolTableCollection &symbolTable) {
  return verifyShard(*this, symbolTable, getUnitAttr(), Value(), "source",
                     getSource());
}
LogicalResult
AllReduceMeanStartOp::verifySymbolUses(SymbolTableCollection &symbolTable) {
  return verifyShard(*this, symbolTable, getUnitAttr(), Value(), "source",
                     getSource());
}

LogicalResult
ReduceScatterOp::verifySymbolUses(SymbolTableCollection &symbolTable) {
  return verifyShard(*this, symbolTable, getUnitAttr(), getSource(), "result",
                     getResult());
}

LogicalResult
ReduceScatterStartOp::verifySymbolUses(SymbolTableCollection &symbolTable) {
  return verifyShard(*this, symbolTable, getUnitAttr(), getSource(), "result",
                     getResult());
}

LogicalResult
AdamWShardOp::verifySymbolUses(SymbolTableCollection &symbolTable) {
  return verifyShard(*this, symbolTable, getUnitAttr(), Value(), "gradient",
                     getGrad());
}

LogicalResult
GradSqSumOp::verifySymbolUses(SymbolTableCollection &symbolTable) {
  return verifyShard(*this, symbolTable, getUnitAttr(), Value(), "gradient",
                     getGrad());
}

LogicalResult ClipCoefficientOp::verify() {
  double maxNorm = getMaxNorm().convertToDouble();
  if (!(maxNorm > 0.0) || std::isinf(maxNorm))
    return emitOpError() << "max_norm must be positive and finite, got "
                         << maxNorm;
  return success();
}

LogicalResult ViewOp::verify() {
  if (failed(expectSameElementType(*this, {getSource(), getResult()})))
    return failure();
  int64_t size = tensorOf(getSource()).getNumElements();
  int64_t n = tensorOf(getResult()).getNumElements();
  // offset + n > size, without overflowing.
  if (n > size || int64_t(getOffset()) > size - n)
    return emitOpError() << "elements " << getOffset() << " .. "
                         << int64_t(getOffset()) + n - 1
                         << " lie outside the source's " << size << " elements";
  return success();
}

LogicalResult PackOp::verify() {
  SmallVector<Value> all(getValues().begin(), getValues().end());
  all.push_back(getResult());
  if (failed(expectSameElementType(*this, all)))
    return failure();
  std::optional<int64_t> total = 0;
  for (Value v : getValues())
    if (total)
      total = llvm::checkedAdd(*total, tensorOf(v).getNumElements());
  if (!total)
    return emitOpError() << "packs more than "
                         << std::numeric_limits<int64_t>::max()
                         << " elements, the most the compiler can count";
  return expectElements(*this, "result", getResult(), *total,
                        "the sum of the operands' elements");
}
