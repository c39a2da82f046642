//===- FSDPDifferentiation.cpp - backward of each differentiable op -------===//
//
// Each differentiable op turns the gradients of its results into the
// gradients of its operands, at the builder's insertion point. The backward
// ops read saved activations (inputs, layer_norm statistics, attention
// probabilities) as ordinary SSA values of the forward.
//
//===----------------------------------------------------------------------===//

#include "fsdp/Dialect/FSDP/IR/FSDP.h"

#include "mlir/IR/Builders.h"

using namespace mlir;
using namespace mlir::fsdp;

/// Saved statistics (layer_norm's mean/rstd, attention's probabilities)
/// carry no gradient: a model that differentiates through them is not one
/// we can train, so say so at the op.
static LogicalResult rejectGradsOn(Operation *op, ValueRange resultGrads,
                                   ArrayRef<unsigned> statistics) {
  for (unsigned index : statistics)
    if (resultGrads[index])
      return op->emitOpError()
             << "result #" << index
             << " is a saved statistic and cannot be differentiated through";
  return success();
}

LogicalResult EmbeddingOp::buildBackward(OpBuilder &builder,
                                         ValueRange resultGrads,
                                         SmallVectorImpl<Value> &operandGrads) {
  if (!getWpe()) {
    operandGrads.assign({Value(), TokenEmbeddingBackwardOp::create(
                                      builder, getLoc(), getWte().getType(),
                                      resultGrads[0], getTokens())});
    return success();
  }
  auto backward = EmbeddingBackwardOp::create(
      builder, getLoc(), getWte().getType(), getWpe().getType(), resultGrads[0],
      getTokens());
  operandGrads.assign({Value(), backward.getWteGrad(), backward.getWpeGrad()});
  return success();
}

LogicalResult LayerNormOp::buildBackward(OpBuilder &builder,
                                         ValueRange resultGrads,
                                         SmallVectorImpl<Value> &operandGrads) {
  if (failed(rejectGradsOn(*this, resultGrads, {1, 2})))
    return failure();
  auto backward = LayerNormBackwardOp::create(
      builder, getLoc(), getInput().getType(), getWeight().getType(),
      getBias().getType(), resultGrads[0], getInput(), getWeight(), getMean(),
      getRstd());
  operandGrads.assign({backward.getInputGrad(), backward.getWeightGrad(),
                       backward.getBiasGrad()});
  return success();
}

LogicalResult LinearOp::buildBackward(OpBuilder &builder,
                                      ValueRange resultGrads,
                                      SmallVectorImpl<Value> &operandGrads) {
  Value grad = resultGrads[0];
  Value inputGrad = LinearGradInputOp::create(
      builder, getLoc(), getInput().getType(), grad, getWeight());
  Value weightGrad = LinearGradWeightOp::create(
      builder, getLoc(), getWeight().getType(), grad, getInput());
  operandGrads.assign({inputGrad, weightGrad});
  if (getBias())
    operandGrads.push_back(
        BiasGradOp::create(builder, getLoc(), getBias().getType(), grad));
  return success();
}

LogicalResult AddOp::buildBackward(OpBuilder &, ValueRange resultGrads,
                                   SmallVectorImpl<Value> &operandGrads) {
  // d(a + b) passes the gradient through to both operands unchanged.
  operandGrads.assign({resultGrads[0], resultGrads[0]});
  return success();
}

LogicalResult GeluOp::buildBackward(OpBuilder &builder, ValueRange resultGrads,
                                    SmallVectorImpl<Value> &operandGrads) {
  operandGrads.assign({GeluBackwardOp::create(builder, getLoc(), getType(),
                                              resultGrads[0], getInput())});
  return success();
}

LogicalResult ReluOp::buildBackward(OpBuilder &builder, ValueRange resultGrads,
                                    SmallVectorImpl<Value> &operandGrads) {
  operandGrads.assign({ReluBackwardOp::create(builder, getLoc(), getType(),
                                              resultGrads[0], getInput())});
  return success();
}

LogicalResult CastOp::buildBackward(OpBuilder &builder, ValueRange resultGrads,
                                    SmallVectorImpl<Value> &operandGrads) {
  operandGrads.assign({CastOp::create(builder, getLoc(), getSource().getType(),
                                      resultGrads[0])});
  return success();
}

LogicalResult AttentionOp::buildBackward(OpBuilder &builder,
                                         ValueRange resultGrads,
                                         SmallVectorImpl<Value> &operandGrads) {
  if (failed(rejectGradsOn(*this, resultGrads, {1})))
    return failure();
  // The blocked backward reads the forward's output too (saved anyway: it
  // is the input of the projection that follows).
  Value output = getImpl() == AttentionImpl::Blocked ? getResult() : Value();
  operandGrads.assign({AttentionBackwardOp::create(
      builder, getLoc(), getQkv().getType(), resultGrads[0], getQkv(),
      getSaved(), output, getHeadsAttr(), getImplAttr(), getKvHeadsAttr(),
      getWindowAttr())});
  return success();
}

LogicalResult
CrossEntropyOp::buildBackward(OpBuilder &builder, ValueRange resultGrads,
                              SmallVectorImpl<Value> &operandGrads) {
  operandGrads.assign({CrossEntropyBackwardOp::create(
                           builder, getLoc(), getLogits().getType(),
                           resultGrads[0], getLogits(), getTargets()),
                       Value()});
  return success();
}

//===----------------------------------------------------------------------===//
// Llama's ops
//===----------------------------------------------------------------------===//

LogicalResult RmsNormOp::buildBackward(OpBuilder &builder,
                                       ValueRange resultGrads,
                                       SmallVectorImpl<Value> &operandGrads) {
  if (failed(rejectGradsOn(*this, resultGrads, {1})))
    return failure();
  auto backward = RmsNormBackwardOp::create(
      builder, getLoc(), getInput().getType(), getWeight().getType(),
      resultGrads[0], getInput(), getWeight(), getRstd());
  operandGrads.assign({backward.getInputGrad(), backward.getWeightGrad()});
  return success();
}

LogicalResult SwiGluOp::buildBackward(OpBuilder &builder,
                                      ValueRange resultGrads,
                                      SmallVectorImpl<Value> &operandGrads) {
  auto backward = SwiGluBackwardOp::create(
      builder, getLoc(), getGate().getType(), getUp().getType(), resultGrads[0],
      getGate(), getUp());
  operandGrads.assign({backward.getGateGrad(), backward.getUpGrad()});
  return success();
}

LogicalResult QkNormOp::buildBackward(OpBuilder &builder,
                                      ValueRange resultGrads,
                                      SmallVectorImpl<Value> &operandGrads) {
  if (failed(rejectGradsOn(*this, resultGrads, {1})))
    return failure();
  auto backward = QkNormBackwardOp::create(
      builder, getLoc(), getQkv().getType(), getQWeight().getType(),
      getKWeight().getType(), resultGrads[0], getQkv(), getQWeight(),
      getKWeight(), getRstd(), getHeadsAttr(), getKvHeadsAttr());
  operandGrads.assign({backward.getQkvGrad(), backward.getQWeightGrad(),
                       backward.getKWeightGrad()});
  return success();
}

LogicalResult RopeOp::buildBackward(OpBuilder &builder, ValueRange resultGrads,
                                    SmallVectorImpl<Value> &operandGrads) {
  // A rotation's gradient is the inverse rotation; it reads no activation,
  // so rope saves nothing for the backward.
  operandGrads.assign({RopeBackwardOp::create(
      builder, getLoc(), getQkv().getType(), resultGrads[0], getHeadsAttr(),
      getKvHeadsAttr(), getThetaAttr(), getScalingAttr(), getFactorAttr(),
      getLowFreqFactorAttr(), getHighFreqFactorAttr(),
      getOriginalMaxPositionsAttr(), getAttentionFactorAttr(),
      getCorrectionLowAttr(), getCorrectionHighAttr())});
  return success();
}
