//===- MemoryProfile.cpp - what every rank holds, from the sharded IR -----===//
//
// Reads only types and program order; never materialises a tensor, so it
// reports a 175B-parameter model on a laptop. Aliasing follows the IR:
// region arguments are their operands, region results what the region
// yields, views are the gathered flat parameter, and the gradients a pack
// assembles are written in place into the unit's full-size gradient.
//
//===----------------------------------------------------------------------===//

#include "fsdp/Dialect/FSDP/Analysis/MemoryProfile.h"

#include "llvm/ADT/MapVector.h"
#include "llvm/Support/CheckedArithmetic.h"

using namespace mlir;
using namespace mlir::fsdp;

namespace {
struct Storage {
  int64_t bytes = 0, first = -1, last = -1;
  MemoryClass kind = Activation;
};

/// computeMemoryProfile's phases and what they share: the sizes summed so
/// far, checked for overflow, the program order and the storage of values.
class ProfileBuilder {
public:
  ProfileBuilder(ModuleOp module, func::FuncOp step, StringRef passName,
                 int64_t N)
      : module(module), step(step), passName(passName), N(N) {}

  /// Sums the units' parameters and a rank's shards of them.
  void sumShards();
  /// The steady state per rank, checked also over all ranks and for DDP.
  void checkSteadyState();
  /// Numbers the step's ops in program order and finds the pack each
  /// gradient is assembled into.
  void orderProgram();
  /// Classifies the storage of every tensor value and its lifetime.
  void collectStorage();
  /// The live bytes at each op, by a sweep over lifetime starts and ends.
  void sweepLiveBytes();
  /// Whether a sum overflowed (and was reported) in a phase so far.
  bool failedToFit() const { return overflowed; }
  /// The forward and backward peaks, and the profile of all phases.
  MemoryProfile finish();

private:
  /// `result`, or 0 after reporting the first overflow, naming `what`.
  int64_t fits(std::optional<int64_t> result, StringRef what);
  /// Adds `value` to `sum`, checked.
  void add(int64_t &sum, int64_t value, StringRef what) {
    sum = fits(llvm::checkedAdd(sum, value), what);
  }
  /// The storage `v` lives in: through region arguments and results, views
  /// and packs.
  Value root(Value v) const;
  /// Extends the lifetime of the storage of `v` to op `at`.
  void touch(Value v, int64_t at);
  /// The op in [begin, end) with the most live bytes.
  int64_t peakIn(int64_t begin, int64_t end) const;

  ModuleOp module;
  func::FuncOp step;
  StringRef passName;
  int64_t N;
  // Sums and products of sizes, checked: the first overflow is reported,
  // naming what was being computed, and the profile fails.
  bool overflowed = false;
  int64_t P = 0, units = 0, shardBytes = 0, elementBytes = 0, copyBytes = 0;
  int64_t gatheredBytes = 0;
  int64_t largestUnit = 0, smallestUnit = INT64_MAX;
  StringRef largestName;
  int64_t steady = 0;
  llvm::DenseMap<Operation *, int64_t> index;
  SmallVector<Operation *> order;
  llvm::DenseMap<Value, Value> packOf;
  llvm::MapVector<Value, Storage> storage;
  SmallVector<MemoryPoint> live;
};
} // namespace

int64_t ProfileBuilder::fits(std::optional<int64_t> result, StringRef what) {
  if (result || overflowed)
    return result.value_or(0);
  overflowed = true;
  emitError(module.getLoc())
      << passName << ": " << what << " would take more than "
      << std::numeric_limits<int64_t>::max()
      << " bytes, the most the compiler can count (int64)";
  return 0;
}

void ProfileBuilder::sumShards() {
  // Shards: every rank holds ceil(P_u / N) elements of each unit's flat
  // parameter, gradient and two AdamW moments (the last shard of a unit
  // may leave one element unused).
  SymbolTable symbols(module);
  for (UnitOp unit : module.getOps<UnitOp>()) {
    int64_t size = 0;
    for (Attribute ref : unit.getParams()) {
      auto param = symbols.lookup<ParamOp>(
          llvm::cast<FlatSymbolRefAttr>(ref).getValue());
      size += param.getNumElements(); // bounded by the unit's verifier
      elementBytes =
          getElementSizeInBytes(param.getTensorType().getElementType());
    }
    // An expert-parallel unit is one slice of its experts, sharded over
    // the ranks that hold it: the model has G slices, a rank 1 / (S / G)
    // of one.
    int64_t slices = 1, group = unit.getShardGroupSize();
    if (unit.getExpertParallel())
      if (MeshAttr mesh = getMesh(module))
        slices = mesh.getExpertSize();
    add(P, size * slices, "the parameters");
    ++units;
    add(shardBytes, getMaxShardSize(size, group) * elementBytes,
        "a rank's parameter shards");
    if (std::optional<Type> copy = unit.getShardCopy())
      add(copyBytes,
          getMaxShardSize(size, group) * getElementSizeInBytes(*copy),
          "a rank's shard copies");
    if (size > largestUnit) {
      largestUnit = size;
      largestName = unit.getSymName();
    }
    smallestUnit = std::min(smallestUnit, size);
  }
}

void ProfileBuilder::checkSteadyState() {
  // Parameters, gradients and two AdamW moments per rank; the report also
  // prints them over all ranks and the DDP baseline, all of it on every
  // rank.
  steady =
      fits(llvm::checkedMul(int64_t(4), shardBytes), "a rank's training state");
  steady = fits(llvm::checkedAdd(steady, copyBytes), "a rank's training state");
  fits(llvm::checkedMul(steady, N), "the training state over all ranks");
  fits(llvm::checkedMul(P, 4 * elementBytes),
       "the training state of one rank holding everything (DDP)");
}

void ProfileBuilder::orderProgram() {
  // Program order, and the storage each value lives in.
  step.walk<WalkOrder::PreOrder>([&](Operation *op) {
    if (op == step)
      return;
    index[op] = order.size();
    order.push_back(op);
  });
  gatheredBytes = elementBytes;
  for (Operation *op : order)
    if (Value gathered = getGatheredTensor(op))
      gatheredBytes = getElementSizeInBytes(
          llvm::cast<ShapedType>(gathered.getType()).getElementType());
  for (Operation *op : order)
    if (auto pack = llvm::dyn_cast<PackOp>(op))
      for (Value operand : pack.getValues())
        packOf[root(operand)] = pack.getResult();
}

Value ProfileBuilder::root(Value v) const {
  if (auto arg = llvm::dyn_cast<BlockArgument>(v))
    if (auto compute = llvm::dyn_cast<ComputeOp>(arg.getOwner()->getParentOp()))
      return root(compute.getInputs()[arg.getArgNumber()]);
  if (auto compute = v.getDefiningOp<ComputeOp>()) {
    auto yield = llvm::cast<YieldOp>(compute.getBodyBlock().getTerminator());
    return root(yield.getValues()[llvm::cast<OpResult>(v).getResultNumber()]);
  }
  if (auto view = v.getDefiningOp<ViewOp>())
    return root(view.getSource());
  // The replica all-reduce averages its shard in place, and a local
  // reduce-scatter's shard is its full-size gradient.
  if (getReplicaMean(v.getDefiningOp()) ||
      (getScatteredShard(v.getDefiningOp()) && isLocalCopy(v.getDefiningOp())))
    return root(v.getDefiningOp()->getOperand(0));
  auto it = packOf.find(v);
  return it == packOf.end() ? v : it->second;
}

void ProfileBuilder::touch(Value v, int64_t at) {
  if (!llvm::isa<RankedTensorType>(v.getType()))
    return;
  Value r = root(v);
  // A local gather's parameters are the shard, steady state already.
  if (getGatheredTensor(r.getDefiningOp()) && isLocalCopy(r.getDefiningOp()))
    return;
  Storage &s = storage[r];
  if (s.first < 0) {
    s.bytes = getSizeInBytes(r.getType());
    Operation *def = r.getDefiningOp();
    s.kind = getGatheredTensor(def) == r ? Gathered
             : isFullGradient(r)         ? FullGrad
                                         : Activation;
    s.first = at;
  }
  s.first = std::min(s.first, at);
  s.last = std::max(s.last, at);
}

void ProfileBuilder::collectStorage() {
  for (BlockArgument arg : step.getArguments())
    touch(arg, 0);
  for (auto [i, op] : llvm::enumerate(order)) {
    for (Value operand : op->getOperands())
      touch(operand, i);
    // A region's results are the values it yields, defined inside it.
    if (!llvm::isa<ComputeOp>(op))
      for (Value result : op->getResults())
        touch(result, i);
    // A started collective's input and result live until its wait, which
    // reads both in the plan (an all-to-all's rows have no free after it).
    if (auto wait = llvm::dyn_cast<WaitOp>(op)) {
      Operation *start = wait.getToken().getDefiningOp();
      if (start->getNumOperands() > 0)
        touch(start->getOperand(0), i);
      touch(start->getResult(1), i);
    }
  }
  // Gradient shards (what AdamW updates from: the reduce-scatter's
  // result, or its cast to f32 under mixed precision) are part of the
  // steady state, not a transient.
  for (auto adamw : step.getBody().front().getOps<AdamWShardOp>())
    storage.erase(root(adamw.getGrad()));
}

void ProfileBuilder::sweepLiveBytes() {
  // Live bytes by a sweep over lifetime starts and ends. The running sums
  // are the live bytes at each point; the deltas stay below them.
  live.resize(order.size() + 1);
  for (auto &[value, s] : storage) {
    add(live[s.first].bytes[s.kind], s.bytes, "the live bytes of the step");
    live[s.last + 1].bytes[s.kind] -= s.bytes;
  }
  live.pop_back();
  for (size_t i = 0; i < live.size(); ++i) {
    if (i > 0)
      for (int k = 0; k < NumMemoryClasses; ++k)
        add(live[i].bytes[k], live[i - 1].bytes[k],
            "the live bytes of the step");
    // The steady state and all classes together, over all ranks (the
    // report's total peak), must fit too.
    int64_t total = steady;
    for (int k = 0; k < NumMemoryClasses; ++k)
      add(total, live[i].bytes[k], "the live bytes of the step");
    fits(llvm::checkedMul(total, N),
         "the live bytes of the step over all ranks");
  }
}

int64_t ProfileBuilder::peakIn(int64_t begin, int64_t end) const {
  int64_t best = begin;
  for (int64_t i = begin; i < end; ++i)
    if (live[i].total() > live[best].total())
      best = i;
  return best;
}

MemoryProfile ProfileBuilder::finish() {
  // The forward ends where the loss is computed.
  Value loss = step.getBody().front().getTerminator()->getOperand(0);
  int64_t forwardEnd = index.lookup(loss.getDefiningOp());
  int64_t forwardPeak = peakIn(0, forwardEnd + 1);
  int64_t backwardPeak = peakIn(forwardEnd + 1, int64_t(order.size()));
  int64_t overall = live[forwardPeak].total() >= live[backwardPeak].total()
                        ? forwardPeak
                        : backwardPeak;

  MemoryProfile profile;
  profile.worldSize = N;
  profile.params = P;
  profile.units = units;
  profile.elementBytes = elementBytes;
  profile.gatheredBytes = gatheredBytes;
  profile.shardBytes = shardBytes;
  profile.copyBytes = copyBytes;
  profile.steady = steady;
  profile.largestUnit = largestUnit;
  profile.smallestUnit = smallestUnit;
  profile.largestName = largestName.str();
  profile.order = std::move(order);
  profile.live = std::move(live);
  profile.forwardPeak = forwardPeak;
  profile.backwardPeak = backwardPeak;
  profile.overall = overall;
  return profile;
}

FailureOr<MemoryProfile> mlir::fsdp::computeMemoryProfile(ModuleOp module,
                                                          func::FuncOp step,
                                                          StringRef passName) {
  ProfileBuilder builder(module, step, passName, getShardSize(module));
  builder.sumShards();
  builder.checkSteadyState();
  builder.orderProgram();
  builder.collectStorage();
  builder.sweepLiveBytes();
  if (builder.failedToFit())
    return failure();
  return builder.finish();
}
