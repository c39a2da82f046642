//===- Wrap.cpp - form FSDP units by a wrap policy ------------------------===//

#include "fsdp/Dialect/FSDP/Analysis/UnitRegions.h"
#include "fsdp/Dialect/FSDP/Transforms/Passes.h"

#include "mlir/IR/Builders.h"
#include "llvm/ADT/EquivalenceClasses.h"
#include "llvm/ADT/MapVector.h"
#include "llvm/ADT/SetVector.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/Support/CheckedArithmetic.h"

#include <limits>

namespace mlir::fsdp {
#define GEN_PASS_DEF_FSDPWRAPPASS
#include "fsdp/Dialect/FSDP/Transforms/Passes.h.inc"
} // namespace mlir::fsdp

using namespace mlir;
using namespace mlir::fsdp;

namespace {
/// Unit name -> its parameters (in declaration order), in unit order.
using UnitAssignment = llvm::MapVector<StringRef, SmallVector<ParamOp>>;

struct FsdpWrapPass : public mlir::fsdp::impl::FsdpWrapPassBase<FsdpWrapPass> {
  using FsdpWrapPassBase::FsdpWrapPassBase;
  void runOnOperation() override;

private:
  /// Rejects an unknown policy or a non-positive threshold before the module
  /// changes.
  LogicalResult checkOptions(ModuleOp module);
  /// Inlines the regions of the units the input has and erases the units, so
  /// that wrapping is also regrouping.
  LogicalResult dissolveUnits(ModuleOp module, ArrayRef<func::FuncOp> funcs);
  /// The per-block policy: one unit per block prefix ("root" for none, or
  /// "embed" and "head" with split-ends), in the order the blocks are first
  /// used.
  UnitAssignment assignPerBlock(ModuleOp module, ArrayRef<ParamOp> params);
  /// With split-ends: the unit of each parameter outside any block, "embed"
  /// when every op reading its group comes before the first op reading a
  /// block's parameter, "head" when after the last, "root" otherwise.
  llvm::DenseMap<Operation *, StringRef> assignEnds(ModuleOp module,
                                                    ArrayRef<ParamOp> params);
  /// The size-threshold policy: groups of parameters read together, closed
  /// into a unit once it reaches the threshold; `names` owns the unit names.
  UnitAssignment assignBySize(ModuleOp module, ArrayRef<ParamOp> params,
                              llvm::StringSet<> &names);
  /// Creates the unit ops after `lastParam`, each with a name unique in the
  /// module's symbol table; returns each parameter's unit.
  llvm::DenseMap<StringAttr, StringAttr>
  createUnits(ModuleOp module, ParamOp lastParam, const UnitAssignment &units);
  /// Parameters in the order the functions first load them; parameters never
  /// loaded follow in declaration order.
  SmallVector<ParamOp> paramsInUseOrder(ModuleOp module,
                                        ArrayRef<ParamOp> params);
  /// Parameters grouped so that all parameters read by one op share a group;
  /// groups in the order the functions first use them.
  SmallVector<SmallVector<ParamOp>> groupParamsByOp(ModuleOp module,
                                                    ArrayRef<ParamOp> params);
  /// Tags every op of `block` with the unit whose parameters it reads.
  LogicalResult
  tagOps(Block &block,
         const llvm::DenseMap<StringAttr, StringAttr> &unitOfParam,
         UnitTagMap &tags);
};
} // namespace

SmallVector<ParamOp> FsdpWrapPass::paramsInUseOrder(ModuleOp module,
                                                    ArrayRef<ParamOp> params) {
  SymbolTable symbols(module);
  llvm::SetVector<Operation *> order;
  module.walk([&](LoadOp load) {
    if (Operation *param = symbols.lookup(load.getParam()))
      order.insert(param);
  });
  for (ParamOp param : params)
    order.insert(param);
  return llvm::map_to_vector(
      order, [](Operation *op) { return llvm::cast<ParamOp>(op); });
}

SmallVector<SmallVector<ParamOp>>
FsdpWrapPass::groupParamsByOp(ModuleOp module, ArrayRef<ParamOp> params) {
  SymbolTable symbols(module);
  llvm::EquivalenceClasses<Operation *> classes;
  for (ParamOp param : paramsInUseOrder(module, params))
    classes.insert(param);
  module.walk([&](Operation *op) {
    Operation *first = nullptr;
    for (Value operand : op->getOperands()) {
      auto load = operand.getDefiningOp<LoadOp>();
      Operation *param = load ? symbols.lookup(load.getParam()) : nullptr;
      if (!param)
        continue;
      if (first)
        classes.unionSets(first, param);
      else
        first = param;
    }
  });
  llvm::MapVector<Operation *, SmallVector<ParamOp>> groups;
  for (ParamOp param : paramsInUseOrder(module, params))
    groups[classes.getLeaderValue(param)].push_back(param);
  return llvm::map_to_vector(groups, [](auto &entry) { return entry.second; });
}

LogicalResult
FsdpWrapPass::tagOps(Block &block,
                     const llvm::DenseMap<StringAttr, StringAttr> &unitOfParam,
                     UnitTagMap &tags) {
  // An op belongs to the unit of the parameters it reads directly.
  SmallVector<Operation *> ops;
  for (Operation &op : block.without_terminator()) {
    if (isRematerializable(&op))
      continue;
    ops.push_back(&op);
    StringAttr unit;
    for (Value operand : op.getOperands()) {
      auto load = operand.getDefiningOp<LoadOp>();
      if (!load)
        continue;
      StringAttr owner = unitOfParam.lookup(load.getParamAttr().getAttr());
      if (unit && owner != unit)
        return op.emitOpError()
               << "reads parameters of units @" << unit.getValue() << " and @"
               << owner.getValue()
               << "; an op computes with one unit's parameters (pick a policy "
                  "that puts them in one unit)";
      unit = owner;
    }
    if (unit)
      tags[&op] = UnitTag{unit, Phase::Forward};
  }
  // A parameter-free op between two ops of one unit belongs to that unit.
  SmallVector<StringAttr> previous(ops.size()), next(ops.size());
  StringAttr last;
  for (auto [i, op] : llvm::enumerate(ops)) {
    if (StringAttr unit = tags.lookup(op).unit)
      last = unit;
    previous[i] = last;
  }
  last = StringAttr();
  for (size_t i = ops.size(); i-- > 0;) {
    if (StringAttr unit = tags.lookup(ops[i]).unit)
      last = unit;
    next[i] = last;
  }
  for (auto [i, op] : llvm::enumerate(ops))
    if (!tags.lookup(op).unit && previous[i] && previous[i] == next[i])
      tags[op] = UnitTag{previous[i], Phase::Forward};
  return success();
}

LogicalResult FsdpWrapPass::checkOptions(ModuleOp module) {
  if (policy != "per-block" && policy != "size-threshold" && policy != "none" &&
      policy != "given")
    return emitError(module.getLoc())
           << "fsdp-wrap: unknown wrap policy '" << policy
           << "', expected per-block, size-threshold, none or given";
  if (splitEnds && policy != "per-block" && policy != "given")
    return emitError(module.getLoc())
           << "fsdp-wrap: split-ends applies to policy=per-block, not '"
           << policy << "'";
  if (thresholdBytes <= 0)
    return emitError(module.getLoc())
           << "fsdp-wrap: threshold-bytes must be positive, got "
           << int64_t(thresholdBytes);
  return success();
}

LogicalResult FsdpWrapPass::dissolveUnits(ModuleOp module,
                                          ArrayRef<func::FuncOp> funcs) {
  UnitTagMap discarded;
  for (func::FuncOp func : funcs) {
    if (func.isExternal())
      continue;
    if (!func.getBody().hasOneBlock())
      return emitError(func.getLoc())
             << "fsdp-wrap expects single-block functions";
    WalkResult backward = func.walk([&](ComputeOp compute) {
      if (compute.getPhase() == Phase::Backward) {
        compute.emitOpError()
            << "is a backward region: fsdp-wrap runs before fsdp-autodiff";
        return WalkResult::interrupt();
      }
      return WalkResult::advance();
    });
    if (backward.wasInterrupted())
      return failure();
    inlineComputeRegions(func.getBody().front(), discarded);
  }
  for (UnitOp unit : llvm::make_early_inc_range(module.getOps<UnitOp>()))
    unit.erase();
  return success();
}

llvm::DenseMap<Operation *, StringRef>
FsdpWrapPass::assignEnds(ModuleOp module, ArrayRef<ParamOp> params) {
  // Positions of the ops reading each parameter, in walk order (the order
  // of the forward); loads may be hoisted, so their readers count.
  SymbolTable symbols(module);
  llvm::DenseMap<Operation *, std::pair<int64_t, int64_t>> span; // first, last
  int64_t position = 0, firstBlock = -1, lastBlock = -1;
  module.walk([&](Operation *op) {
    ++position;
    for (Value operand : op->getOperands()) {
      auto load = operand.getDefiningOp<LoadOp>();
      Operation *param = load ? symbols.lookup(load.getParam()) : nullptr;
      if (!param)
        continue;
      auto [it, inserted] = span.try_emplace(param, position, position);
      it->second.second = position;
      if (!getBlockPrefix(llvm::cast<ParamOp>(param).getSymName()).empty()) {
        if (firstBlock < 0)
          firstBlock = position;
        lastBlock = position;
      }
    }
  });
  // A group of parameters read by one op moves as one: it is at an end only
  // when all of its readers are.
  llvm::DenseMap<Operation *, StringRef> unitOf;
  for (ArrayRef<ParamOp> group : groupParamsByOp(module, params)) {
    bool before = firstBlock >= 0, after = firstBlock >= 0;
    for (ParamOp param : group) {
      if (!getBlockPrefix(param.getSymName()).empty())
        continue;
      auto it = span.find(param);
      if (it == span.end()) {
        before = after = false; // never read: nothing to place it by
        continue;
      }
      before &= it->second.second < firstBlock;
      after &= it->second.first > lastBlock;
    }
    StringRef unit = before ? "embed" : after ? "head" : "root";
    for (ParamOp param : group)
      unitOf[param] = unit;
  }
  return unitOf;
}

UnitAssignment FsdpWrapPass::assignPerBlock(ModuleOp module,
                                            ArrayRef<ParamOp> params) {
  llvm::DenseMap<Operation *, StringRef> ends;
  if (splitEnds)
    ends = assignEnds(module, params);
  auto unitOf = [&](ParamOp param) {
    StringRef block = getBlockPrefix(param.getSymName());
    if (!block.empty())
      return block;
    return splitEnds ? ends.lookup(param) : StringRef("root");
  };
  UnitAssignment units;
  for (ParamOp param : paramsInUseOrder(module, params))
    units[unitOf(param)];
  for (ParamOp param : params)
    units[unitOf(param)].push_back(param);
  return units;
}

UnitAssignment FsdpWrapPass::assignBySize(ModuleOp module,
                                          ArrayRef<ParamOp> params,
                                          llvm::StringSet<> &names) {
  // Parameters read by one op (a weight and its bias) are never split
  // across units: they move as one group, in the order of first use.
  UnitAssignment units;
  int64_t bytes = 0;
  SmallVector<ParamOp> current;
  auto close = [&] {
    std::string name = "unit" + std::to_string(units.size());
    StringRef stable = names.insert(name).first->getKey();
    llvm::sort(current,
               [](ParamOp a, ParamOp b) { return a->isBeforeInBlock(b); });
    units[stable] = current;
    current.clear();
    bytes = 0;
  };
  for (ArrayRef<ParamOp> group : groupParamsByOp(module, params)) {
    for (ParamOp param : group) {
      current.push_back(param);
      // Saturating: only the comparison with the threshold matters.
      bytes = llvm::checkedAdd(bytes, param.getSizeInBytes())
                  .value_or(std::numeric_limits<int64_t>::max());
    }
    if (bytes >= thresholdBytes)
      close();
  }
  if (!current.empty())
    close();
  return units;
}

llvm::DenseMap<StringAttr, StringAttr>
FsdpWrapPass::createUnits(ModuleOp module, ParamOp lastParam,
                          const UnitAssignment &units) {
  // Unit symbols share the module's symbol table with parameters and
  // functions: make each name unique there.
  SymbolTable symbols(module);
  OpBuilder builder(module.getContext());
  builder.setInsertionPointAfter(lastParam);
  llvm::DenseMap<StringAttr, StringAttr> unitOfParam;
  for (auto &[name, members] : units) {
    std::string unique = name.str();
    for (unsigned suffix = 0; symbols.lookup(unique); ++suffix)
      unique = (name + "_" + llvm::Twine(suffix)).str();
    SmallVector<Attribute> refs;
    for (ParamOp param : members)
      refs.push_back(FlatSymbolRefAttr::get(param.getSymNameAttr()));
    auto unit = UnitOp::create(builder, module.getLoc(), unique,
                               builder.getArrayAttr(refs),
                               /*expert_parallel=*/false,
                               /*shard_copy=*/nullptr);
    symbols.insert(unit);
    for (ParamOp param : members)
      unitOfParam[param.getSymNameAttr()] = unit.getSymNameAttr();
  }
  return unitOfParam;
}

void FsdpWrapPass::runOnOperation() {
  ModuleOp module = getOperation();
  if (failed(checkOptions(module)))
    return signalPassFailure();
  // Under `given`, a wrapped input keeps its units (and its regions).
  if (policy == "given" && !module.getOps<UnitOp>().empty())
    return;
  SmallVector<func::FuncOp> funcs(module.getOps<func::FuncOp>());
  if (failed(dissolveUnits(module, funcs)))
    return signalPassFailure();

  SmallVector<ParamOp> params(module.getOps<ParamOp>());
  if (params.empty())
    return;

  // Assign parameters to units; the size policy's names live in `names`.
  llvm::StringSet<> names;
  UnitAssignment units;
  if (policy == "per-block" || policy == "given")
    units = assignPerBlock(module, params);
  else if (policy == "size-threshold")
    units = assignBySize(module, params, names);
  else
    units["root"] = params;
  llvm::DenseMap<StringAttr, StringAttr> unitOfParam =
      createUnits(module, params.back(), units);

  for (func::FuncOp func : funcs) {
    if (func.isExternal())
      continue;
    UnitTagMap tags;
    Block &block = func.getBody().front();
    if (failed(tagOps(block, unitOfParam, tags)))
      return signalPassFailure();
    outlineComputeRegions(block, tags);
  }
}
