//===- Autodiff.cpp - build @train_step from @forward ---------------------===//
//
// Reverse-mode differentiation of a single-block forward, in three steps:
// flatten the unit regions (remembering each op's unit), append the backward
// of every op in reverse order plus one AdamW per parameter, then outline
// forward and backward ops back into per-unit regions.
//
//===----------------------------------------------------------------------===//

#include "fsdp/Dialect/FSDP/Analysis/UnitRegions.h"
#include "fsdp/Dialect/FSDP/Transforms/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/IR/Builders.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "llvm/ADT/DenseSet.h"

#include <cmath>
#include <cstdio>

namespace mlir::fsdp {
#define GEN_PASS_DEF_FSDPAUTODIFFPASS
#include "fsdp/Dialect/FSDP/Transforms/Passes.h.inc"
} // namespace mlir::fsdp

using namespace mlir;
using namespace mlir::fsdp;

namespace {
/// Gradients built so far, and where new backward ops go.
class GradientBuilder {
public:
  GradientBuilder(OpBuilder &builder, UnitTagMap &tags)
      : builder(builder), tags(tags) {}

  Value lookup(Value v) const { return grads.lookup(v); }
  void set(Value v, Value grad) { grads[v] = grad; }

  /// Adds `grad` into the gradient of `key` (a value, or a parameter's
  /// symbol for parameter gradients), tagging any add with `tag`.
  template <typename Key>
  void accumulate(llvm::DenseMap<Key, Value> &map, Key key, Value grad,
                  UnitTag tag) {
    if (!grad)
      return;
    auto [it, inserted] = map.try_emplace(key, grad);
    if (inserted)
      return;
    auto add = AddOp::create(builder, grad.getLoc(), it->second, grad);
    tags[add] = tag;
    it->second = add;
  }
  void accumulate(Value v, Value grad, UnitTag tag) {
    accumulate(grads, v, grad, tag);
  }

private:
  OpBuilder &builder;
  UnitTagMap &tags;
  llvm::DenseMap<Value, Value> grads;
};

struct FsdpAutodiffPass
    : public mlir::fsdp::impl::FsdpAutodiffPassBase<FsdpAutodiffPass> {
  using FsdpAutodiffPassBase::FsdpAutodiffPassBase;
  void runOnOperation() override;

private:
  LogicalResult checkOptions(ModuleOp module);
  LogicalResult differentiate(func::FuncOp trainStep);
  /// Appends one AdamW per parameter, in declaration order, after the whole
  /// backward (a parameter the loss does not depend on gets a zero gradient).
  void buildOptimizer(func::FuncOp trainStep, OpBuilder &builder,
                      const llvm::DenseMap<Attribute, Value> &paramGrads);
};
} // namespace

/// `value` as the errors print it (%g: inf, nan, 1e+39).
static std::string optionText(double value) {
  char text[32];
  std::snprintf(text, sizeof(text), "%g", value);
  return text;
}

/// Whether `value` stays finite as the f32 the AdamW attributes keep.
static bool isFiniteF32(double value) { return std::isfinite(float(value)); }

LogicalResult FsdpAutodiffPass::checkOptions(ModuleOp module) {
  auto bad = [&](StringRef what, double value) {
    return emitError(module.getLoc())
           << "fsdp-autodiff: " << what << ", got " << optionText(value);
  };
  // The values are compared as the f32s the step keeps them in: 1e39
  // becomes infinite, 0.99999999999 becomes 1 and 1e-50 becomes 0.
  if (!(learningRate >= 0.0) || !isFiniteF32(learningRate))
    return bad("lr must be non-negative and finite as an f32", learningRate);
  for (auto [name, beta] : {std::pair<StringRef, double>{"beta1", beta1},
                            std::pair<StringRef, double>{"beta2", beta2}})
    if (!(beta >= 0.0 && float(beta) < 1.0f))
      return bad((name + " must lie in [0, 1) as an f32").str(), beta);
  if (!(float(epsilon) > 0.0f) || !isFiniteF32(epsilon))
    return bad("eps must be positive and finite as an f32", epsilon);
  if (!(weightDecay >= 0.0) || !isFiniteF32(weightDecay))
    return bad("weight-decay must be non-negative and finite as an f32",
               weightDecay);
  // AdamW scales each decayed parameter by 1 - lr x weight-decay a step:
  // at 1 or more that erases or flips every weight.
  if (double(float(learningRate)) * double(float(weightDecay)) >= 1.0)
    return emitError(module.getLoc())
           << "fsdp-autodiff: lr x weight-decay must be below 1 (each step "
              "scales the weights by 1 - lr x weight-decay), got "
           << optionText(learningRate) << " x " << optionText(weightDecay);
  return success();
}

/// Appends the backward of every forward op, in reverse order, before `ret`,
/// tagged with the op's unit; parameter gradients are collected by symbol
/// in `paramGrads`, for the optimizer.
static LogicalResult
backpropagate(ArrayRef<Operation *> forwardOps, func::ReturnOp ret,
              OpBuilder &builder, GradientBuilder &grads, UnitTagMap &tags,
              llvm::DenseMap<Attribute, Value> &paramGrads) {
  for (Operation *op : llvm::reverse(forwardOps)) {
    UnitTag tag = tags.lookup(op);
    UnitTag backwardTag{tag.unit, Phase::Backward};
    if (auto load = llvm::dyn_cast<LoadOp>(op)) {
      grads.accumulate(paramGrads, Attribute(load.getParamAttr()),
                       grads.lookup(load.getResult()), backwardTag);
      continue;
    }
    SmallVector<Value> resultGrads;
    for (Value result : op->getResults())
      resultGrads.push_back(grads.lookup(result));
    if (llvm::all_of(resultGrads, [](Value g) { return !g; }))
      continue;
    auto differentiable = llvm::dyn_cast<DifferentiableOpInterface>(op);
    if (!differentiable)
      return op->emitOpError()
             << "is not differentiable, but the loss depends on its result";

    Operation *lastBefore = ret->getPrevNode();
    SmallVector<Value> operandGrads;
    if (failed(
            differentiable.buildBackward(builder, resultGrads, operandGrads)))
      return failure();
    for (Operation *created = lastBefore->getNextNode(); created != ret;
         created = created->getNextNode())
      tags[created] = backwardTag;
    for (auto [operand, grad] : llvm::zip(op->getOperands(), operandGrads))
      grads.accumulate(operand, grad, backwardTag);
  }
  return success();
}

void FsdpAutodiffPass::buildOptimizer(
    func::FuncOp trainStep, OpBuilder &builder,
    const llvm::DenseMap<Attribute, Value> &paramGrads) {
  Value step = trainStep.getBody().front().getArguments().back();
  auto module = trainStep->getParentOfType<ModuleOp>();
  for (ParamOp param : module.getOps<ParamOp>()) {
    Value grad =
        paramGrads.lookup(FlatSymbolRefAttr::get(param.getSymNameAttr()));
    if (!grad) {
      RankedTensorType type = param.getTensorType();
      grad = arith::ConstantOp::create(
          builder, param.getLoc(),
          DenseElementsAttr::get(
              type, builder.getFloatAttr(type.getElementType(), 0.0)));
    }
    double decay = param.getNoWeightDecay() ? 0.0 : double(weightDecay);
    AdamWOp::create(
        builder, param.getLoc(), FlatSymbolRefAttr::get(param.getSymNameAttr()),
        grad, step, builder.getF32FloatAttr(learningRate),
        builder.getF32FloatAttr(beta1), builder.getF32FloatAttr(beta2),
        builder.getF32FloatAttr(epsilon), builder.getF32FloatAttr(decay));
  }
}

/// Erases the gradients nobody reads (those of the function's inputs): they
/// are dead, and computing them would be wasted work.
static void eraseDeadGradients(Block &block, func::ReturnOp ret,
                               const llvm::DenseSet<Operation *> &isForward) {
  for (Operation &op : llvm::make_early_inc_range(llvm::reverse(block)))
    if (&op != ret && !isForward.contains(&op) && op.use_empty() && isPure(&op))
      op.erase();
}

LogicalResult FsdpAutodiffPass::differentiate(func::FuncOp trainStep) {
  Block &block = trainStep.getBody().front();
  UnitTagMap tags;
  inlineComputeRegions(block, tags);

  auto ret = llvm::cast<func::ReturnOp>(block.getTerminator());
  SmallVector<Operation *> forwardOps;
  for (Operation &op : block.without_terminator())
    forwardOps.push_back(&op);
  llvm::DenseSet<Operation *> isForward(forwardOps.begin(), forwardOps.end());

  // The backward starts from a gradient of one for the loss.
  OpBuilder builder(ret);
  GradientBuilder grads(builder, tags);
  Value loss = ret.getOperand(0);
  Location loc = trainStep.getLoc();
  auto lossType = llvm::cast<RankedTensorType>(loss.getType());
  grads.set(
      loss,
      arith::ConstantOp::create(
          builder, loc,
          DenseElementsAttr::get(
              lossType, builder.getFloatAttr(lossType.getElementType(), 1.0))));

  llvm::DenseMap<Attribute, Value> paramGrads;
  if (failed(backpropagate(forwardOps, ret, builder, grads, tags, paramGrads)))
    return failure();
  buildOptimizer(trainStep, builder, paramGrads);
  eraseDeadGradients(block, ret, isForward);
  outlineComputeRegions(block, tags);
  return success();
}

void FsdpAutodiffPass::runOnOperation() {
  ModuleOp module = getOperation();
  if (failed(checkOptions(module)))
    return signalPassFailure();
  auto forward = module.lookupSymbol<func::FuncOp>(forwardName);
  if (!forward || forward.isExternal()) {
    emitError(module.getLoc()) << "fsdp-autodiff: no function @" << forwardName
                               << " with a body to differentiate";
    return signalPassFailure();
  }
  FunctionType type = forward.getFunctionType();
  auto lossType = type.getNumResults() == 1
                      ? llvm::dyn_cast<RankedTensorType>(type.getResult(0))
                      : RankedTensorType();
  if (!lossType || lossType.getRank() != 0 ||
      !llvm::isa<FloatType>(lossType.getElementType())) {
    emitError(forward.getLoc())
        << "fsdp-autodiff: @" << forwardName
        << " must return exactly one scalar loss, but returns "
        << type.getResults();
    return signalPassFailure();
  }
  if (!forward.getBody().hasOneBlock()) {
    emitError(forward.getLoc())
        << "fsdp-autodiff expects a single-block function";
    return signalPassFailure();
  }
  if (module.lookupSymbol("train_step")) {
    emitError(module.getLoc()) << "fsdp-autodiff: the module already has a "
                                  "@train_step";
    return signalPassFailure();
  }

  OpBuilder builder(module.getContext());
  builder.setInsertionPointAfter(forward);
  auto trainStep = llvm::cast<func::FuncOp>(builder.clone(*forward));
  trainStep.setSymName("train_step");
  trainStep->removeAttr(FSDPDialect::kForwardAttrName);
  trainStep->setAttr(FSDPDialect::kTrainStepAttrName, builder.getUnitAttr());
  if (failed(trainStep.insertArgument(trainStep.getNumArguments(),
                                      builder.getI64Type(), DictionaryAttr(),
                                      forward.getLoc())))
    return signalPassFailure();
  if (failed(differentiate(trainStep)))
    return signalPassFailure();
}
