//===- PlanMemory.cpp - static layout of every buffer in one arena --------===//
//
// Lifetimes come from program order: a buffer is live from the first to the
// last kernel that touches it (persistent kinds always). Offsets come from
// the greedy-by-size heuristic (TFLite's arena planner, XLA's heap
// simulator use variants of it): large buffers first, each at the lowest
// aligned offset that overlaps no already placed buffer alive at the same
// time. The result is exact: the runtime allocates the arena once and the
// peak is known before the job starts.
//
// Finding that offset by comparing each buffer with every placed one is
// quadratic (a deep model's saved activations are all alive at once, so
// most pairs conflict); a segment tree over kernels that keeps the union of
// occupied byte ranges per node gives the same offsets in O(n log^2 n).
//
//===----------------------------------------------------------------------===//

#include "MemoryPicture.h"

#include "fsdp/Dialect/Runtime/Transforms/Passes.h"
#include "fsdp/runtime/PlanFormat.h"

#include "mlir/IR/Builders.h"
#include "mlir/Support/FileUtilities.h"
#include "llvm/Support/CheckedArithmetic.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/ToolOutputFile.h"
#include "llvm/Support/raw_ostream.h"

#include <limits>
#include <map>

namespace mlir::fsdprt {
#define GEN_PASS_DEF_FSDPPLANMEMORYPASS
#include "fsdp/Dialect/Runtime/Transforms/Passes.h.inc"
} // namespace mlir::fsdprt

using namespace mlir;
namespace plan = ::fsdp::plan;
using namespace mlir::fsdprt;

namespace {
constexpr int64_t kAlign = int64_t(plan::kBufferAlignment);

/// `v` rounded up to the alignment, or nullopt when that overflows.
std::optional<int64_t> alignUp(int64_t v) {
  std::optional<int64_t> padded = llvm::checkedAdd(v, kAlign - 1);
  return padded ? std::optional<int64_t>(*padded / kAlign * kAlign)
                : std::nullopt;
}

struct Slot {
  BufferOp op;
  int64_t size = 0, first = -1, last = -1, offset = -1;
  bool persistent = false;
};

/// Live bytes at one kernel, per buffer kind (signed: the sweep subtracts).
using LiveBytes = plan::LiveBytesByKind<int64_t>;

/// Byte ranges [begin, end) as a union of disjoint, non-touching ranges.
class RangeSet {
public:
  void insert(int64_t begin, int64_t end) {
    auto it = ranges.upper_bound(begin);
    if (it != ranges.begin() && std::prev(it)->second >= begin)
      --it;
    while (it != ranges.end() && it->first <= end) {
      begin = std::min(begin, it->first);
      end = std::max(end, it->second);
      it = ranges.erase(it);
    }
    ranges.emplace(begin, end);
  }
  /// Raises `x` past every range that meets [x, x + size); true if it moved.
  bool skip(int64_t &x, int64_t size) const {
    bool moved = false;
    auto it = ranges.upper_bound(x);
    if (it != ranges.begin() && std::prev(it)->second > x) {
      x = std::prev(it)->second;
      moved = true;
    }
    for (it = ranges.upper_bound(x); it != ranges.end() && it->first - x < size;
         it = ranges.upper_bound(x)) {
      x = it->second;
      moved = true;
    }
    return moved;
  }

private:
  std::map<int64_t, int64_t> ranges; // begin -> end
};

/// The byte ranges placed slots occupy, by kernel: a segment tree over
/// kernel indices. A slot alive from kernel `first` to `last` is recorded in
/// the O(log n) nodes that tile [first, last] (`covering`) and in the union
/// of every node whose range meets it (`below`). The slots alive at some
/// point of [first, last] are then exactly those in `below` of the tiling
/// nodes and in `covering` of their ancestors, so the lowest gap among them
/// is found from O(log n) unions instead of a scan of every placed slot:
/// the same placement as that scan, in O(n log^2 n) for n slots.
class Occupancy {
public:
  explicit Occupancy(int64_t points)
      : points(points), covering(4 * points), below(4 * points) {}

  void insert(int64_t first, int64_t last, int64_t begin, int64_t end) {
    insert(1, 0, points - 1, first, last, begin, end);
  }

  /// The lowest x >= floor such that [x, x + size) meets no range of a
  /// slot alive at some kernel of [first, last].
  int64_t lowestGap(int64_t first, int64_t last, int64_t floor, int64_t size) {
    SmallVector<const RangeSet *> sets;
    collect(1, 0, points - 1, first, last, sets);
    int64_t x = floor;
    for (bool moved = true; moved;) {
      moved = false;
      for (const RangeSet *set : sets)
        moved |= set->skip(x, size);
    }
    return x;
  }

private:
  void insert(size_t node, int64_t lo, int64_t hi, int64_t first, int64_t last,
              int64_t begin, int64_t end) {
    if (last < lo || hi < first)
      return;
    below[node].insert(begin, end);
    if (first <= lo && hi <= last) {
      covering[node].insert(begin, end);
      return;
    }
    int64_t mid = lo + (hi - lo) / 2;
    insert(2 * node, lo, mid, first, last, begin, end);
    insert(2 * node + 1, mid + 1, hi, first, last, begin, end);
  }
  void collect(size_t node, int64_t lo, int64_t hi, int64_t first, int64_t last,
               SmallVectorImpl<const RangeSet *> &sets) {
    if (last < lo || hi < first)
      return;
    if (first <= lo && hi <= last) {
      sets.push_back(&below[node]);
      return;
    }
    sets.push_back(&covering[node]);
    int64_t mid = lo + (hi - lo) / 2;
    collect(2 * node, lo, mid, first, last, sets);
    collect(2 * node + 1, mid + 1, hi, first, last, sets);
  }

  int64_t points;
  std::vector<RangeSet> covering, below;
};

struct FsdpPlanMemoryPass
    : public fsdprt::impl::FsdpPlanMemoryPassBase<FsdpPlanMemoryPass> {
  using FsdpPlanMemoryPassBase::FsdpPlanMemoryPassBase;
  void runOnOperation() override {
    for (func::FuncOp func : getOperation().getOps<func::FuncOp>())
      if (func->hasAttr(FSDPRuntimeDialect::kProgramAttrName) &&
          failed(plan(func)))
        return signalPassFailure();
  }

  LogicalResult plan(func::FuncOp program);
  /// Writes the svg= picture of `program`'s live bytes.
  LogicalResult writePicture(func::FuncOp program, ArrayRef<KernelOp> kernels,
                             int64_t arena, const struct Peak &peak);
};
} // namespace

namespace {
/// Offsets, the arena and live sums add buffer sizes up, checked: the first
/// overflow fails the pass with one error; a sum that overflowed reads 0.
class OverflowCheck {
public:
  explicit OverflowCheck(func::FuncOp program) : program(program) {}

  int64_t operator()(std::optional<int64_t> result) {
    if (!result && !overflowed) {
      overflowed = true;
      emitError(program.getLoc())
          << "fsdp-plan-memory: the arena of @" << program.getSymName()
          << " would take more than " << std::numeric_limits<int64_t>::max()
          << " bytes, the most the compiler can count (int64)";
    }
    return result.value_or(0);
  }

  bool overflowed = false;

private:
  func::FuncOp program;
};

/// One line of the peak's breakdown.
struct Row {
  StringRef name;
  int64_t bytes;
};

/// The kernel with the most live bytes, and what is live there.
struct Peak {
  int64_t kernel = 0;
  LiveBytes live;
  SmallVector<Row> rows;
  /// The live bytes at every kernel.
  SmallVector<LiveBytes> series;
};
} // namespace

/// A view lives in its base: using the view keeps the base alive.
static Value baseOf(Value v) {
  while (auto view = v.getDefiningOp<ViewOp>())
    v = view.getBase();
  return v;
}

/// One slot per buffer, alive from the first to the last kernel that touches
/// it (returned buffers to the end), and the kernels in program order.
static void collectLifetimes(Block &body, OverflowCheck &fits,
                             SmallVectorImpl<Slot> &slots,
                             SmallVectorImpl<KernelOp> &kernels) {
  llvm::DenseMap<Value, size_t> slotOf;
  for (Operation &op : body) {
    if (auto buffer = llvm::dyn_cast<BufferOp>(op)) {
      slotOf[buffer.getBuffer()] = slots.size();
      slots.push_back({buffer, fits(alignUp(buffer.getSizeInBytes())), -1, -1,
                       -1, isPersistent(buffer.getKind())});
    } else if (auto kernel = llvm::dyn_cast<KernelOp>(op)) {
      int64_t index = kernels.size();
      kernels.push_back(kernel);
      for (Value operand : kernel->getOperands()) {
        Slot &slot = slots[slotOf.lookup(baseOf(operand))];
        if (slot.first < 0)
          slot.first = index;
        slot.last = index;
      }
    }
  }
  int64_t end = kernels.size();
  for (Value returned : body.getTerminator()->getOperands())
    slots[slotOf.lookup(baseOf(returned))].last = end;
}

/// The slots that need memory: persistent ones, alive throughout, and the
/// temporaries some kernel uses; unused temporaries' buffers are erased.
static SmallVector<Slot> keepUsed(MutableArrayRef<Slot> slots, int64_t end) {
  SmallVector<Slot> used;
  for (Slot &slot : slots) {
    if (slot.persistent) {
      slot.first = 0;
      slot.last = end;
    }
    if (slot.first < 0 && !slot.persistent)
      slot.op.erase();
    else
      used.push_back(slot);
  }
  return used;
}

/// Places the persistent slots back to back from offset 0 (they are always
/// alive); returns where they end and raises `arena` to their last byte.
static int64_t placePersistent(MutableArrayRef<Slot> used, OverflowCheck &fits,
                               int64_t &arena) {
  // Slots are spaced by their aligned sizes; the arena ends where the last
  // byte of the highest buffer does (no padding after it), which is what
  // the runtime's high-water mark measures.
  int64_t next = 0;
  for (Slot &slot : used)
    if (slot.persistent) {
      slot.offset = next;
      next = fits(llvm::checkedAdd(next, slot.size));
      arena = slot.offset + slot.op.getSizeInBytes(); // <= next
    }
  return next;
}

/// Places the temporaries greedy by size, largest first, above the
/// persistent ones; raises `arena` to the last byte of each.
static LogicalResult placeTemporaries(MutableArrayRef<Slot> used,
                                      int64_t persistentEnd, int64_t end,
                                      OverflowCheck &fits, int64_t &arena) {
  SmallVector<Slot *> order;
  for (Slot &slot : used)
    if (!slot.persistent)
      order.push_back(&slot);
  llvm::stable_sort(order, [](const Slot *a, const Slot *b) {
    return a->size != b->size ? a->size > b->size : a->first < b->first;
  });
  Occupancy occupancy(end + 1);
  for (Slot *slot : order) {
    // The lowest offset, from the end of the persistent buffers up, that
    // no placed slot alive at the same time covers. Placed offsets and
    // sizes fit (checked when placed); the new end is checked here.
    int64_t candidate = slot->size == 0
                            ? persistentEnd
                            : occupancy.lowestGap(slot->first, slot->last,
                                                  persistentEnd, slot->size);
    slot->offset = candidate;
    fits(llvm::checkedAdd(candidate, slot->size));
    if (fits.overflowed)
      return failure();
    occupancy.insert(slot->first, slot->last, candidate,
                     candidate + slot->size);
    arena = std::max(arena, candidate + slot->op.getSizeInBytes());
  }
  return success();
}

/// The peak, for the plan and the report: a sweep over lifetime starts and
/// ends, per kind, then the kernel with the most live bytes among the first
/// `within` (all `end` by default; the evaluation step's for its line).
static Peak findPeak(MutableArrayRef<Slot> used, int64_t end,
                     std::optional<int64_t> within = std::nullopt) {
  // Live bytes never exceed the arena, which fits, so these sums do.
  SmallVector<LiveBytes> live(std::max<int64_t>(end, 1) + 1);
  for (Slot &slot : used) {
    int64_t bytes = slot.op.getSizeInBytes();
    uint32_t kind = uint32_t(slot.op.getKind());
    live[slot.first].byKind[kind] += bytes;
    live[std::min(slot.last, end - 1) + 1].byKind[kind] -= bytes;
  }
  live.pop_back();
  for (size_t i = 1; i < live.size(); ++i)
    for (uint32_t k = 0; k < plan::kNumBufferKinds; ++k)
      live[i].byKind[k] += live[i - 1].byKind[k];
  Peak peak;
  int64_t last = std::min<int64_t>(within.value_or(live.size()), live.size());
  for (int64_t i = 0; i < last; ++i)
    if (live[i].total() > live[peak.kernel].total())
      peak.kernel = i;
  peak.live = live[peak.kernel];
  peak.series = live;
  auto kindBytes = [&](std::initializer_list<BufferKind> kinds) {
    int64_t sum = 0;
    for (BufferKind kind : kinds)
      sum += peak.live.byKind[uint32_t(kind)];
    return sum;
  };
  peak.rows = {
      // A shard's copy in the compute type is parameters too.
      {"params", kindBytes({BufferKind::Param, BufferKind::ShardCopy})},
      {"grads", kindBytes({BufferKind::Grad})},
      {"optimizer", kindBytes({BufferKind::AdamM, BufferKind::AdamV})},
      {"activations", kindBytes({BufferKind::Activation})},
      {"scratch", kindBytes({BufferKind::Scratch})},
      {"gathered", kindBytes({BufferKind::Gathered})},
      {"inputs", kindBytes({BufferKind::Input})},
  };
  return peak;
}

/// Records the plan in the IR, where the plan writer reads it: each buffer's
/// offset, the arena size and the peak.
static void recordPlan(func::FuncOp program, MutableArrayRef<Slot> used,
                       int64_t arena, const Peak &peak) {
  OpBuilder builder(program.getContext());
  for (Slot &slot : used)
    slot.op.setOffsetAttr(builder.getI64IntegerAttr(slot.offset));
  SmallVector<NamedAttribute> attrs = {
      builder.getNamedAttr("bytes",
                           builder.getI64IntegerAttr(peak.live.total())),
      builder.getNamedAttr("kernel", builder.getI64IntegerAttr(peak.kernel))};
  for (const Row &row : peak.rows)
    attrs.push_back(
        builder.getNamedAttr(row.name, builder.getI64IntegerAttr(row.bytes)));
  program->setAttr(FSDPRuntimeDialect::kArenaSizeAttrName,
                   builder.getI64IntegerAttr(arena));
  program->setAttr(FSDPRuntimeDialect::kPeakAttrName,
                   builder.getDictionaryAttr(attrs));
}

/// Prints the arena, the peak, where it is and what is live there (the
/// report option), so that a user can see where the memory goes.
static void printReport(func::FuncOp program, ArrayRef<KernelOp> kernels,
                        size_t buffers, int64_t arena, const Peak &peak,
                        std::optional<std::pair<int64_t, Peak>> eval) {
  int64_t end = kernels.size();
  llvm::raw_ostream &os = llvm::errs();
  auto mib = [](int64_t bytes) { return double(bytes) / (1 << 20); };
  os << "fsdp-plan-memory: @" << program.getSymName() << ", " << end
     << " kernels, " << buffers << " buffers\n";
  os << llvm::format("  %-22s %16lld bytes %12.2f MiB\n", "arena", arena,
                     mib(arena));
  os << llvm::format("  %-22s %16lld bytes %12.2f MiB", "peak live",
                     peak.live.total(), mib(peak.live.total()));
  if (end > 0) {
    KernelOp at = kernels[peak.kernel];
    os << "  at kernel #" << peak.kernel << " (" << at.getName();
    if (at.getUnit())
      os << ", unit " << *at.getUnit();
    os << ")";
  }
  os << "\n";
  for (const Row &row : peak.rows)
    os << llvm::format("    %-20s %16lld bytes %12.2f MiB\n",
                       row.name.str().c_str(), row.bytes, mib(row.bytes));
  // The evaluation step runs in the same arena: its own peak is for
  // reading, not for sizing.
  if (eval)
    os << llvm::format("  %-22s %16lld bytes %12.2f MiB", "eval step peak live",
                       eval->second.live.total(),
                       mib(eval->second.live.total()))
       << "  at kernel #" << eval->second.kernel << " (kernels #0..#"
       << eval->first - 1 << ": the forward and the loss)\n";
}

/// The kernels above the program's fsdprt.eval_end, if it has one.
static std::optional<int64_t> evalKernels(Block &body) {
  int64_t kernels = 0;
  for (Operation &op : body) {
    if (llvm::isa<EvalEndOp>(op))
      return kernels;
    kernels += llvm::isa<KernelOp>(op);
  }
  return std::nullopt;
}

LogicalResult FsdpPlanMemoryPass::plan(func::FuncOp program) {
  // Every buffer's size fits int64 (its verifier checks); the sums of them
  // are checked by `fits`.
  OverflowCheck fits(program);
  SmallVector<Slot> slots;
  SmallVector<KernelOp> kernels;
  collectLifetimes(program.getBody().front(), fits, slots, kernels);
  int64_t end = kernels.size();
  SmallVector<Slot> used = keepUsed(slots, end);

  int64_t arena = 0;
  int64_t persistentEnd = placePersistent(used, fits, arena);
  if (fits.overflowed)
    return failure();
  if (failed(placeTemporaries(used, persistentEnd, end, fits, arena)))
    return failure();

  Peak peak = findPeak(used, end);
  recordPlan(program, used, arena, peak);
  if (memoryBudget > 0)
    program->setAttr(
        FSDPRuntimeDialect::kMemoryBudgetAttrName,
        Builder(program.getContext()).getI64IntegerAttr(int64_t(memoryBudget)));
  if (report) {
    std::optional<std::pair<int64_t, Peak>> eval;
    if (std::optional<int64_t> k = evalKernels(program.getBody().front()))
      eval = {*k, findPeak(used, end, *k)};
    printReport(program, kernels, used.size(), arena, peak, eval);
  }
  if (!svgPath.empty())
    return writePicture(program, kernels, arena, peak);
  return success();
}

/// What `runtime` holds outside the arena, as the lowering predicted it
/// (fsdprt.outside_arena, every line at one BLAS thread, as a budget
/// counts), or nullopt for an unknown runtime.
static std::optional<int64_t> outsideArena(func::FuncOp program,
                                           StringRef runtime) {
  auto outside = program->getAttrOfType<DictionaryAttr>(
      FSDPRuntimeDialect::kOutsideArenaAttrName);
  auto get = [&](StringRef key) {
    auto value = outside ? outside.getAs<IntegerAttr>(key) : IntegerAttr();
    return value ? value.getInt() : 0;
  };
  if (runtime == "none")
    return 0;
  if (runtime == "cpu")
    return get("cpu") + get("cpu_mapped") + get("cpu_blas_thread");
  if (runtime == "cuda")
    return get("cuda");
  return std::nullopt;
}

/// The picture's data: each kernel's live bytes, name and unit, where the
/// forward ends (the kernel that writes the returned loss) and the
/// optimizer begins (the first AdamW).
static MemoryPicture describePicture(func::FuncOp program,
                                     ArrayRef<KernelOp> kernels,
                                     const Peak &peak) {
  MemoryPicture picture;
  Value loss;
  if (Operation *ret = program.getBody().front().getTerminator();
      ret->getNumOperands() > 0)
    loss = baseOf(ret->getOperand(0));
  for (auto [i, constKernel] : llvm::enumerate(kernels)) {
    KernelOp kernel = constKernel;
    MemoryPicture::Kernel k;
    k.name = kernel.getName().str();
    k.unit = kernel.getUnit() ? kernel.getUnit()->str() : "";
    for (uint32_t kind = 0; kind < plan::kNumBufferKinds; ++kind)
      k.live[kind] = peak.series[i].byKind[kind];
    picture.kernels.push_back(std::move(k));
    bool writesLoss = llvm::any_of(kernel.getOuts(), [&](Value out) {
      return loss && baseOf(out) == loss;
    });
    if (writesLoss && picture.forwardEnd < 0)
      picture.forwardEnd = int64_t(i);
    if (picture.optimizerBegin < 0 &&
        (kernel.getName() == "adamw_shard" || kernel.getName() == "adamw"))
      picture.optimizerBegin = int64_t(i);
  }
  picture.peakKernel = peak.kernel;
  picture.peakBytes = peak.live.total();
  return picture;
}

LogicalResult FsdpPlanMemoryPass::writePicture(func::FuncOp program,
                                               ArrayRef<KernelOp> kernels,
                                               int64_t arena,
                                               const Peak &peak) {
  std::optional<int64_t> outside = outsideArena(program, runtime);
  if (!outside)
    return emitError(program.getLoc()) << "fsdp-plan-memory: unknown runtime '"
                                       << runtime << "' (cpu, cuda or none)";
  MemoryPicture picture = describePicture(program, kernels, peak);
  picture.arenaBytes = arena;
  picture.budget = memoryBudget;
  picture.outside = *outside;
  picture.runtime = runtime;
  std::string error;
  std::unique_ptr<llvm::ToolOutputFile> file = openOutputFile(svgPath, &error);
  if (!file)
    return emitError(program.getLoc())
           << "fsdp-plan-memory: cannot write the picture: " << error;
  renderMemoryPicture(picture, file->os());
  file->keep();
  return success();
}
