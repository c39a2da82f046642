//===- Schedule.cpp - asynchronous collectives and prefetch ---------------===//
//
// Collectives become start/wait pairs; prefetch moves gather starts earlier
// (never computes), bounded by the in-flight limit; the memory profile of
// the result is checked against the budget.
//
//===----------------------------------------------------------------------===//

#include "ScheduleAllToAll.h"

#include "fsdp/Dialect/FSDP/Analysis/MemoryProfile.h"
#include "fsdp/Dialect/FSDP/Analysis/RuntimeOverhead.h"
#include "fsdp/Dialect/FSDP/Transforms/Passes.h"

#include "mlir/IR/Builders.h"

namespace mlir::fsdp {
#define GEN_PASS_DEF_FSDPSCHEDULEPASS
#include "fsdp/Dialect/FSDP/Transforms/Passes.h.inc"
} // namespace mlir::fsdp

using namespace mlir;
using namespace mlir::fsdp;

namespace {
constexpr int64_t kGatherStream = 1, kScatterStream = 2, kReplicaStream = 3,
                  kExpertStream = 4;

/// A started gather, where it is waited for, and the region that uses it.
struct Gather {
  AllGatherStartOp start;
  WaitOp wait;
  ComputeOp region;
};

struct FsdpSchedulePass
    : public mlir::fsdp::impl::FsdpSchedulePassBase<FsdpSchedulePass> {
  using FsdpSchedulePassBase::FsdpSchedulePassBase;
  void runOnOperation() override;

private:
  /// Rejects negative options before the step is touched.
  LogicalResult checkOptions(ModuleOp module);
  /// Gathers of `phase` start in the order their regions run (a later
  /// region's gather never overtakes an earlier one's), within the in-flight
  /// limit.
  void orderAndLimitGathers(Block &block, MutableArrayRef<Gather> phase);
  /// Fails, with the peak and what is live there, when the scheduled step
  /// needs more than the memory budget.
  LogicalResult checkMemoryBudget(ModuleOp module, func::FuncOp step);
};

/// Gathers (a bucket counts once) started and not yet freed just before
/// `point`.
int64_t inflightBefore(Block &block, Operation *point) {
  int64_t before = 0;
  walkInflightGathers(block, [&](Operation *op, int64_t inflight) {
    if (op == point)
      return false;
    before = inflight;
    return true;
  });
  return before;
}

int64_t bytesOf(Value v) { return getSizeInBytes(v.getType()); }
} // namespace

/// Buckets of consecutive gathers (in the order their regions run) of up to
/// `limit` bytes: every later member starts right after the one before it,
/// grouped with it, and is awaited right after it.
void bucketGathers(MutableArrayRef<Gather> gathers, int64_t limit) {
  int64_t bytes = 0;
  for (size_t i = 0; i < gathers.size(); ++i) {
    int64_t own = bytesOf(gathers[i].start.getResult());
    // bytes + own > limit, without overflowing (both are sizes that fit);
    // a fused collective runs over one group (an expert-parallel unit's
    // is not its neighbours').
    if (i == 0 || own > limit - bytes ||
        gathers[i].start.getAxis() != gathers[i - 1].start.getAxis()) {
      bytes = own; // a new bucket
      continue;
    }
    bytes += own;
    Gather &previous = gathers[i - 1], &g = gathers[i];
    g.start->moveAfter(previous.start);
    g.start.setGrouped(true);
    g.wait->moveAfter(previous.wait);
  }
}

/// The ops that read the shard a reduce-scatter gives: its users, and,
/// under hybrid sharding, those of its replica all-reduce instead of the
/// all-reduce itself, which starts right after the reduce-scatter's wait,
/// wherever that goes (startReplicaMeans).
static SmallVector<Operation *> shardReads(ReduceScatterStartOp scatter) {
  SmallVector<Operation *> reads;
  for (Operation *user : scatter.getResult().getUsers()) {
    if (Value mean = getReplicaMean(user))
      reads.append(mean.getUsers().begin(), mean.getUsers().end());
    else
      reads.push_back(user);
  }
  return reads;
}

/// The first op of `block` that reads a shard of `bucket` before `until`,
/// or `until`.
Operation *firstShardRead(Block &block, ArrayRef<ReduceScatterStartOp> bucket,
                          Operation *until) {
  for (ReduceScatterStartOp member : bucket)
    for (Operation *user : shardReads(member))
      if (Operation *top = block.findAncestorOpInBlock(*user);
          top && top->isBeforeInBlock(until))
        until = top;
  return until;
}

/// Buckets of consecutive reduce-scatters of up to `limit` bytes of
/// full-size gradient: the members start together where the last one
/// started (every gradient is complete there), grouped, and are awaited
/// together where the last one was, or before, where a shard of the
/// bucket is read first (gradient clipping's sums of squares read the
/// shards of the earlier members before the last one's); each full-size
/// gradient is freed after its own wait. A bucket also closes before a
/// reduce-scatter that starts after a shard of the bucket is read: a unit
/// the loss ignores is reduced where its AdamW is, after the optimizer
/// steps of the units before it, and joining it would move their
/// reduce-scatters after the steps that read them.
void bucketScatters(Block &block, int64_t limit) {
  SmallVector<ReduceScatterStartOp> scatters(
      block.getOps<ReduceScatterStartOp>());
  auto waitOf = [](ReduceScatterStartOp start) {
    return llvm::cast<WaitOp>(*start.getToken().getUsers().begin());
  };
  auto close = [&](ArrayRef<ReduceScatterStartOp> bucket) {
    ReduceScatterStartOp last = bucket.back();
    WaitOp lastWait = waitOf(last);
    // Every read is after the last start: the buckets close before one.
    if (Operation *read = firstShardRead(block, bucket, lastWait);
        read != lastWait.getOperation())
      lastWait->moveBefore(read);
    for (ReduceScatterStartOp member : bucket.drop_back()) {
      member->moveBefore(last);
      WaitOp wait = waitOf(member);
      wait->moveBefore(lastWait);
      for (Operation *user : member.getSource().getUsers())
        if (llvm::isa<FreeOp>(user))
          user->moveAfter(lastWait);
    }
    for (ReduceScatterStartOp member : bucket.drop_front())
      member.setGrouped(true);
  };
  SmallVector<ReduceScatterStartOp> bucket;
  int64_t bytes = 0;
  for (ReduceScatterStartOp start : scatters) {
    int64_t own = bytesOf(start.getSource());
    if (!bucket.empty() &&
        (own > limit - bytes || start.getAxis() != bucket.back().getAxis() ||
         firstShardRead(block, bucket, start) != start.getOperation())) {
      close(bucket);
      bucket.clear();
      bytes = 0;
    }
    bucket.push_back(start);
    bytes += own;
  }
  if (!bucket.empty())
    close(bucket);
}

LogicalResult FsdpSchedulePass::checkOptions(ModuleOp module) {
  for (auto [name, value] :
       {std::pair<StringRef, int64_t>{"forward-prefetch", forwardPrefetch},
        {"backward-prefetch", backwardPrefetch},
        {"max-inflight-gathers", maxInflightGathers},
        {"memory-budget", memoryBudget},
        {"bucket-bytes", bucketBytes}})
    if (value < 0)
      return emitError(module.getLoc())
             << "fsdp-schedule: " << name << " must be non-negative, got "
             << value;
  if (runtime != "none" &&
      !llvm::is_contained(getOverheadBackends(), StringRef(runtime)))
    return emitError(module.getLoc()) << "fsdp-schedule: unknown runtime '"
                                      << runtime << "' (cpu, cuda or none)";
  return success();
}

/// Without resharding after the forward, a unit's backward reuses its last
/// forward gather, so its parameters are gathered once per step.
static void reuseForwardGathers(Block &block) {
  // The backward regions of a unit use the parameters its last forward
  // region gathered, freed once after the unit's last backward use.
  llvm::DenseMap<Attribute, AllGatherOp> lastForward;
  for (auto gather : llvm::make_early_inc_range(block.getOps<AllGatherOp>())) {
    ComputeOp region;
    for (Operation *user : gather.getResult().getUsers())
      if (auto compute = llvm::dyn_cast<ComputeOp>(user))
        region = compute;
    Attribute unit = gather.getUnitAttr();
    if (region && region.getPhase() == Phase::Forward) {
      lastForward[unit] = gather;
      continue;
    }
    AllGatherOp kept = lastForward.lookup(unit);
    if (!kept)
      continue;
    // Reuse the kept gather; its free moves to where this one's was.
    FreeOp keptFree, ownFree;
    for (Operation *user : kept.getResult().getUsers())
      if (auto free = llvm::dyn_cast<FreeOp>(user))
        keptFree = free;
    for (Operation *user : gather.getResult().getUsers())
      if (auto free = llvm::dyn_cast<FreeOp>(user))
        ownFree = free;
    if (!keptFree || !ownFree)
      continue;
    keptFree->moveBefore(ownFree);
    ownFree.erase();
    gather.replaceAllUsesWith(kept.getResult());
    gather.erase();
  }
}

/// Replaces a gather by a start, waited for right before the first region
/// that reads it, and records it by the phase of that region.
static void startGather(OpBuilder &builder, AllGatherOp gather,
                        SmallVectorImpl<Gather> &forward,
                        SmallVectorImpl<Gather> &backward) {
  auto start = AllGatherStartOp::create(
      builder, gather.getLoc(), TokenType::get(builder.getContext()),
      gather.getType(), gather.getUnitAttr(),
      builder.getI64IntegerAttr(kGatherStream), /*grouped=*/nullptr,
      gather.getAxisAttr());
  gather.replaceAllUsesWith(start.getResult());
  gather.erase();
  // The first region that reads it (without resharding after the
  // forward, the backward reads it too, later).
  ComputeOp region;
  for (Operation *user : start.getResult().getUsers())
    if (auto compute = llvm::dyn_cast<ComputeOp>(user))
      if (!region || compute->isBeforeInBlock(region))
        region = compute;
  builder.setInsertionPoint(region);
  auto wait = WaitOp::create(builder, start.getLoc(), start.getToken());
  (region.getPhase() == Phase::Forward ? forward : backward)
      .push_back({start, wait, region});
}

/// Replaces a reduce-scatter by a start, waited for before the first use of
/// its result or free of its source (the source must stay until it is read).
static void startScatter(OpBuilder &builder, Block &block,
                         ReduceScatterOp scatter) {
  auto start = ReduceScatterStartOp::create(
      builder, scatter.getLoc(), TokenType::get(builder.getContext()),
      scatter.getType(), scatter.getSource(), scatter.getUnitAttr(),
      builder.getI64IntegerAttr(kScatterStream), /*grouped=*/nullptr,
      scatter.getAxisAttr());
  scatter.replaceAllUsesWith(start.getResult());
  scatter.erase();
  // The source may be freed only once the reduction has read it.
  Operation *firstUse = nullptr;
  for (Operation *user : start.getSource().getUsers())
    if (llvm::isa<FreeOp>(user) &&
        (!firstUse || user->isBeforeInBlock(firstUse)))
      firstUse = user;
  for (Operation *user : start.getResult().getUsers())
    if (!firstUse || user->isBeforeInBlock(firstUse))
      firstUse = user;
  builder.setInsertionPoint(firstUse ? firstUse : block.getTerminator());
  WaitOp::create(builder, start.getLoc(), start.getToken());
}

/// Turns every collective into a start/wait pair, each wait right before the
/// first use of the result; the gathers are returned by phase for prefetch.
static void startCollectives(Block &block, SmallVectorImpl<Gather> &forward,
                             SmallVectorImpl<Gather> &backward) {
  OpBuilder builder(block.getParentOp()->getContext());
  for (Operation &op : llvm::make_early_inc_range(block)) {
    builder.setInsertionPoint(&op);
    if (auto gather = llvm::dyn_cast<AllGatherOp>(op))
      startGather(builder, gather, forward, backward);
    else if (auto scatter = llvm::dyn_cast<ReduceScatterOp>(op))
      startScatter(builder, block, scatter);
  }
}

namespace {
/// Program order, numbered once: moving an op invalidates the block's
/// order, so isBeforeInBlock after each move would renumber the whole block
/// each time. Valid while the ops compared do not move.
class ProgramOrder {
public:
  explicit ProgramOrder(Block &block) {
    for (auto [i, op] : llvm::enumerate(block))
      position[&op] = i;
  }
  bool before(Operation *a, Operation *b) const {
    return position.lookup(a) < position.lookup(b);
  }

private:
  llvm::DenseMap<Operation *, int64_t> position;
};
} // namespace

/// Keeps one reduce-scatter in flight, so that each overlaps the next unit's
/// backward: each is waited for just before the next one starts (or before
/// the optimizer, for the last); its full-size gradient is freed after the
/// wait.
static void overlapScatters(Block &block) {
  SmallVector<ReduceScatterStartOp> scatters(
      block.getOps<ReduceScatterStartOp>());
  Operation *optimizer = block.getTerminator();
  for (Operation &op : block)
    if (llvm::isa<AdamWShardOp>(op)) {
      optimizer = &op;
      break;
    }
  // Only waits and frees move below; the ops compared do not.
  ProgramOrder order(block);
  for (auto [i, scatter] : llvm::enumerate(scatters)) {
    Operation *until =
        i + 1 < scatters.size() ? scatters[i + 1].getOperation() : optimizer;
    // A unit that no backward region uses (its parameters do not affect the
    // loss) is reduced where its AdamW is, after the optimizer has begun:
    // its wait, and the one of the scatter before it, go before the first
    // read of the shard instead.
    if (order.before(until, scatter))
      until = block.getTerminator();
    for (Operation *user : shardReads(scatter))
      if (order.before(user, until))
        until = user;
    auto wait = llvm::cast<WaitOp>(*scatter.getToken().getUsers().begin());
    wait->moveBefore(until);
    for (Operation *user : scatter.getSource().getUsers())
      if (llvm::isa<FreeOp>(user))
        user->moveAfter(wait);
  }
}

/// Hybrid sharding's replica all-reduces on a stream of their own: each
/// starts right after its unit's reduce-scatter has been waited for, and
/// one is in flight at a time: it is waited for just before the next one
/// starts, or before the first read of its shard (the optimizer, or
/// clipping's sum of squares), whichever comes first. So it overlaps the
/// next unit's backward and reduce-scatter, as a reduce-scatter does.
static void startReplicaMeans(Block &block) {
  SmallVector<AllReduceMeanOp> means(block.getOps<AllReduceMeanOp>());
  OpBuilder builder(block.getParentOp()->getContext());
  SmallVector<std::pair<AllReduceMeanStartOp, WaitOp>> started;
  for (AllReduceMeanOp mean : means) {
    Operation *after = mean.getSource().getDefiningOp();
    if (auto scatter = llvm::dyn_cast<ReduceScatterStartOp>(after))
      after = *scatter.getToken().getUsers().begin();
    builder.setInsertionPointAfter(after);
    auto start = AllReduceMeanStartOp::create(
        builder, mean.getLoc(), TokenType::get(builder.getContext()),
        mean.getType(), mean.getSource(), mean.getUnitAttr(),
        builder.getI64IntegerAttr(kReplicaStream), mean.getAxisAttr());
    mean.replaceAllUsesWith(start.getResult());
    mean.erase();
    builder.setInsertionPoint(getFirstReader(block, start.getResult()));
    started.push_back(
        {start, WaitOp::create(builder, start.getLoc(), start.getToken())});
  }
  for (size_t i = 0; i + 1 < started.size(); ++i) {
    AllReduceMeanStartOp next = started[i + 1].first;
    if (next->isBeforeInBlock(started[i].second))
      started[i].second->moveBefore(next);
  }
}

/// Prefetch, so that a gather overlaps the compute before its region: the
/// start of region i + `ahead` moves before region i. Regions do not move,
/// and each start moves at most once, before it is compared.
static void prefetch(MutableArrayRef<Gather> gathers, int64_t ahead,
                     const ProgramOrder &order) {
  if (ahead == 0)
    return;
  for (size_t i = 0; i + ahead < gathers.size(); ++i) {
    Gather &later = gathers[i + ahead];
    Operation *anchor = gathers[i].region;
    if (order.before(anchor, later.start))
      later.start->moveBefore(anchor);
  }
}

/// A free of a gathered tensor: the point where one fewer gather is in
/// flight.
static bool isGatherFree(Operation *op) {
  auto free = llvm::dyn_cast<FreeOp>(op);
  return free && free.getValue().getDefiningOp<AllGatherStartOp>();
}

void FsdpSchedulePass::orderAndLimitGathers(Block &block,
                                            MutableArrayRef<Gather> phase) {
  // A start that would exceed the limit moves to just after the next free
  // of a gathered tensor, never past its own wait. Moving a start can push
  // the next ones, so repeat until nothing moves.
  for (bool moved = true; moved;) {
    moved = false;
    for (size_t i = 0; i < phase.size(); ++i) {
      Gather &g = phase[i];
      if (i > 0 && g.start->isBeforeInBlock(phase[i - 1].start)) {
        g.start->moveAfter(phase[i - 1].start);
        moved = true;
      }
      if (maxInflightGathers == 0)
        continue;
      while (inflightBefore(block, g.start) >= maxInflightGathers) {
        Operation *next = g.start->getNextNode();
        while (next && next != g.wait.getOperation() && !isGatherFree(next))
          next = next->getNextNode();
        if (!next || next == g.wait.getOperation())
          break; // as late as it can be: right before its wait
        g.start->moveAfter(next);
        moved = true;
      }
    }
  }
}

LogicalResult FsdpSchedulePass::checkMemoryBudget(ModuleOp module,
                                                  func::FuncOp step) {
  FailureOr<MemoryProfile> computed =
      computeMemoryProfile(module, step, "fsdp-schedule");
  if (failed(computed))
    return failure();
  MemoryProfile &profile = *computed;
  int64_t outside = getBudgetedOverhead(module, step, runtime);
  int64_t needed = profile.peakBytes() + outside;
  if (needed <= memoryBudget)
    return success();
  Operation *at = profile.order[profile.overall];
  InFlightDiagnostic diag = emitError(at->getLoc())
                            << "fsdp-schedule: the step needs " << needed
                            << " bytes per rank at its peak ("
                            << profile.peakBytes() << " in the arena, "
                            << outside << " outside it on the " << runtime
                            << " runtime), over the memory budget of "
                            << int64_t(memoryBudget) << " bytes";
  diag.attachNote(at->getLoc())
      << "the peak is here ('" << at->getName().getStringRef()
      << "'): steady state " << profile.steady << ", gathered "
      << profile.live[profile.overall].bytes[Gathered]
      << ", full-size gradients "
      << profile.live[profile.overall].bytes[FullGrad] << ", activations "
      << profile.live[profile.overall].bytes[Activation];
  return failure();
}

void FsdpSchedulePass::runOnOperation() {
  ModuleOp module = getOperation();
  // The schedule --fsdp-fit-memory chose for the budget, over the options.
  if (auto choice =
          module->getAttrOfType<DictionaryAttr>(kScheduleChoiceAttrName)) {
    forwardPrefetch = choice.getAs<IntegerAttr>("forward_prefetch").getInt();
    backwardPrefetch = choice.getAs<IntegerAttr>("backward_prefetch").getInt();
    bucketBytes = choice.getAs<IntegerAttr>("bucket_bytes").getInt();
    reshardAfterForward =
        choice.getAs<BoolAttr>("reshard_after_forward").getValue();
    overlapAllToAll = choice.getAs<BoolAttr>("overlap_all_to_all").getValue();
    module->removeAttr(kScheduleChoiceAttrName);
  }
  if (failed(checkOptions(module)))
    return signalPassFailure();
  func::FuncOp step = getTrainStep(module);
  if (!step || !step.getBody().hasOneBlock() ||
      !isShardedStep(step.getBody().front())) {
    emitError(module.getLoc()) << "fsdp-schedule: no sharded @train_step (run "
                                  "--fsdp-shard first)";
    return signalPassFailure();
  }
  Block &block = step.getBody().front();
  if (!block.getOps<AllGatherStartOp>().empty()) {
    emitError(module.getLoc())
        << "fsdp-schedule: @train_step is already scheduled";
    return signalPassFailure();
  }

  if (!reshardAfterForward)
    reuseForwardGathers(block);
  SmallVector<Gather> forward, backward;
  startCollectives(block, forward, backward);
  if (overlapAllToAll)
    startAllToAlls(block, kExpertStream);
  overlapScatters(block);
  ProgramOrder order(block);
  prefetch(forward, forwardPrefetch, order);
  prefetch(backward, backwardPrefetch, order);
  orderAndLimitGathers(block, forward);
  orderAndLimitGathers(block, backward);
  if (bucketBytes > 0) {
    bucketGathers(forward, bucketBytes);
    bucketGathers(backward, bucketBytes);
    bucketScatters(block, bucketBytes);
  }
  startReplicaMeans(block);
  if (overlapAllToAll)
    overlapAllToAlls(block);

  if (maxInflightGathers > 0)
    module->setAttr(
        kMaxInflightGathersAttrName,
        Builder(module.getContext()).getI64IntegerAttr(maxInflightGathers));
  if (memoryBudget > 0 && failed(checkMemoryBudget(module, step)))
    return signalPassFailure();
}
