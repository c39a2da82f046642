//===- Summary.cpp - print units, parameters and regions ------------------===//

#include "fsdp/Dialect/FSDP/Transforms/Passes.h"

#include "llvm/ADT/MapVector.h"
#include "llvm/Support/CheckedArithmetic.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/raw_ostream.h"

#include <limits>

namespace mlir::fsdp {
#define GEN_PASS_DEF_FSDPSUMMARYPASS
#include "fsdp/Dialect/FSDP/Transforms/Passes.h.inc"
} // namespace mlir::fsdp

using namespace mlir;
using namespace mlir::fsdp;

namespace {
struct UnitRow {
  int64_t params = 0, elements = 0, bytes = 0, forward = 0, backward = 0,
          kernels = 0;
};

using UnitRows = llvm::MapVector<StringRef, UnitRow>;

struct FsdpSummaryPass
    : public mlir::fsdp::impl::FsdpSummaryPassBase<FsdpSummaryPass> {
  void runOnOperation() override;
};
} // namespace

/// One row per unit with the sizes of its parameters; `wrapped` collects the
/// parameters some unit holds, so that the others can be listed apart.
static void countUnitParams(ModuleOp module, UnitRows &rows,
                            llvm::DenseSet<Operation *> &wrapped) {
  SymbolTable symbols(module);
  for (UnitOp unit : module.getOps<UnitOp>()) {
    UnitRow &row = rows[unit.getSymName()];
    for (Attribute ref : unit.getParams()) {
      auto param = symbols.lookup<ParamOp>(
          llvm::cast<FlatSymbolRefAttr>(ref).getValue());
      ++row.params;
      row.elements += param.getNumElements();
      row.bytes += param.getSizeInBytes();
      wrapped.insert(param);
    }
  }
}

/// The whole model's and the unwrapped parameters' sizes; fails when the
/// total overflows int64 (a unit's sums fit, its verifier checks; the whole
/// model's need not).
static LogicalResult countAllParams(ModuleOp module,
                                    const llvm::DenseSet<Operation *> &wrapped,
                                    UnitRow &total, UnitRow &unwrapped) {
  for (ParamOp param : module.getOps<ParamOp>()) {
    ++total.params;
    std::optional<int64_t> bytes =
        llvm::checkedAdd(total.bytes, param.getSizeInBytes());
    if (!bytes)
      return emitError(module.getLoc())
             << "fsdp-summary: the parameters would take more than "
             << std::numeric_limits<int64_t>::max()
             << " bytes, the most the compiler can count (int64)";
    total.bytes = *bytes;
    total.elements += param.getNumElements(); // <= bytes
    if (!wrapped.contains(param)) {
      ++unwrapped.params;
      unwrapped.elements += param.getNumElements();
      unwrapped.bytes += param.getSizeInBytes(); // <= total.bytes
    }
  }
  return success();
}

/// Counts each unit's forward and backward regions and, after lowering, its
/// kernel calls, so that the summary reads at every stage of the pipeline.
static void countRegionsAndKernels(ModuleOp module, UnitRows &rows) {
  // Regions are counted in the function that will run: @train_step once
  // autodiff has built it, the forward before that.
  Operation *counted = module;
  if (func::FuncOp step = getTrainStep(module))
    counted = step;
  counted->walk([&](ComputeOp compute) {
    UnitRow &row = rows[compute.getUnit()];
    ++(compute.getPhase() == Phase::Forward ? row.forward : row.backward);
  });
  // After lowering, regions are gone and kernel calls name their unit.
  module.walk([&](Operation *op) {
    if (op->getName().getStringRef() != "fsdprt.kernel")
      return;
    if (auto unit = op->getAttrOfType<StringAttr>("unit"))
      ++rows[unit.getValue()].kernels;
  });
}

/// Prints the totals, the table of units (and unwrapped parameters) and the
/// size of each function to stderr.
static void printSummary(ModuleOp module, const UnitRows &rows,
                         const UnitRow &total, const UnitRow &unwrapped) {
  llvm::raw_ostream &os = llvm::errs();
  os << "fsdp-summary: " << rows.size() << " units, " << total.params
     << " parameters, " << total.elements << " elements, " << total.bytes
     << " bytes\n";
  auto printRow = [&](StringRef name, const UnitRow &row, bool regions) {
    os << "  " << llvm::left_justify(name, 14)
       << llvm::format_decimal(row.params, 7)
       << llvm::format_decimal(row.elements, 14)
       << llvm::format_decimal(row.bytes, 14);
    if (regions)
      os << llvm::format_decimal(row.forward, 5)
         << llvm::format_decimal(row.backward, 5)
         << llvm::format_decimal(row.kernels, 8);
    os << "\n";
  };
  os << "  " << llvm::left_justify("unit", 14)
     << llvm::right_justify("params", 7) << llvm::right_justify("elements", 14)
     << llvm::right_justify("bytes", 14) << llvm::right_justify("fwd", 5)
     << llvm::right_justify("bwd", 5) << llvm::right_justify("kernels", 8)
     << "\n";
  for (auto &[name, row] : rows)
    printRow(("@" + name).str(), row, /*regions=*/true);
  if (unwrapped.params)
    printRow("(no unit)", unwrapped, /*regions=*/false);
  for (func::FuncOp func : module.getOps<func::FuncOp>()) {
    int64_t ops = 0;
    func.walk([&](Operation *) { ++ops; });
    os << "  func @" << func.getSymName() << ": " << ops - 1 << " ops\n";
  }
}

void FsdpSummaryPass::runOnOperation() {
  ModuleOp module = getOperation();
  UnitRows rows;
  llvm::DenseSet<Operation *> wrapped;
  countUnitParams(module, rows, wrapped);
  UnitRow total, unwrapped;
  if (failed(countAllParams(module, wrapped, total, unwrapped)))
    return signalPassFailure();
  countRegionsAndKernels(module, rows);
  printSummary(module, rows, total, unwrapped);
  markAllAnalysesPreserved();
}
