//===- UnitRegions.cpp - forming and dissolving fsdp.compute regions ------===//

#include "fsdp/Dialect/FSDP/Analysis/UnitRegions.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/IRMapping.h"
#include "llvm/ADT/MapVector.h"
#include "llvm/ADT/SmallPtrSet.h"

using namespace mlir;
using namespace mlir::fsdp;

void mlir::fsdp::inlineComputeRegion(ComputeOp compute, UnitTagMap &tags) {
  Block &body = compute.getBodyBlock();
  auto yield = llvm::cast<YieldOp>(body.getTerminator());
  UnitTag tag{compute.getUnitAttr().getAttr(), compute.getPhase()};
  for (Operation &op : body.without_terminator())
    tags[&op] = tag;
  for (auto [arg, input] : llvm::zip(body.getArguments(), compute.getInputs()))
    arg.replaceAllUsesWith(input);
  compute.replaceAllUsesWith(yield.getValues());
  compute->getBlock()->getOperations().splice(
      compute->getIterator(), body.getOperations(), body.begin(),
      yield->getIterator());
  compute.erase();
}

void mlir::fsdp::inlineComputeRegions(Block &block, UnitTagMap &tags) {
  SmallVector<ComputeOp> computes(block.getOps<ComputeOp>());
  for (ComputeOp compute : computes)
    inlineComputeRegion(compute, tags);
}

std::optional<std::pair<ComputeOp, ComputeOp>>
mlir::fsdp::splitComputeRegion(ComputeOp region,
                               const llvm::SmallPtrSetImpl<Operation *> &late,
                               ArrayRef<Operation *> between) {
  // Views and constants follow their readers; every other op is a part's.
  auto follows = [](Operation &op) {
    return llvm::isa<ViewOp>(op) || isRematerializable(&op);
  };
  SmallVector<Operation *> early, lateOps, shared;
  for (Operation &op : region.getBodyBlock().without_terminator())
    (follows(op)          ? shared
     : late.contains(&op) ? lateOps
                          : early)
        .push_back(&op);
  auto computesFloats = [](ArrayRef<Operation *> ops) {
    return llvm::any_of(ops, [](Operation *op) {
      return llvm::any_of(op->getResultTypes(), [](Type type) {
        auto tensor = llvm::dyn_cast<RankedTensorType>(type);
        return tensor && llvm::isa<FloatType>(tensor.getElementType());
      });
    });
  };
  if (!computesFloats(early) || !computesFloats(lateOps))
    return std::nullopt;
  llvm::SmallPtrSet<Operation *, 8> moving(between.begin(), between.end());
  Operation *end = region->getNextNode();
  while (end && moving.contains(end))
    end = end->getNextNode();
  UnitTagMap tags;
  inlineComputeRegion(region, tags);
  // [early ops][between][late ops]: the views a late op reads go along,
  // cloned where an early op reads them too.
  for (Operation *op : between)
    op->moveBefore(end);
  for (Operation *op : lateOps)
    op->moveBefore(end);
  OpBuilder builder(lateOps.front());
  for (Operation *view : shared) {
    bool readEarly = false, readLate = false;
    for (Operation *user : view->getUsers())
      (late.contains(user) ? readLate : readEarly) = true;
    if (!readLate)
      continue;
    if (!readEarly) {
      view->moveBefore(lateOps.front());
      continue;
    }
    Operation *clone = builder.clone(*view);
    tags[clone] = tags.lookup(view);
    view->getResult(0).replaceUsesWithIf(
        clone->getResult(0),
        [&](OpOperand &use) { return late.contains(use.getOwner()); });
  }
  Block &block = *early.front()->getBlock();
  outlineComputeRegions(block, tags);
  return std::make_pair(early.front()->getParentOfType<ComputeOp>(),
                        lateOps.front()->getParentOfType<ComputeOp>());
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
