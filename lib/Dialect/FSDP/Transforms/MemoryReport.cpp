//===- MemoryReport.cpp - print what every rank holds ---------------------===//
//
// The --fsdp-memory-report pass: prints computeMemoryProfile's answer
// (Analysis/MemoryProfile.cpp) next to the seed's formulas.
//
//===----------------------------------------------------------------------===//

#include "fsdp/Dialect/FSDP/Analysis/MemoryProfile.h"
#include "fsdp/Dialect/FSDP/Analysis/RuntimeOverhead.h"
#include "fsdp/Dialect/FSDP/Transforms/Passes.h"

#include "llvm/Support/Format.h"
#include "llvm/Support/raw_ostream.h"

namespace mlir::fsdp {
#define GEN_PASS_DEF_FSDPMEMORYREPORTPASS
#include "fsdp/Dialect/FSDP/Transforms/Passes.h.inc"
} // namespace mlir::fsdp

using namespace mlir;
using namespace mlir::fsdp;

namespace {
struct FsdpMemoryReportPass
    : public mlir::fsdp::impl::FsdpMemoryReportPassBase<FsdpMemoryReportPass> {
  void runOnOperation() override;
};
} // namespace

/// The sharded @train_step to report on, or null after an error.
static func::FuncOp findShardedStep(ModuleOp module) {
  func::FuncOp step = getTrainStep(module);
  if (!step || !isShardedStep(step.getBody().front())) {
    emitError(module.getLoc())
        << "fsdp-memory-report: no sharded @train_step (run "
           "--fsdp-shard first)";
    return {};
  }
  return step;
}

namespace {
/// The report of one profile, section by section, on stderr.
class ReportPrinter {
public:
  explicit ReportPrinter(const MemoryProfile &profile)
      : N(profile.worldSize), P(profile.params), units(profile.units),
        elementBytes(profile.elementBytes), shardBytes(profile.shardBytes),
        copyBytes(profile.copyBytes), steady(profile.steady),
        largestUnit(profile.largestUnit), smallestUnit(profile.smallestUnit),
        forwardPeak(profile.forwardPeak), backwardPeak(profile.backwardPeak),
        overall(profile.overall), largestName(profile.largestName),
        order(profile.order), live(profile.live),
        eb(double(profile.elementBytes)), gatheredBytes(profile.gatheredBytes) {
  }

  /// Replicas of every shard (hybrid sharding): the formulas divide by
  /// the shard group's S ranks ("N" names S when R = 1, as before meshes
  /// had two axes), the totals count all R S ranks.
  int64_t R = 1;

  /// The header and the steady state: what every rank holds throughout.
  void printPerRank();
  /// The peaks, what they are made of, and the DDP baseline.
  void printPeaks();
  /// What each backend's runtime holds outside the arena, line by line,
  /// and the peak with it.
  void printOverhead(const RuntimeOverhead &overhead);
  /// The totals over all ranks, and how the largest unit is sharded.
  void printTotals();
  void printExperts(func::FuncOp step);

private:
  static double gb(double bytes) { return bytes / 1e9; }
  /// One row: a name, its bytes and GB, and a note.
  void row(StringRef name, int64_t bytes, const Twine &note);
  /// `text` = its value in GB, the note of a row that has a formula.
  static std::string formula(StringRef text, double bytes);
  /// The rows of the peak at op `at`: where it is and what it holds.
  void describe(StringRef name, int64_t at);

  /// "N", or "S" on a mesh with replicas.
  StringRef n() const { return R > 1 ? "S" : "N"; }
  /// A shard group of one gathers nothing in the parameters' type, nor
  /// in its shard copies' type: its regions read their shards (or the
  /// copies) in place (isLocalCopy).
  bool readsShardsInPlace() const {
    return N == 1 && (gatheredBytes == elementBytes || copyBytes > 0);
  }

  int64_t N, P, units, elementBytes, shardBytes, copyBytes, steady, largestUnit,
      smallestUnit, forwardPeak, backwardPeak, overall;
  StringRef largestName;
  const SmallVector<Operation *> &order;
  const SmallVector<MemoryPoint> &live;
  double eb;
  int64_t gatheredBytes;
  llvm::raw_ostream &os = llvm::errs();
};
} // namespace

void ReportPrinter::row(StringRef name, int64_t bytes, const Twine &note) {
  os << llvm::format("  %-24s %18lld bytes %11.3f GB", name.str().c_str(),
                     (long long)bytes, gb(bytes))
     << (note.isTriviallyEmpty() ? "" : "   ") << note << "\n";
}

std::string ReportPrinter::formula(StringRef text, double bytes) {
  std::string s;
  llvm::raw_string_ostream(s)
      << text << " = " << llvm::format("%.3f GB", gb(bytes));
  return s;
}

void ReportPrinter::describe(StringRef name, int64_t at) {
  const MemoryPoint &p = live[at];
  Operation *op = order[at];
  std::string where;
  llvm::raw_string_ostream w(where);
  w << "at #" << at << " " << op->getName().getStringRef();
  if (auto compute = op->getParentOfType<ComputeOp>())
    w << " in @" << compute.getUnit() << " "
      << stringifyPhase(compute.getPhase());
  row(name, steady + p.total(), where);
  row("  steady state", steady, "");
  row("  gathered parameters", p.bytes[Gathered], "");
  row("  full-size gradients", p.bytes[FullGrad], "");
  row("  activations", p.bytes[Activation], "");
}

void ReportPrinter::printPerRank() {
  if (R > 1)
    os << "fsdp-memory-report: mesh " << R << "x" << N << " (world size "
       << R * N << ", S = " << N << " ranks per shard group), " << units
       << " units, ";
  else
    os << "fsdp-memory-report: world size " << N << ", " << units << " units, ";
  os << P << " parameters (P), " << elementBytes << " bytes per element";
  if (gatheredBytes != elementBytes)
    os << " (gathered units, activations and gradients: " << gatheredBytes
       << ", mixed precision)";
  os << "; per rank:\n";
  row("parameters (shard)", shardBytes,
      formula(("4P/" + n()).str(), eb * P / N));
  row("gradients (shard)", shardBytes,
      formula(("4P/" + n()).str(), eb * P / N));
  row("optimizer states", 2 * shardBytes,
      formula(("8P/" + n()).str(), 2 * eb * P / N));
  std::string copies = std::to_string(gatheredBytes) + "P";
  if (copyBytes > 0)
    row("shard copies", copyBytes,
        formula(copies, double(gatheredBytes) * double(P)) +
            ", in the compute type: AdamW writes them, the regions read "
            "them");
  row("steady state", steady,
      formula(("16P/" + n() + (copyBytes > 0 ? " + " + copies : "")).str(),
              4 * eb * P / N +
                  (copyBytes > 0 ? gatheredBytes * double(P) : 0)));
  if (readsShardsInPlace()) {
    row("largest gathered unit", 0,
        copyBytes > 0
            ? "none: a shard group of one reads its shard copies in place"
            : "none: a shard group of one reads its shards in place");
    return;
  }
  std::string perUnit = ", " + std::to_string(gatheredBytes) + "P/M";
  row("largest gathered unit", largestUnit * gatheredBytes,
      "@" + largestName +
          formula(perUnit, double(gatheredBytes) * double(P) / units));
}

void ReportPrinter::printPeaks() {
  describe("forward peak", forwardPeak);
  if (largestUnit == smallestUnit) {
    // M equal units: the seed's forward-peak formula, checked; a shard
    // group of one gathers nothing (its 4P/M term is zero).
    bool inPlace = readsShardsInPlace();
    double seed = 4 * eb * P / N + double(copyBytes) +
                  (inPlace ? 0.0 : double(gatheredBytes) * P / units) +
                  double(live[forwardPeak].bytes[Activation]);
    bool matches = std::abs(seed - double(steady + live[forwardPeak].total())) <
                   4 * eb * units;
    os << "    seed: 16P/" << n()
       << (copyBytes > 0 ? " + " + std::to_string(gatheredBytes) + "P" : "")
       << (inPlace ? " + activations (nothing gathered)"
                   : " + 4P/M + activations")
       << llvm::format(" = %.0f bytes (%s)\n", seed,
                       matches ? "matches" : "differs");
  }
  if (backwardPeak < int64_t(order.size()))
    describe("backward peak", backwardPeak);
  row("peak", steady + live[overall].total(),
      overall == forwardPeak ? "in the forward" : "in the backward");
  row("DDP baseline", 4 * elementBytes * P, "16P: every rank holds everything");
}

void ReportPrinter::printOverhead(const RuntimeOverhead &overhead) {
  bool device = overhead.backend == "cuda";
  row("outside the arena, " + overhead.backend, overhead.total(),
      device ? "device memory the libraries take"
             : "host memory beyond it: heap, and mapped at 1 BLAS thread");
  for (const OverheadLine &line : overhead.lines)
    row("  " + line.what, line.bytes,
        (line.estimate ? "estimate: " : "exact: ") + line.basis);
  row("peak with the " + overhead.backend + " runtime",
      steady + live[overall].total() + overhead.total(),
      "what memory-budget= counts for runtime=" + overhead.backend);
}

void ReportPrinter::printTotals() {
  os << "total over " << R * N << " ranks:\n";
  std::string copies =
      copyBytes > 0 ? " + " + std::to_string(gatheredBytes) + "P" : "";
  row("steady state", R * N * steady,
      formula(R > 1 ? (copies.empty() ? "16P x R" : "(16P" + copies + ") x R")
                    : "16P" + copies,
              4 * eb * P * R + double(R * N * copyBytes)));
  row("peak", R * N * (steady + live[overall].total()), "");
  ShardRange first = getShardRange(largestUnit, 0, N),
             lastRank = getShardRange(largestUnit, N - 1, N);
  os << "  shards of @" << largestName
     << (R > 1 ? " (in each shard group)" : "") << ": rank 0 owns elements "
     << first.begin << " .. " << first.end - 1 << ", rank " << N - 1 << " owns "
     << lastRank.begin << " .. " << lastRank.end - 1
     << " (at most one element apart)\n";
}

/// Expert parallelism's buffers per MoE layer: the rows a rank sends and
/// the received rows' bound (the memory plan reserves it whatever the
/// routing; docs/moe.md, "Capacity"), from each layer's dispatch (the
/// all-to-all whose rows an expert-parallel unit's forward reads).
void ReportPrinter::printExperts(func::FuncOp step) {
  auto module = step->getParentOfType<ModuleOp>();
  bool header = false;
  step.walk([&](Operation *exchange) {
    Value rows;
    if (auto inPlace = llvm::dyn_cast<AllToAllOp>(exchange))
      rows = inPlace.getResult();
    else if (auto started = llvm::dyn_cast<AllToAllStartOp>(exchange))
      rows = started.getResult();
    if (!rows)
      return;
    for (Operation *user : rows.getUsers()) {
      auto compute = llvm::dyn_cast<ComputeOp>(user);
      if (!compute || compute.getPhase() != Phase::Forward)
        continue;
      auto unit = module.lookupSymbol<UnitOp>(compute.getUnitAttr());
      if (!unit || !unit.getExpertParallel())
        continue;
      if (!header) {
        MeshAttr mesh = getMesh(module);
        os << "mixture of experts, expert groups of "
           << (mesh ? mesh.getExpertSize() : 1)
           << " ranks (per layer, per rank):\n";
        header = true;
      }
      auto sent =
          llvm::cast<RankedTensorType>(exchange->getOperand(0).getType());
      auto bound = llvm::cast<RankedTensorType>(rows.getType());
      os << "  @" << unit.getSymName() << "\n";
      row("  rows sent", getSizeInBytes(sent),
          Twine(sent.getDimSize(0)) +
              " rows: the rank's (token, expert) pairs");
      row("  rows received", getSizeInBytes(bound),
          Twine(bound.getDimSize(0)) +
              " rows reserved: the bound, which every step is checked "
              "against");
    }
  });
}

void FsdpMemoryReportPass::runOnOperation() {
  ModuleOp module = getOperation();
  markAllAnalysesPreserved();
  func::FuncOp step = findShardedStep(module);
  if (!step)
    return signalPassFailure();
  FailureOr<MemoryProfile> computed =
      computeMemoryProfile(module, step, "fsdp-memory-report");
  if (failed(computed))
    return signalPassFailure();
  ReportPrinter report(*computed);
  if (MeshAttr mesh = getMesh(module))
    report.R = mesh.getReplicateSize();
  report.printPerRank();
  report.printPeaks();
  report.printExperts(step);
  for (StringRef backend : getOverheadBackends())
    report.printOverhead(estimateRuntimeOverhead(module, step, backend));
  report.printTotals();
}
