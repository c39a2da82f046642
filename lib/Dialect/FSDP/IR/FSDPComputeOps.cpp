//===- FSDPComputeOps.cpp - the compute ops' verifiers --------------------===//
//
// The shape rules of the model ops (FSDPOps.td): the forward ops, their
// backward ops, Llama's ops and fsdp.adamw, each checked with a message that
// names the operand, the expected shape and what was found. The element
// types the kernel table fixes are KernelOpInterface's verifier's
// (FSDPKernelOpInterface.cpp).
//
//===----------------------------------------------------------------------===//

#include "VerifierHelpers.h"
#include "fsdp/Dialect/FSDP/IR/FSDP.h"

#include <cmath>

using namespace mlir;
using namespace mlir::fsdp;
using namespace mlir::fsdp::detail;

//===----------------------------------------------------------------------===//
// Model ops
//===----------------------------------------------------------------------===//

LogicalResult EmbeddingOp::verify() {
  ArrayRef<int64_t> ids = getTokens().getType().getShape();
  if (ids.size() != 2)
    return emitOpError() << "tokens must be a B x T tensor, got "
                         << getTokens().getType();
  Value wpe = getWpe();
  if (tensorOf(getWte()).getRank() != 2 ||
      (wpe && tensorOf(wpe).getRank() != 2))
    return emitOpError() << "token and position tables must be rank 2, got "
                         << getWte().getType()
                         << (wpe ? " and " : " (no position table)")
                         << (wpe ? wpe.getType() : Type());
  int64_t channels = tensorOf(getWte()).getDimSize(1);
  SmallVector<Value> floats = {getWte(), getResult()};
  if (wpe)
    floats.push_back(wpe);
  if (failed(expectSameElementType(*this, floats)))
    return failure();
  if (wpe && tensorOf(wpe).getDimSize(1) != channels)
    return emitOpError() << "position table has " << tensorOf(wpe).getDimSize(1)
                         << " channels but token table has " << channels;
  if (wpe && tensorOf(wpe).getDimSize(0) < ids[1])
    return emitOpError() << "position table has " << tensorOf(wpe).getDimSize(0)
                         << " rows, fewer than the sequence length " << ids[1];
  return expectShape(*this, "result", getResult(), {ids[0], ids[1], channels});
}

LogicalResult LayerNormOp::verify() {
  if (failed(expectMinRank(*this, "input", getInput(), 1)) ||
      failed(expectSameElementType(
          *this, {getInput(), getWeight(), getBias(), getResult()})))
    return failure();
  ArrayRef<int64_t> shape = tensorOf(getInput()).getShape();
  int64_t channels = shape.back();
  if (failed(expectShape(*this, "weight", getWeight(), {channels})) ||
      failed(expectShape(*this, "bias", getBias(), {channels})) ||
      failed(expectShape(*this, "result", getResult(), shape)) ||
      failed(expectShape(*this, "mean", getMean(), shape.drop_back())) ||
      failed(expectShape(*this, "rstd", getRstd(), shape.drop_back())))
    return failure();
  if (!(getEpsilon().convertToFloat() > 0.0f))
    return emitOpError() << "epsilon must be positive";
  return success();
}

LogicalResult LinearOp::verify() {
  SmallVector<Value> floats = {getInput(), getWeight(), getResult()};
  if (getBias())
    floats.push_back(getBias());
  if (failed(expectMinRank(*this, "input", getInput(), 1)) ||
      failed(expectSameElementType(*this, floats)))
    return failure();
  ArrayRef<int64_t> shape = tensorOf(getInput()).getShape();
  RankedTensorType weight = tensorOf(getWeight());
  if (weight.getRank() != 2)
    return emitOpError() << "weight must be rank 2 (out x in), got " << weight;
  if (weight.getDimSize(1) != shape.back())
    return emitOpError() << "weight " << weight << " has "
                         << weight.getDimSize(1)
                         << " input features but the input's last dimension is "
                         << shape.back();
  int64_t out = weight.getDimSize(0);
  if (getBias() && failed(expectShape(*this, "bias", getBias(), {out})))
    return failure();
  return expectShape(*this, "result", getResult(), withLastDim(shape, out));
}

/// The fused qkv tensor of attention and its backward: B x T x 3C with
/// `heads` dividing C, or with fewer kv heads (grouped-query) B x T x
/// (C + 2 kv_heads hs), hs = C / heads, kv_heads dividing heads. Returns
/// {B, T, C} through `btc`.
static LogicalResult verifyQkv(Operation *op, Value qkv, int64_t heads,
                               int64_t kvHeads, SmallVectorImpl<int64_t> &btc) {
  ArrayRef<int64_t> shape = tensorOf(qkv).getShape();
  if (kvHeads != heads) {
    if (heads % kvHeads != 0)
      return op->emitOpError() << "kv_heads (" << kvHeads
                               << ") must divide heads (" << heads << ")";
    // Each head size's worth of columns is one q, k or v head.
    int64_t slots = heads + 2 * kvHeads;
    if (shape.size() != 3 || shape[2] % slots != 0)
      return op->emitOpError()
             << "qkv must be B x T x (heads + 2 kv_heads) hs = B x T x ("
             << slots << " hs), got " << qkv.getType();
    btc.assign({shape[0], shape[1], shape[2] / slots * heads});
    return success();
  }
  if (shape.size() != 3 || shape[2] % 3 != 0)
    return op->emitOpError() << "qkv must be B x T x 3C, got " << qkv.getType();
  int64_t channels = shape[2] / 3;
  if (channels % heads != 0)
    return op->emitOpError()
           << "heads (" << heads << ") must divide the channels (" << channels
           << ")";
  btc.assign({shape[0], shape[1], channels});
  return success();
}

/// What attention of `impl` saves for its backward, given {B, T, C}: the
/// probabilities B x heads x T x T, or one log-sum-exp per row.
static SmallVector<int64_t> savedShape(AttentionImpl impl,
                                       ArrayRef<int64_t> btc, int64_t heads) {
  if (impl == AttentionImpl::Blocked)
    return {btc[0], heads, btc[1]};
  return {btc[0], heads, btc[1], btc[1]};
}

static StringRef savedName(AttentionImpl impl) {
  return impl == AttentionImpl::Blocked ? "saved log-sum-exp"
                                        : "saved probabilities";
}

LogicalResult AttentionOp::verify() {
  SmallVector<int64_t> btc;
  // The blocked form's log-sum-exp is a statistic (f32, checked by the
  // kernel table's rule); the probabilities are an activation.
  SmallVector<Value> floats = {getQkv(), getResult()};
  if (getImpl() == AttentionImpl::Materialized)
    floats.push_back(getSaved());
  if (failed(expectSameElementType(*this, floats)) ||
      failed(verifyQkv(*this, getQkv(), getHeads(), getKvHeadCount(), btc)) ||
      failed(expectShape(*this, "result", getResult(), btc)))
    return failure();
  return expectShape(*this, savedName(getImpl()), getSaved(),
                     savedShape(getImpl(), btc, getHeads()));
}

LogicalResult CrossEntropyOp::verify() {
  // The loss is f32 whatever the logits are (the kernel table's rule).
  if (failed(expectMinRank(*this, "logits", getLogits(), 1)))
    return failure();
  ArrayRef<int64_t> shape = tensorOf(getLogits()).getShape();
  return expectShape(*this, "targets", getTargets(), shape.drop_back());
}

LogicalResult CastOp::verify() {
  return expectShape(*this, "result", getResult(),
                     tensorOf(getSource()).getShape());
}

//===----------------------------------------------------------------------===//
// Backward ops
//===----------------------------------------------------------------------===//

LogicalResult EmbeddingBackwardOp::verify() {
  ArrayRef<int64_t> ids = getTokens().getType().getShape();
  if (ids.size() != 2)
    return emitOpError() << "tokens must be a B x T tensor, got "
                         << getTokens().getType();
  if (failed(expectSameElementType(*this,
                                   {getGrad(), getWteGrad(), getWpeGrad()})))
    return failure();
  if (tensorOf(getWteGrad()).getRank() != 2 ||
      tensorOf(getWpeGrad()).getRank() != 2)
    return emitOpError() << "table gradients must be rank 2";
  int64_t channels = tensorOf(getWteGrad()).getDimSize(1);
  if (failed(
          expectShape(*this, "grad", getGrad(), {ids[0], ids[1], channels})) ||
      failed(expectShape(*this, "position table gradient", getWpeGrad(),
                         {tensorOf(getWpeGrad()).getDimSize(0), channels})))
    return failure();
  if (tensorOf(getWpeGrad()).getDimSize(0) < ids[1])
    return emitOpError() << "position table gradient has fewer rows than the "
                            "sequence length "
                         << ids[1];
  return success();
}

LogicalResult TokenEmbeddingBackwardOp::verify() {
  ArrayRef<int64_t> ids = getTokens().getType().getShape();
  if (ids.size() != 2)
    return emitOpError() << "tokens must be a B x T tensor, got "
                         << getTokens().getType();
  if (failed(expectSameElementType(*this, {getGrad(), getWteGrad()})))
    return failure();
  if (tensorOf(getWteGrad()).getRank() != 2)
    return emitOpError() << "the token table gradient must be rank 2";
  int64_t channels = tensorOf(getWteGrad()).getDimSize(1);
  return expectShape(*this, "grad", getGrad(), {ids[0], ids[1], channels});
}

LogicalResult LayerNormBackwardOp::verify() {
  if (failed(expectMinRank(*this, "input", getInput(), 1)) ||
      failed(expectSameElementType(*this, {getGrad(), getInput(), getWeight(),
                                           getInputGrad(), getWeightGrad(),
                                           getBiasGrad()})))
    return failure();
  ArrayRef<int64_t> shape = tensorOf(getInput()).getShape();
  int64_t channels = shape.back();
  if (failed(expectShape(*this, "grad", getGrad(), shape)) ||
      failed(expectShape(*this, "weight", getWeight(), {channels})) ||
      failed(expectShape(*this, "mean", getMean(), shape.drop_back())) ||
      failed(expectShape(*this, "rstd", getRstd(), shape.drop_back())) ||
      failed(expectShape(*this, "input gradient", getInputGrad(), shape)) ||
      failed(
          expectShape(*this, "weight gradient", getWeightGrad(), {channels})))
    return failure();
  return expectShape(*this, "bias gradient", getBiasGrad(), {channels});
}

LogicalResult LinearGradInputOp::verify() {
  if (failed(expectMinRank(*this, "grad", getGrad(), 1)) ||
      failed(
          expectSameElementType(*this, {getGrad(), getWeight(), getResult()})))
    return failure();
  RankedTensorType weight = tensorOf(getWeight());
  ArrayRef<int64_t> shape = tensorOf(getGrad()).getShape();
  if (weight.getRank() != 2 || weight.getDimSize(0) != shape.back())
    return emitOpError() << "weight must be " << shape.back()
                         << " x K to match the gradient, got " << weight;
  return expectShape(*this, "result", getResult(),
                     withLastDim(shape, weight.getDimSize(1)));
}

LogicalResult LinearGradWeightOp::verify() {
  if (failed(expectMinRank(*this, "grad", getGrad(), 1)) ||
      failed(
          expectSameElementType(*this, {getGrad(), getInput(), getResult()})))
    return failure();
  ArrayRef<int64_t> grad = tensorOf(getGrad()).getShape();
  ArrayRef<int64_t> input = tensorOf(getInput()).getShape();
  if (input.size() != grad.size() || input.drop_back() != grad.drop_back())
    return emitOpError() << "grad " << getGrad().getType() << " and input "
                         << getInput().getType()
                         << " must agree on all but the last dimension";
  return expectShape(*this, "result", getResult(), {grad.back(), input.back()});
}

LogicalResult BiasGradOp::verify() {
  if (failed(expectMinRank(*this, "grad", getGrad(), 1)) ||
      failed(expectSameElementType(*this, {getGrad(), getResult()})))
    return failure();
  return expectShape(*this, "result", getResult(),
                     {tensorOf(getGrad()).getShape().back()});
}

/// Shared rule of the elementwise backward ops: grad, input and result agree.
static LogicalResult verifyElementwiseBackward(Operation *op, Value grad,
                                               Value input, Value result) {
  if (grad.getType() != input.getType() || grad.getType() != result.getType())
    return op->emitOpError()
           << "grad, input and result must have one type, got "
           << grad.getType() << ", " << input.getType() << " and "
           << result.getType();
  return success();
}

LogicalResult GeluBackwardOp::verify() {
  return verifyElementwiseBackward(*this, getGrad(), getInput(), getResult());
}

LogicalResult ReluBackwardOp::verify() {
  return verifyElementwiseBackward(*this, getGrad(), getInput(), getResult());
}

LogicalResult AttentionBackwardOp::verify() {
  SmallVector<int64_t> btc;
  // KernelOpInterface's verifier, which runs first, has checked that the
  // forward's output is there for the blocked kernel and only for it.
  bool blocked = getImpl() == AttentionImpl::Blocked;
  SmallVector<Value> floats = {getGrad(), getQkv(), getResult()};
  if (blocked)
    floats.push_back(getOutput());
  else
    floats.push_back(getSaved());
  if (failed(expectSameElementType(*this, floats)) ||
      failed(verifyQkv(*this, getQkv(), getHeads(), getKvHeadCount(), btc)) ||
      failed(expectShape(*this, "grad", getGrad(), btc)) ||
      (blocked && failed(expectShape(*this, "output", getOutput(), btc))) ||
      failed(expectShape(*this, savedName(getImpl()), getSaved(),
                         savedShape(getImpl(), btc, getHeads()))))
    return failure();
  return expectShape(*this, "result", getResult(),
                     tensorOf(getQkv()).getShape());
}

LogicalResult CrossEntropyBackwardOp::verify() {
  if (failed(expectMinRank(*this, "logits", getLogits(), 1)) ||
      failed(expectSameElementType(*this, {getLogits(), getResult()})))
    return failure();
  ArrayRef<int64_t> shape = tensorOf(getLogits()).getShape();
  if (failed(expectShape(*this, "targets", getTargets(), shape.drop_back())))
    return failure();
  return expectShape(*this, "result", getResult(), shape);
}

//===----------------------------------------------------------------------===//
// Llama's ops: rms_norm, swiglu, rope and their backward
//===----------------------------------------------------------------------===//

LogicalResult RmsNormOp::verify() {
  // rstd is a statistic: f32 by the kernel table's rule, not compared here.
  if (failed(expectMinRank(*this, "input", getInput(), 1)) ||
      failed(
          expectSameElementType(*this, {getInput(), getWeight(), getResult()})))
    return failure();
  ArrayRef<int64_t> shape = tensorOf(getInput()).getShape();
  if (failed(expectShape(*this, "weight", getWeight(), {shape.back()})) ||
      failed(expectShape(*this, "result", getResult(), shape)) ||
      failed(expectShape(*this, "rstd", getRstd(), shape.drop_back())))
    return failure();
  if (!(getEpsilon().convertToFloat() > 0.0f))
    return emitOpError() << "epsilon must be positive";
  return success();
}

LogicalResult RmsNormBackwardOp::verify() {
  if (failed(expectMinRank(*this, "input", getInput(), 1)) ||
      failed(expectSameElementType(*this, {getGrad(), getInput(), getWeight(),
                                           getInputGrad(), getWeightGrad()})))
    return failure();
  ArrayRef<int64_t> shape = tensorOf(getInput()).getShape();
  int64_t channels = shape.back();
  if (failed(expectShape(*this, "grad", getGrad(), shape)) ||
      failed(expectShape(*this, "weight", getWeight(), {channels})) ||
      failed(expectShape(*this, "rstd", getRstd(), shape.drop_back())) ||
      failed(expectShape(*this, "input gradient", getInputGrad(), shape)))
    return failure();
  return expectShape(*this, "weight gradient", getWeightGrad(), {channels});
}

/// swiglu's operands and results: every value of one type (one shape, one
/// element type).
static LogicalResult verifySameTypes(Operation *op, StringRef names,
                                     ArrayRef<Value> values) {
  for (Value v : values.drop_front())
    if (v.getType() != values.front().getType())
      return op->emitOpError()
             << names << " must have one type, got " << values.front().getType()
             << " and " << v.getType();
  return success();
}

LogicalResult SwiGluOp::verify() {
  return verifySameTypes(*this, "gate, up and result",
                         {getGate(), getUp(), getResult()});
}

LogicalResult SwiGluBackwardOp::verify() {
  return verifySameTypes(
      *this, "grad, gate, up and their gradients",
      {getGrad(), getGate(), getUp(), getGateGrad(), getUpGrad()});
}

/// rope's operand and result: B x T x (heads + 2 kv_heads) hs, hs even
/// (the pairs are (i, i + hs/2)), theta positive and finite.
static LogicalResult verifyRope(Operation *op, Value input, Value result,
                                int64_t heads, int64_t kvHeads, float theta) {
  if (input.getType() != result.getType())
    return op->emitOpError() << "result must have the type of its operand "
                             << input.getType() << ", got " << result.getType();
  ArrayRef<int64_t> shape = tensorOf(input).getShape();
  if (shape.size() != 3)
    return op->emitOpError()
           << "qkv must be B x T x (heads + 2 kv_heads) hs, got "
           << input.getType();
  int64_t columns = heads + 2 * kvHeads;
  if (shape[2] % columns != 0)
    return op->emitOpError() << "the last dimension (" << shape[2]
                             << ") must be heads + 2 kv_heads (" << columns
                             << ") times the head size";
  if ((shape[2] / columns) % 2 != 0)
    return op->emitOpError() << "the head size (" << shape[2] / columns
                             << ") must be even: rope rotates pairs (i, i + "
                                "hs/2)";
  if (!(theta > 0.0f) || std::isinf(theta))
    return op->emitOpError() << "theta must be positive and finite";
  return success();
}

LogicalResult RopeOp::verify() {
  return verifyRope(*this, getQkv(), getResult(), getHeads(), getNumKvHeads(),
                    getTheta().convertToFloat());
}

LogicalResult RopeBackwardOp::verify() {
  return verifyRope(*this, getGrad(), getResult(), getHeads(), getNumKvHeads(),
                    getTheta().convertToFloat());
}

// Element-wise and per-row work: the simulator charges them by bytes moved
// (the default: every operand read once, every result written once).

//===----------------------------------------------------------------------===//
// AdamWOp
//===----------------------------------------------------------------------===//

LogicalResult AdamWOp::verify() {
  auto inUnitInterval = [](FloatAttr attr) {
    double v = attr.getValueAsDouble();
    return v >= 0.0 && v < 1.0;
  };
  if (!(getLr().convertToFloat() >= 0.0f))
    return emitOpError() << "lr must be non-negative";
  if (!inUnitInterval(getBeta1Attr()) || !inUnitInterval(getBeta2Attr()))
    return emitOpError() << "beta1 and beta2 must lie in [0, 1), got "
                         << getBeta1Attr().getValueAsDouble() << " and "
                         << getBeta2Attr().getValueAsDouble();
  if (!(getEps().convertToFloat() > 0.0f))
    return emitOpError() << "eps must be positive";
  if (!(getWeightDecay().convertToFloat() >= 0.0f))
    return emitOpError() << "weight_decay must be non-negative";
  return success();
}

LogicalResult AdamWOp::verifySymbolUses(SymbolTableCollection &symbolTable) {
  ParamOp param = lookupParamOfType(*this, symbolTable, getParamAttr(),
                                    getGrad().getType(), "gradient");
  if (!param)
    return failure();
  if (param.getNoWeightDecay() && getWeightDecay().convertToFloat() != 0.0f)
    return emitOpError() << "applies weight decay to " << getParamAttr()
                         << ", which is marked no_weight_decay";
  return success();
}
