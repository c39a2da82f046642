//===- FSDPMoeDifferentiation.cpp - backward of the mixture-of-experts ops ===//
//
// The gradients docs/moe.md derives ("The block, backward"), one op each.
// Index results (a router's choices, a sort's order, positions, offsets)
// carry none: the choice is piecewise constant.
//
//===----------------------------------------------------------------------===//

#include "fsdp/Dialect/FSDP/IR/FSDP.h"

#include "mlir/IR/Builders.h"

using namespace mlir;
using namespace mlir::fsdp;

LogicalResult MoeRouterOp::buildBackward(OpBuilder &builder,
                                         ValueRange resultGrads,
                                         SmallVectorImpl<Value> &operandGrads) {
  if (resultGrads[1])
    return emitOpError("result #1 (the chosen experts) holds indices and "
                       "cannot be differentiated through");
  Value logitsGrad = MoeRouterBackwardOp::create(
      builder, getLoc(), getLogits().getType(), resultGrads[0], getLogits(),
      getExperts(), getScoringAttr(), getNormalizeAttr(), getScaleAttr());
  operandGrads.assign({logitsGrad});
  // The selection bias chooses, never weighs: in the place of its gradient
  // its load signal, which its parameter's selection_bias update reads.
  if (getBias())
    operandGrads.push_back(MoeBiasSignalOp::create(
        builder, getLoc(), getBias().getType(), getExperts()));
  return success();
}

LogicalResult
MoePermuteOp::buildBackward(OpBuilder &builder, ValueRange resultGrads,
                            SmallVectorImpl<Value> &operandGrads) {
  // The backward sums each token's rows by the sort's inverse permutation.
  auto sort = getOrder().getDefiningOp<MoeSortOp>();
  if (!sort || sort.getOrder() != getOrder())
    return emitOpError("differentiates only an order that an fsdp.moe_sort "
                       "computes (its backward reads the sort's position)");
  Value inputGrad =
      MoePermuteBackwardOp::create(builder, getLoc(), getInput().getType(),
                                   resultGrads[0], sort.getPosition());
  operandGrads.assign({inputGrad, Value()});
  return success();
}

LogicalResult
MoeGroupedLinearOp::buildBackward(OpBuilder &builder, ValueRange resultGrads,
                                  SmallVectorImpl<Value> &operandGrads) {
  Value grad = resultGrads[0];
  Value inputGrad = MoeGroupedLinearGradInputOp::create(
      builder, getLoc(), getInput().getType(), grad, getWeight(), getOffsets());
  Value weightGrad = MoeGroupedLinearGradWeightOp::create(
      builder, getLoc(), getWeight().getType(), grad, getInput(), getOffsets());
  // The backward fills the rows the forward did (expert parallelism).
  if (Attribute active = (*this)->getAttr(kActiveRowsAttrName)) {
    inputGrad.getDefiningOp()->setAttr(kActiveRowsAttrName, active);
    weightGrad.getDefiningOp()->setAttr(kActiveRowsAttrName, active);
  }
  operandGrads.assign({inputGrad, weightGrad, Value()});
  return success();
}

LogicalResult
MoeCombineOp::buildBackward(OpBuilder &builder, ValueRange resultGrads,
                            SmallVectorImpl<Value> &operandGrads) {
  auto backward = MoeCombineBackwardOp::create(
      builder, getLoc(), getRows().getType(), getWeights().getType(),
      resultGrads[0], getRows(), getWeights(), getPosition());
  operandGrads.assign(
      {backward.getRowsGrad(), backward.getWeightsGrad(), Value()});
  return success();
}

LogicalResult
MoeAuxStatsOp::buildBackward(OpBuilder &builder, ValueRange resultGrads,
                             SmallVectorImpl<Value> &operandGrads) {
  Value logitsGrad = MoeAuxStatsBackwardOp::create(
      builder, getLoc(), getLogits().getType(), resultGrads[0], getLogits());
  // The earlier layers' sums pass into the result unchanged.
  operandGrads.assign({logitsGrad, Value()});
  if (getSum())
    operandGrads.push_back(resultGrads[0]);
  return success();
}

LogicalResult
MoeAuxLossOp::buildBackward(OpBuilder &builder, ValueRange resultGrads,
                            SmallVectorImpl<Value> &operandGrads) {
  Value statsGrad = MoeAuxLossBackwardOp::create(
      builder, getLoc(), getStats().getType(), resultGrads[0], getStats(),
      getTopKAttr(), getCoefAttr());
  // The training loss is added unscaled.
  operandGrads.assign({statsGrad, resultGrads[0]});
  return success();
}
