//===- FSDPOps.cpp - fsdp dialect op verifiers and builders ---------------===//
//
// Every rule the ops impose is checked here with a message that names the
// operand, the expected shape and what was found.
//
//===----------------------------------------------------------------------===//

#include "fsdp/Dialect/FSDP/IR/FSDP.h"
#include "fsdp/runtime/PlanFormat.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/TypeSwitch.h"
#include "llvm/Support/CheckedArithmetic.h"

#include <cmath>
#include <limits>

using namespace mlir;
using namespace mlir::fsdp;

namespace {
RankedTensorType tensorOf(Value v) {
  return llvm::cast<RankedTensorType>(v.getType());
}

/// Emits "<what> must have shape AxB, got tensor<...>" unless `v` has
/// exactly `shape` (element type checked separately).
LogicalResult expectShape(Operation *op, StringRef what, Value v,
                          ArrayRef<int64_t> shape) {
  RankedTensorType type = tensorOf(v);
  if (type.getShape() == shape)
    return success();
  InFlightDiagnostic diag = op->emitOpError() << what << " must have shape ";
  if (shape.empty())
    diag << "[] (a scalar)";
  llvm::interleave(
      shape, [&](int64_t d) { diag << d; }, [&] { diag << "x"; });
  return diag << ", got " << type;
}

/// All float operands and results of a model op share one element type
/// (f32 today, bf16 later); statistics of layer_norm are exempt (f32).
LogicalResult expectSameElementType(Operation *op, ArrayRef<Value> values) {
  Type expected;
  for (Value v : values) {
    Type element = tensorOf(v).getElementType();
    if (!expected) {
      expected = element;
      continue;
    }
    if (element != expected)
      return op->emitOpError()
             << "expects one element type for all float operands and "
                "results, got "
             << expected << " and " << element;
  }
  return success();
}

LogicalResult expectMinRank(Operation *op, StringRef what, Value v,
                            int64_t rank) {
  if (tensorOf(v).getRank() >= rank)
    return success();
  return op->emitOpError() << what << " must have rank >= " << rank << ", got "
                           << v.getType();
}

SmallVector<int64_t> withLastDim(ArrayRef<int64_t> shape, int64_t last) {
  SmallVector<int64_t> result(shape.drop_back());
  result.push_back(last);
  return result;
}
} // namespace

//===----------------------------------------------------------------------===//
// ParamOp
//===----------------------------------------------------------------------===//

int64_t ParamOp::getSizeInBytes() {
  return mlir::fsdp::getSizeInBytes(getType());
}

LogicalResult ParamOp::verify() {
  return verifySizeFits(*this, "parameter @" + getSymName(), getType());
}

//===----------------------------------------------------------------------===//
// UnitOp
//===----------------------------------------------------------------------===//

LogicalResult UnitOp::verify() {
  if (getParams().empty())
    return emitOpError() << "unit @" << getSymName()
                         << " must contain at least one parameter";
  llvm::SmallDenseSet<Attribute> seen;
  for (Attribute param : getParams())
    if (!seen.insert(param).second)
      return emitOpError() << "lists parameter "
                           << llvm::cast<FlatSymbolRefAttr>(param)
                           << " more than once";
  return success();
}

LogicalResult UnitOp::verifySymbolUses(SymbolTableCollection &symbolTable) {
  llvm::SmallDenseSet<Attribute> mine;
  // The flat parameter sharding builds: its elements and bytes must fit
  // int64 as each parameter's do.
  std::optional<int64_t> flatBytes = 0;
  for (Attribute attr : getParams()) {
    auto ref = llvm::cast<FlatSymbolRefAttr>(attr);
    Operation *target = symbolTable.lookupNearestSymbolFrom(*this, ref);
    if (!target)
      return emitOpError() << "refers to unknown parameter " << ref;
    auto param = llvm::dyn_cast<ParamOp>(target);
    if (!param)
      return emitOpError() << "lists " << ref << ", which is not an fsdp.param";
    if (flatBytes)
      if (std::optional<int64_t> bytes = getCheckedSizeInBytes(param.getType()))
        flatBytes = llvm::checkedAdd(*flatBytes, *bytes);
    mine.insert(attr);
  }
  if (!flatBytes)
    return emitOpError() << "has a flat parameter (its parameters together) "
                            "of more than "
                         << std::numeric_limits<int64_t>::max()
                         << " bytes, the most the compiler can count (int64)";
  // A parameter in two units would be gathered and reduced twice. Report it
  // at the later unit, pointing at the earlier one. The first unit of the
  // module checks all of them with one map: a check per unit against every
  // earlier unit would be quadratic in the number of units.
  for (Operation *op = (*this)->getPrevNode(); op; op = op->getPrevNode())
    if (llvm::isa<UnitOp>(op))
      return success();
  llvm::DenseMap<Attribute, UnitOp> firstListedIn;
  bool ok = true;
  for (Operation &op :
       llvm::make_range(getOperation()->getIterator(),
                        (*this)->getBlock()->getOperations().end())) {
    auto unit = llvm::dyn_cast<UnitOp>(op);
    if (!unit)
      continue;
    for (Attribute param : unit.getParams()) {
      auto [it, inserted] = firstListedIn.try_emplace(param, unit);
      if (inserted || it->second == unit)
        continue;
      InFlightDiagnostic diag =
          unit.emitOpError()
          << "parameter " << llvm::cast<FlatSymbolRefAttr>(param)
          << " is already in unit @" << it->second.getSymName();
      diag.attachNote(it->second.getLoc()) << "first listed here";
      ok = false;
      break;
    }
  }
  return success(ok);
}

//===----------------------------------------------------------------------===//
// LoadOp
//===----------------------------------------------------------------------===//

/// Resolves `ref` to a parameter whose type is `type`; on failure reports
/// it at `op`, naming what carried the type ("result", "gradient").
static ParamOp lookupParamOfType(Operation *op,
                                 SymbolTableCollection &symbolTable,
                                 FlatSymbolRefAttr ref, Type type,
                                 StringRef what) {
  auto param = symbolTable.lookupNearestSymbolFrom<ParamOp>(op, ref);
  if (!param) {
    op->emitOpError() << "refers to unknown parameter " << ref;
    return {};
  }
  if (param.getType() != type) {
    op->emitOpError() << what << " type " << type
                      << " does not match parameter " << ref << " of type "
                      << param.getType();
    return {};
  }
  return param;
}

LogicalResult LoadOp::verifySymbolUses(SymbolTableCollection &symbolTable) {
  if (!lookupParamOfType(*this, symbolTable, getParamAttr(), getType(),
                         "result"))
    return failure();
  auto compute = (*this)->getParentOfType<ComputeOp>();
  if (!compute)
    return success();
  auto unit = symbolTable.lookupNearestSymbolFrom<UnitOp>(
      compute, compute.getUnitAttr());
  if (unit && !llvm::is_contained(unit.getParams(), getParamAttr()))
    return emitOpError() << "loads " << getParamAttr()
                         << ", which is not in unit @" << unit.getSymName()
                         << " of the enclosing fsdp.compute";
  return success();
}

//===----------------------------------------------------------------------===//
// ComputeOp
//===----------------------------------------------------------------------===//

/// The phase prints as a bare keyword: `fsdp.compute @h.0 forward (...)`.
static ParseResult parsePhase(OpAsmParser &parser, PhaseAttr &phase) {
  StringRef keyword;
  SMLoc loc = parser.getCurrentLocation();
  if (parser.parseKeyword(&keyword))
    return failure();
  std::optional<Phase> value = symbolizePhase(keyword);
  if (!value)
    return parser.emitError(loc)
           << "expected phase forward or backward, got '" << keyword << "'";
  phase = PhaseAttr::get(parser.getContext(), *value);
  return success();
}

static void printPhase(OpAsmPrinter &printer, Operation *, PhaseAttr phase) {
  printer << stringifyPhase(phase.getValue());
}

/// The body of `fsdp.compute` is parsed as an isolated name scope, as the
/// op is isolated from above: a name inside it never resolves to a value
/// outside, and, the reason this is custom, a forward reference outside
/// (`%x` used before any definition) can never be resolved by a definition
/// inside. MLIR's parser otherwise lets it, and when the region then fails to
/// parse (a repeated block label, say) it frees the region's values while
/// the outer op still uses them: a use after free that aborts the process
/// after the right error (test/fuzz/crashers/model-repeated-label.model). On
/// failure the region's values also drop any use left outside, whatever
/// took it, before the region is freed.
static ParseResult parseComputeBody(OpAsmParser &parser, Region &body) {
  if (failed(parser.parseRegion(body, /*arguments=*/{},
                                /*enableNameShadowing=*/true))) {
    for (Block &block : body)
      block.dropAllDefinedValueUses();
    return failure();
  }
  ComputeOp::ensureTerminator(
      body, parser.getBuilder(),
      parser.getEncodedSourceLoc(parser.getCurrentLocation()));
  return success();
}

/// The body as the declarative format printed `$body`: entry block
/// arguments always, the implicit `fsdp.yield` only when it yields.
static void printComputeBody(OpAsmPrinter &printer, Operation *, Region &body) {
  bool printTerminator = true;
  if (Operation *term = body.empty() ? nullptr : body.front().getTerminator())
    printTerminator = !term->getAttrDictionary().empty() ||
                      term->getNumOperands() != 0 || term->getNumResults() != 0;
  printer.printRegion(body, /*printEntryBlockArgs=*/true,
                      /*printBlockTerminators=*/printTerminator);
}

void ComputeOp::build(OpBuilder &builder, OperationState &state,
                      FlatSymbolRefAttr unit, Phase phase, ValueRange inputs,
                      TypeRange resultTypes) {
  state.addAttribute(getUnitAttrName(state.name), unit);
  state.addAttribute(getPhaseAttrName(state.name),
                     PhaseAttr::get(builder.getContext(), phase));
  state.addOperands(inputs);
  state.addTypes(resultTypes);
  Region *body = state.addRegion();
  Block *block = new Block();
  body->push_back(block);
  for (Value input : inputs)
    block->addArgument(input.getType(), input.getLoc());
}

LogicalResult ComputeOp::verify() {
  if ((*this)->getParentOfType<ComputeOp>())
    return emitOpError() << "cannot be nested in another fsdp.compute";
  Block &body = getBodyBlock();
  if (body.getNumArguments() != getInputs().size())
    return emitOpError() << "has " << getInputs().size()
                         << " inputs but its body takes "
                         << body.getNumArguments() << " arguments";
  for (auto [index, pair] :
       llvm::enumerate(llvm::zip(getInputs(), body.getArguments())))
    if (std::get<0>(pair).getType() != std::get<1>(pair).getType())
      return emitOpError() << "input #" << index << " has type "
                           << std::get<0>(pair).getType()
                           << " but body argument #" << index << " has type "
                           << std::get<1>(pair).getType();
  auto yield = llvm::cast<YieldOp>(body.getTerminator());
  if (yield.getValues().getTypes() != getResultTypes())
    return emitOpError() << "yields " << yield.getValues().getTypes()
                         << " but its results are " << getResultTypes();
  return success();
}

LogicalResult ComputeOp::verifySymbolUses(SymbolTableCollection &symbolTable) {
  Operation *target = symbolTable.lookupNearestSymbolFrom(*this, getUnitAttr());
  if (!target)
    return emitOpError() << "refers to unknown unit " << getUnitAttr();
  if (!llvm::isa<UnitOp>(target))
    return emitOpError() << "refers to " << getUnitAttr()
                         << ", which is not an fsdp.unit";
  return success();
}

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

//===----------------------------------------------------------------------===//
// Sharding ops
//===----------------------------------------------------------------------===//

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
  worldSize = getShardSize(op);
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
  return verifyAxis(op, op.getAxis(), MeshAttr::kShardAxis);
}

LogicalResult AllGatherStartOp::verify() { return verifyStart(*this); }
LogicalResult ReduceScatterStartOp::verify() { return verifyStart(*this); }
LogicalResult AllGatherOp::verify() {
  return verifyAxis(*this, getAxis(), MeshAttr::kShardAxis);
}
LogicalResult ReduceScatterOp::verify() {
  return verifyAxis(*this, getAxis(), MeshAttr::kShardAxis);
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

void GradSqSumOp::getKernelScratch(SmallVectorImpl<RankedTensorType> &types) {
  // The GPU's per-block partial sums, a double each (the CPU needs none).
  types.push_back(RankedTensorType::get({::fsdp::plan::kGradSqSumScratch},
                                        Float32Type::get(getContext())));
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
      .Case<AllReduceMeanOp, AllReduceMeanStartOp>(
          [](auto op) { return op.getAxis(); })
      .Default([](Operation *) { return StringRef(); });
}

func::FuncOp mlir::fsdp::getTrainStep(ModuleOp module) {
  for (func::FuncOp func : module.getOps<func::FuncOp>())
    if (func->hasAttr(FSDPDialect::kTrainStepAttrName))
      return func;
  return {};
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
// KernelOpInterface: the kernel, scratch and costs of each compute op
//===----------------------------------------------------------------------===//

namespace plan = ::fsdp::plan;

/// The kernel table's element rules: F32 operands (statistics, the loss,
/// AdamW's state) are f32 and Float ones are f32 or bf16, all of one
/// type: the element type the kernel runs in.
static LogicalResult verifyElementRules(Operation *op,
                                        const plan::KernelInfo &info,
                                        ArrayRef<RankedTensorType> scratch) {
  Type element;
  auto check = [&](const plan::OperandInfo &rule, Type type,
                   const llvm::Twine &what) -> LogicalResult {
    Type t = llvm::cast<ShapedType>(type).getElementType();
    bool known = t.isF32() || t.isBF16();
    if (rule.rule == plan::ElementRule::F32 && !t.isF32())
      return op->emitOpError() << what << " (" << StringRef(rule.name)
                               << ") must be f32, got " << type;
    if (rule.rule == plan::ElementRule::TokenIds ||
        rule.rule == plan::ElementRule::F32)
      return success();
    if (!known)
      return op->emitOpError() << what << " (" << StringRef(rule.name)
                               << ") must be f32 or bf16, got " << type;
    if (rule.rule != plan::ElementRule::Float)
      return success();
    if (element && element != t)
      return op->emitOpError()
             << "expects one element type for all float operands and "
                "results, got "
             << element << " and " << t;
    element = t;
    return success();
  };
  for (auto [i, type] : llvm::enumerate(op->getOperandTypes()))
    if (failed(check(info.ins[i], type, "operand #" + llvm::Twine(i))))
      return failure();
  for (auto [i, type] : llvm::enumerate(op->getResultTypes()))
    if (failed(check(info.outs[i], type, "result #" + llvm::Twine(i))))
      return failure();
  for (auto [i, type] : llvm::enumerate(scratch))
    if (failed(check(info.outs[op->getNumResults() + i], type,
                     "scratch #" + llvm::Twine(i))))
      return failure();
  return success();
}

// fsdp-tblgen checked each op's ODS against its kernel (FSDPKernels.td):
// the kernel is named after the op, its inputs are the op's operands, its
// results the op's results. What ODS cannot tell is checked here: the
// operand count of an op with several kernels (attention's impl), the
// scratch buffers that getKernelScratch (C++) adds, and the element types.
LogicalResult mlir::fsdp::detail::verifyKernelOp(Operation *op) {
  auto kernelOp = llvm::cast<KernelOpInterface>(op);
  const plan::KernelInfo *found = plan::findKernel(kernelOp.getKernelOpcode());
  assert(found && "getKernelOpcode returns a plan::Opcode");
  const plan::KernelInfo &info = *found;
  StringRef kernel(info.name);
  if (op->getNumOperands() < info.minInputs ||
      op->getNumOperands() > info.maxInputs)
    return op->emitOpError()
           << "has " << op->getNumOperands() << " operands, but kernel '"
           << kernel << "' takes " << info.minInputs << " to " << info.maxInputs
           << " inputs";
  SmallVector<RankedTensorType> scratch;
  kernelOp.getKernelScratch(scratch);
  size_t outputs = op->getNumResults() + scratch.size();
  if (outputs != info.outputs)
    return op->emitOpError()
           << "has " << op->getNumResults() << " results and " << scratch.size()
           << " scratch buffers, which are not the " << info.outputs
           << " outputs of kernel '" << kernel << "'";
  return verifyElementRules(op, info, scratch);
}

namespace {
double numElements(Value v) { return double(tensorOf(v).getNumElements()); }

/// Q K^T and P V: 2 * 2 * B * H * T * T * hs = 4 * T * (B * T * C), from a
/// B x T x C tensor (the output or its gradient): qkv is not 3C wide when
/// there are fewer kv heads, and the products do not shrink with them.
double attentionFlops(Value btc) {
  RankedTensorType type = tensorOf(btc);
  return 4.0 * type.getDimSize(1) * double(type.getNumElements());
}
} // namespace

// GEMMs: 2 FLOPs per multiply-add.
double LinearOp::getFlops() {
  return 2.0 * numElements(getResult()) * tensorOf(getWeight()).getDimSize(1);
}
double LinearGradInputOp::getFlops() {
  return 2.0 * numElements(getGrad()) * tensorOf(getWeight()).getDimSize(1);
}
double LinearGradWeightOp::getFlops() {
  return 2.0 * numElements(getGrad()) * tensorOf(getInput()).getShape().back();
}
double AttentionOp::getFlops() { return attentionFlops(getResult()); }
/// Twice the forward's products (dP = dO V^T, dV = P^T dO, dQ = dS K,
/// dK = dS^T Q); the blocked form also recomputes S = Q K^T.
double AttentionBackwardOp::getFlops() {
  return (getImpl() == AttentionImpl::Blocked ? 2.5 : 2.0) *
         attentionFlops(getGrad());
}
// Every other op keeps the interface's default, 0 FLOPs: element-wise ops,
// reductions and gathers are charged by bytes moved.

/// The gradient of the probabilities, one row at a time; the blocked form
/// needs none.
void AttentionBackwardOp::getKernelScratch(
    SmallVectorImpl<RankedTensorType> &scratch) {
  if (getImpl() == AttentionImpl::Materialized)
    scratch.push_back(tensorOf(getSaved()));
}

// One kernel per implementation.
uint32_t AttentionOp::getKernelOpcode() {
  return uint32_t(getImpl() == AttentionImpl::Blocked
                      ? ::fsdp::plan::Opcode::AttentionBlocked
                      : ::fsdp::plan::Opcode::Attention);
}
StringRef AttentionOp::getKernelVariant() {
  return getImpl() == AttentionImpl::Blocked ? "blocked" : "";
}
uint32_t AttentionBackwardOp::getKernelOpcode() {
  return uint32_t(getImpl() == AttentionImpl::Blocked
                      ? ::fsdp::plan::Opcode::AttentionBackwardBlocked
                      : ::fsdp::plan::Opcode::AttentionBackward);
}
StringRef AttentionBackwardOp::getKernelVariant() {
  return getImpl() == AttentionImpl::Blocked ? "blocked" : "";
}

/// Per-row losses, so that a GPU reduces them with many blocks and in a
/// fixed order (the CPU does not need them).
void CrossEntropyOp::getKernelScratch(
    SmallVectorImpl<RankedTensorType> &scratch) {
  scratch.push_back(RankedTensorType::get(tensorOf(getTargets()).getShape(),
                                          Float32Type::get(getContext())));
}

//===----------------------------------------------------------------------===//
// Helpers
//===----------------------------------------------------------------------===//

/// Rebuilds `op` in form `impl`, with the saved result's type of that form.
bool mlir::fsdp::hasBlockedKernels(AttentionOp op) {
  ArrayRef<int64_t> qkv = tensorOf(op.getQkv()).getShape();
  int64_t headSize = qkv[2] / (op.getHeads() + 2 * op.getKvHeadCount());
  return headSize <= 128 && qkv[1] <= int64_t(65535) * 16;
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
      op.getKvHeadsAttr());
  rebuilt->setDiscardableAttrs(op->getDiscardableAttrDictionary());
  op.getResult().replaceAllUsesWith(rebuilt.getResult());
  op.erase();
}

#define GET_OP_CLASSES
#include "fsdp/Dialect/FSDP/IR/FSDPOps.cpp.inc"
