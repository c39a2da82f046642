//===- UnitRegions.cpp - forming and dissolving fsdp.compute regions ------===//

#include "fsdp/Dialect/FSDP/Analysis/UnitRegions.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/IRMapping.h"
#include "llvm/ADT/MapVector.h"
#include "llvm/ADT/SmallPtrSet.h"

using namespace mlir;
using namespace mlir::fsdp;

void mlir::fsdp::inlineComputeRegions(Block &block, UnitTagMap &tags) {
  SmallVector<ComputeOp> computes(block.getOps<ComputeOp>());
  for (ComputeOp compute : computes) {
    Block &body = compute.getBodyBlock();
    auto yield = llvm::cast<YieldOp>(body.getTerminator());
    UnitTag tag{compute.getUnitAttr().getAttr(), compute.getPhase()};
    for (Operation &op : body.without_terminator())
      tags[&op] = tag;
    for (auto [arg, input] :
         llvm::zip(body.getArguments(), compute.getInputs()))
      arg.replaceAllUsesWith(input);
    compute.replaceAllUsesWith(yield.getValues());
    block.getOperations().splice(compute->getIterator(), body.getOperations(),
                                 body.begin(), yield->getIterator());
    compute.erase();
  }
}

bool mlir::fsdp::isRematerializable(Operation *op) {
  return llvm::isa<LoadOp, arith::ConstantOp>(op);
}

/// Wraps `run` (consecutive ops of `block`, one tag) in one fsdp.compute.
static void outlineRun(ArrayRef<Operation *> run, UnitTag tag) {
  llvm::SmallPtrSet<Operation *, 32> inRun(run.begin(), run.end());
  llvm::SetVector<Value> inputs, outputs;
  llvm::SetVector<Operation *> rematerialized;
  for (Operation *op : run) {
    for (Value operand : op->getOperands()) {
      Operation *def = operand.getDefiningOp();
      if (def && inRun.contains(def))
        continue;
      if (def && isRematerializable(def))
        rematerialized.insert(def);
      else
        inputs.insert(operand);
    }
    for (Value result : op->getResults())
      if (llvm::any_of(result.getUsers(),
                       [&](Operation *user) { return !inRun.contains(user); }))
        outputs.insert(result);
  }

  OpBuilder builder(run.front());
  SmallVector<Type> resultTypes;
  for (Value output : outputs)
    resultTypes.push_back(output.getType());
  auto compute = ComputeOp::create(builder, run.front()->getLoc(),
                                   FlatSymbolRefAttr::get(tag.unit), tag.phase,
                                   inputs.getArrayRef(), resultTypes);
  Block &body = compute.getBodyBlock();
  auto isInside = [&](OpOperand &use) {
    return compute->isProperAncestor(use.getOwner());
  };

  builder.setInsertionPointToStart(&body);
  for (Operation *def : rematerialized) {
    Operation *clone = builder.clone(*def);
    def->getResult(0).replaceUsesWithIf(
        clone->getResult(0),
        [&](OpOperand &use) { return inRun.contains(use.getOwner()); });
  }
  for (Operation *op : run)
    op->moveBefore(&body, body.end());
  for (auto [input, arg] : llvm::zip(inputs, body.getArguments()))
    Value(input).replaceUsesWithIf(arg, isInside);

  builder.setInsertionPointToEnd(&body);
  YieldOp::create(builder, compute.getLoc(), outputs.getArrayRef());
  for (auto [output, result] : llvm::zip(outputs, compute.getResults()))
    Value(output).replaceUsesWithIf(
        result, [&](OpOperand &use) { return !isInside(use); });
}

void mlir::fsdp::outlineComputeRegions(Block &block, const UnitTagMap &tags) {
  SmallVector<std::pair<SmallVector<Operation *>, UnitTag>> runs;
  for (Operation &op : block.without_terminator()) {
    if (isRematerializable(&op))
      continue;
    UnitTag tag = tags.lookup(&op);
    if (!tag.unit)
      continue;
    // A run continues only across rematerializable ops; any other op in
    // between (outside every unit) closes it.
    bool continues = !runs.empty() && runs.back().second == tag &&
                     runs.back().first.back()->getNextNode() != nullptr;
    if (continues) {
      for (Operation *it = runs.back().first.back()->getNextNode(); it != &op;
           it = it->getNextNode())
        if (!isRematerializable(it)) {
          continues = false;
          break;
        }
    }
    if (continues)
      runs.back().first.push_back(&op);
    else
      runs.push_back({{&op}, tag});
  }
  for (auto &[run, tag] : runs)
    outlineRun(run, tag);
  for (Operation &op : llvm::make_early_inc_range(block))
    if (isRematerializable(&op) && op.use_empty())
      op.erase();
}
