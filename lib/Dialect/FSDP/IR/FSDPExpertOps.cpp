//===- FSDPExpertOps.cpp - expert-parallel dispatch: verifiers, backward --===//
//
// The two all-to-alls' rules (their group, their counts' shapes, their rows'
// width) and the gradients of the ops that move rows: an all-to-all's is the
// reverse all-to-all, a regroup's the inverse permutation. The kernel ops'
// shapes (moe_expert_counts, moe_regroup, moe_local_offsets) are checked by
// the kernel table's rules like every kernel op's.
//
//===----------------------------------------------------------------------===//

#include "fsdp/Dialect/FSDP/IR/FSDP.h"

#include "mlir/IR/Builders.h"

using namespace mlir;
using namespace mlir::fsdp;

/// An all-to-all runs over the mesh's expert axis, and its counts are
/// `G x L` matrices.
static LogicalResult verifyExpertExchange(Operation *op, StringRef axis,
                                          ArrayRef<Value> counts) {
  if (axis != MeshAttr::kExpertAxis)
    return op->emitOpError()
           << "runs over mesh axis \"" << axis << "\"; it must run over \""
           << MeshAttr::kExpertAxis << "\"";
  auto first = llvm::cast<RankedTensorType>(counts.front().getType());
  for (Value v : counts) {
    auto type = llvm::cast<RankedTensorType>(v.getType());
    if (type.getRank() != 2 || type.getShape() != first.getShape())
      return op->emitOpError()
             << "needs counts of one shape G x L (ranks x experts each), got "
             << first << " and " << type;
  }
  if (MeshAttr mesh = getMesh(op); mesh && mesh.getExpertSize() > 1 &&
                                   first.getDimSize(0) != mesh.getExpertSize())
    return op->emitOpError() << "has counts for " << first.getDimSize(0)
                             << " ranks, but the mesh's expert groups have "
                             << mesh.getExpertSize();
  return success();
}

LogicalResult AllToAllCountsOp::verify() {
  return verifyExpertExchange(*this, getAxis(), {getCounts(), getRecv()});
}

/// The rows' exchange, in place or started: its counts, and rows of one
/// width and element type each way.
template <typename Exchange>
static LogicalResult verifyRowsExchange(Exchange op) {
  if (failed(
          verifyExpertExchange(op, op.getAxis(), {op.getSend(), op.getRecv()})))
    return failure();
  auto input = llvm::cast<RankedTensorType>(op.getInput().getType());
  auto result = llvm::cast<RankedTensorType>(op.getResult().getType());
  if (input.getRank() != 2 || result.getRank() != 2 ||
      input.getDimSize(1) != result.getDimSize(1) ||
      input.getElementType() != result.getElementType())
    return op.emitOpError()
           << "moves rows: input and result must be N x C and M x C of one "
              "element type, got "
           << input << " and " << result;
  return success();
}

LogicalResult AllToAllOp::verify() { return verifyRowsExchange(*this); }

LogicalResult AllToAllStartOp::verify() { return verifyRowsExchange(*this); }

LogicalResult AllToAllOp::buildBackward(OpBuilder &builder,
                                        ValueRange resultGrads,
                                        SmallVectorImpl<Value> &operandGrads) {
  // Each row came from one row of one rank: its gradient goes back there,
  // the same exchange with the two directions' counts swapped.
  Value inputGrad =
      AllToAllOp::create(builder, getLoc(), getInput().getType(),
                         resultGrads[0], getRecv(), getSend(), getAxisAttr());
  operandGrads.assign({inputGrad, Value(), Value()});
  return success();
}

LogicalResult
MoeRegroupOp::buildBackward(OpBuilder &builder, ValueRange resultGrads,
                            SmallVectorImpl<Value> &operandGrads) {
  // A permutation's gradient is its inverse (rows past the counts are
  // zero both ways).
  Value inputGrad =
      MoeRegroupOp::create(builder, getLoc(), getInput().getType(),
                           resultGrads[0], getCounts(), !getInverse());
  operandGrads.assign({inputGrad, Value()});
  return success();
}

LogicalResult
MoeCompactOp::buildBackward(OpBuilder &builder, ValueRange resultGrads,
                            SmallVectorImpl<Value> &operandGrads) {
  // Packing and unpacking move kept rows and zero the cut ones: each is
  // the other's gradient.
  Value inputGrad = MoeCompactOp::create(builder, getLoc(),
                                         getInput().getType(), resultGrads[0],
                                         getCounts(), getKept(), !getInverse());
  operandGrads.assign({inputGrad, Value(), Value()});
  return success();
}
