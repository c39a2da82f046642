//===- ScheduleAllToAll.cpp - expert parallelism's exchanges, started -----===//
//
// A MoE layer under expert parallelism computes, exchanges rows, computes
// on the experts' ranks and exchanges them back; within one layer the
// routed path is a chain, so an exchange can only overlap work beside it:
// a shared expert (DeepSeek-V3's), the router's statistics, and in the
// backward their gradients and the router's. That work sits in the region
// before an exchange (the backward's) or after it (the forward's), mixed
// with what the exchange needs or what reads its rows. Splitting those
// regions by dependence puts it between the start and the wait.
//
//===----------------------------------------------------------------------===//

#include "ScheduleAllToAll.h"

#include "fsdp/Dialect/FSDP/Analysis/UnitRegions.h"
#include "fsdp/Dialect/FSDP/IR/FSDP.h"

#include "mlir/IR/Builders.h"

using namespace mlir;
using namespace mlir::fsdp;

void mlir::fsdp::startAllToAlls(Block &block, int64_t stream) {
  OpBuilder builder(block.getParentOp()->getContext());
  for (auto exchange : llvm::make_early_inc_range(block.getOps<AllToAllOp>())) {
    builder.setInsertionPoint(exchange);
    auto start = AllToAllStartOp::create(
        builder, exchange.getLoc(), TokenType::get(builder.getContext()),
        exchange.getType(), exchange.getInput(), exchange.getSend(),
        exchange.getRecv(), builder.getI64IntegerAttr(stream),
        exchange.getAxisAttr());
    exchange.replaceAllUsesWith(start.getResult());
    exchange.erase();
    builder.setInsertionPoint(getFirstReader(block, start.getResult()));
    WaitOp::create(builder, start.getLoc(), start.getToken());
  }
}

/// The ops of `region`'s body that depend on its inputs `from` (their
/// forward slice).
static llvm::SmallPtrSet<Operation *, 32>
readersOf(ComputeOp region, llvm::function_ref<bool(Value)> from) {
  llvm::SmallPtrSet<Operation *, 32> slice;
  SmallVector<Value> work;
  for (auto [arg, input] :
       llvm::zip(region.getBodyBlock().getArguments(), region.getInputs()))
    if (from(input))
      work.push_back(arg);
  while (!work.empty())
    for (Operation *user : work.pop_back_val().getUsers())
      if (!llvm::isa<YieldOp>(user) && slice.insert(user).second)
        llvm::append_range(work, user->getResults());
  return slice;
}

/// The ops of `region`'s body that its results `needed` depend on (their
/// backward slice).
static llvm::SmallPtrSet<Operation *, 32> makersOf(ComputeOp region,
                                                   ArrayRef<unsigned> needed) {
  llvm::SmallPtrSet<Operation *, 32> slice;
  auto yield = llvm::cast<YieldOp>(region.getBodyBlock().getTerminator());
  SmallVector<Operation *> work;
  for (unsigned i : needed)
    if (Operation *def = yield.getValues()[i].getDefiningOp())
      work.push_back(def);
  while (!work.empty()) {
    Operation *op = work.pop_back_val();
    if (!slice.insert(op).second)
      continue;
    for (Value operand : op->getOperands())
      if (Operation *def = operand.getDefiningOp())
        work.push_back(def);
  }
  return slice;
}

/// The region last before `start`, split so that what the exchange does
/// not need runs after the start: a backward's weight gradients (the
/// experts' beside the return of their rows), a shared expert's backward.
/// Between the two parts go the exchange and what it needs, and the
/// gathers started there (a prefetched gather starts no later); what
/// reads the moved ops' results (a unit's gradient reduction after its
/// last backward region), the frees of what they read and the waits (a
/// wait moved before them would block the compute stream sooner) follow
/// them.
static void sinkPastStart(AllToAllStartOp start) {
  ComputeOp region;
  for (Operation *op = start->getPrevNode(); op && !region;
       op = op->getPrevNode())
    region = llvm::dyn_cast<ComputeOp>(op);
  if (!region)
    return;
  SmallVector<Operation *> range;
  for (Operation *op = region->getNextNode(); op != start.getOperation();
       op = op->getNextNode())
    range.push_back(op);
  range.push_back(start);
  // What the exchange needs among the ops up to it, and of the region.
  llvm::SmallPtrSet<Operation *, 16> needs = {start.getOperation()};
  for (Operation *op : llvm::reverse(range))
    if (needs.contains(op))
      for (Value operand : op->getOperands())
        if (Operation *def = operand.getDefiningOp();
            def && llvm::is_contained(range, def))
          needs.insert(def);
  SmallVector<unsigned> needed;
  for (OpResult result : region->getResults())
    if (llvm::any_of(result.getUsers(),
                     [&](Operation *user) { return needs.contains(user); }))
      needed.push_back(result.getResultNumber());
  llvm::SmallPtrSet<Operation *, 32> keep = makersOf(region, needed);
  llvm::SmallPtrSet<Operation *, 32> late;
  for (Operation &op : region.getBodyBlock().without_terminator())
    if (!keep.contains(&op))
      late.insert(&op);
  // Everything else up to the start follows the moved ops: what reads
  // their results, the frees of what they read, and the waits. What the
  // exchange needs reads no moved op (those are not among `keep`'s), and
  // a gather start reads nothing.
  SmallVector<Operation *> between, following;
  for (Operation *op : range)
    (needs.contains(op) || llvm::isa<AllGatherStartOp>(op) ? between
                                                           : following)
        .push_back(op);
  auto parts = splitComputeRegion(region, late, between);
  if (!parts)
    return;
  for (Operation *op : llvm::reverse(following))
    op->moveAfter(parts->second);
}

/// The first region after `start`'s wait that reads what it received
/// (directly or through ops between them), split so that what does not
/// read it runs before the wait: a shared expert beside the returned rows,
/// the router's gradient beside the returned gradients.
static void hoistBeforeWait(AllToAllStartOp start) {
  auto wait = llvm::cast<WaitOp>(*start.getToken().getUsers().begin());
  llvm::SmallPtrSet<Value, 16> rows = {start.getResult()};
  SmallVector<Operation *> between = {wait};
  ComputeOp region;
  for (Operation *op = wait->getNextNode(); op && !region;
       op = op->getNextNode()) {
    region = llvm::dyn_cast<ComputeOp>(op);
    if (!region && llvm::any_of(op->getOperands(),
                                [&](Value v) { return rows.contains(v); })) {
      between.push_back(op);
      rows.insert(op->result_begin(), op->result_end());
    }
  }
  if (!region || llvm::none_of(region.getInputs(),
                               [&](Value v) { return rows.contains(v); }))
    return;
  llvm::SmallPtrSet<Operation *, 32> late =
      readersOf(region, [&](Value input) { return rows.contains(input); });
  splitComputeRegion(region, late, between);
}

void mlir::fsdp::overlapAllToAlls(Block &block) {
  for (auto start : llvm::to_vector(block.getOps<AllToAllStartOp>())) {
    sinkPastStart(start);
    hoistBeforeWait(start);
  }
}
