//===- FSDPOps.cpp - structure ops and the op classes ---------------------===//
//
// The ops that give a step its structure: fsdp.param, fsdp.unit, fsdp.load
// and fsdp.compute (with its custom<Phase> and custom<ComputeBody>
// directives), and the op classes ODS generates. The other ops' C++ lives by
// concern: FSDPComputeOps.cpp (the compute ops' attribute ranges),
// FSDPShardingOps.cpp (collectives, views, packs), FSDPKernelOpInterface.cpp
// (each compute op's kernel, its shapes and element types by the kernel
// table, scratch and FLOPs) and FSDPOpUtils.cpp (the queries FSDP.h
// declares). Every rule is checked with a message that names
// the operand, the expected shape and what was found.
//
//===----------------------------------------------------------------------===//

#include "VerifierHelpers.h"
#include "fsdp/Dialect/FSDP/IR/FSDP.h"

#include <cmath>
// The generated getKernelOpcode() of each kernel op names plan::Opcode.
#include "fsdp/runtime/PlanFormat.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/Support/CheckedArithmetic.h"

#include <limits>

using namespace mlir;
using namespace mlir::fsdp;
using namespace mlir::fsdp::detail;

//===----------------------------------------------------------------------===//
// ParamOp
//===----------------------------------------------------------------------===//

int64_t ParamOp::getSizeInBytes() {
  return mlir::fsdp::getSizeInBytes(getType());
}

LogicalResult ParamOp::verify() {
  if (FloatAttr selection = getSelectionBiasAttr()) {
    double rate = selection.getValueAsDouble();
    if (!(rate >= 0.0) || std::isinf(rate))
      return emitOpError() << "has a selection_bias rate that is not finite "
                              "and non-negative: "
                           << rate;
    if (getTensorType().getRank() != 1 ||
        !getTensorType().getElementType().isF32())
      return emitOpError() << "is a selection_bias, which is one-dimensional "
                              "and f32, not "
                           << getType();
  }
  return verifySizeFits(*this, "parameter @" + getSymName(), getType());
}

//===----------------------------------------------------------------------===//
// UnitOp
//===----------------------------------------------------------------------===//

LogicalResult UnitOp::verify() {
  if (getParams().empty())
    return emitOpError() << "unit @" << getSymName()
                         << " must contain at least one parameter";
  llvm::SmallDenseSet<Attribute> seen;
  for (Attribute param : getParams())
    if (!seen.insert(param).second)
      return emitOpError() << "lists parameter "
                           << llvm::cast<FlatSymbolRefAttr>(param)
                           << " more than once";
  // The runtime keeps shard copies in bf16 only (the master shard is
  // f32), and an expert slice's gather is never a local copy.
  if (std::optional<Type> copy = getShardCopy()) {
    if (!copy->isBF16())
      return emitOpError() << "keeps a shard copy in " << *copy
                           << "; only bf16 copies are supported";
    if (getExpertParallel())
      return emitOpError() << "is expert-parallel and keeps a shard copy";
  }
  return success();
}

LogicalResult UnitOp::verifySymbolUses(SymbolTableCollection &symbolTable) {
  llvm::SmallDenseSet<Attribute> mine;
  // The flat parameter sharding builds: its elements and bytes must fit
  // int64 as each parameter's do.
  std::optional<int64_t> flatBytes = 0;
  for (Attribute attr : getParams()) {
    auto ref = llvm::cast<FlatSymbolRefAttr>(attr);
    Operation *target = symbolTable.lookupNearestSymbolFrom(*this, ref);
    if (!target)
      return emitOpError() << "refers to unknown parameter " << ref;
    auto param = llvm::dyn_cast<ParamOp>(target);
    if (!param)
      return emitOpError() << "lists " << ref << ", which is not an fsdp.param";
    if (flatBytes)
      if (std::optional<int64_t> bytes = getCheckedSizeInBytes(param.getType()))
        flatBytes = llvm::checkedAdd(*flatBytes, *bytes);
    mine.insert(attr);
  }
  if (!flatBytes)
    return emitOpError() << "has a flat parameter (its parameters together) "
                            "of more than "
                         << std::numeric_limits<int64_t>::max()
                         << " bytes, the most the compiler can count (int64)";
  // A parameter in two units would be gathered and reduced twice. Report it
  // at the later unit, pointing at the earlier one. The first unit of the
  // module checks all of them with one map: a check per unit against every
  // earlier unit would be quadratic in the number of units.
  for (Operation *op = (*this)->getPrevNode(); op; op = op->getPrevNode())
    if (llvm::isa<UnitOp>(op))
      return success();
  llvm::DenseMap<Attribute, UnitOp> firstListedIn;
  bool ok = true;
  for (Operation &op :
       llvm::make_range(getOperation()->getIterator(),
                        (*this)->getBlock()->getOperations().end())) {
    auto unit = llvm::dyn_cast<UnitOp>(op);
    if (!unit)
      continue;
    for (Attribute param : unit.getParams()) {
      auto [it, inserted] = firstListedIn.try_emplace(param, unit);
      if (inserted || it->second == unit)
        continue;
      InFlightDiagnostic diag =
          unit.emitOpError()
          << "parameter " << llvm::cast<FlatSymbolRefAttr>(param)
          << " is already in unit @" << it->second.getSymName();
      diag.attachNote(it->second.getLoc()) << "first listed here";
      ok = false;
      break;
    }
  }
  return success(ok);
}

//===----------------------------------------------------------------------===//
// LoadOp
//===----------------------------------------------------------------------===//

LogicalResult LoadOp::verifySymbolUses(SymbolTableCollection &symbolTable) {
  if (!lookupParamOfType(*this, symbolTable, getParamAttr(), getType(),
                         "result"))
    return failure();
  auto compute = (*this)->getParentOfType<ComputeOp>();
  if (!compute)
    return success();
  auto unit = symbolTable.lookupNearestSymbolFrom<UnitOp>(
      compute, compute.getUnitAttr());
  if (unit && !llvm::is_contained(unit.getParams(), getParamAttr()))
    return emitOpError() << "loads " << getParamAttr()
                         << ", which is not in unit @" << unit.getSymName()
                         << " of the enclosing fsdp.compute";
  return success();
}

//===----------------------------------------------------------------------===//
// ComputeOp
//===----------------------------------------------------------------------===//

/// The phase prints as a bare keyword: `fsdp.compute @h.0 forward (...)`.
static ParseResult parsePhase(OpAsmParser &parser, PhaseAttr &phase) {
  StringRef keyword;
  SMLoc loc = parser.getCurrentLocation();
  if (parser.parseKeyword(&keyword))
    return failure();
  std::optional<Phase> value = symbolizePhase(keyword);
  if (!value)
    return parser.emitError(loc)
           << "expected phase forward or backward, got '" << keyword << "'";
  phase = PhaseAttr::get(parser.getContext(), *value);
  return success();
}

static void printPhase(OpAsmPrinter &printer, Operation *, PhaseAttr phase) {
  printer << stringifyPhase(phase.getValue());
}

/// The body of `fsdp.compute` is parsed as an isolated name scope, as the
/// op is isolated from above: a name inside it never resolves to a value
/// outside, and, the reason this is custom, a forward reference outside
/// (`%x` used before any definition) can never be resolved by a definition
/// inside. MLIR's parser otherwise lets it, and when the region then fails to
/// parse (a repeated block label, say) it frees the region's values while
/// the outer op still uses them: a use after free that aborts the process
/// after the right error (test/fuzz/crashers/model-repeated-label.model). On
/// failure the region's values also drop any use left outside, whatever
/// took it, before the region is freed.
static ParseResult parseComputeBody(OpAsmParser &parser, Region &body) {
  if (failed(parser.parseRegion(body, /*arguments=*/{},
                                /*enableNameShadowing=*/true))) {
    for (Block &block : body)
      block.dropAllDefinedValueUses();
    return failure();
  }
  ComputeOp::ensureTerminator(
      body, parser.getBuilder(),
      parser.getEncodedSourceLoc(parser.getCurrentLocation()));
  return success();
}

/// The body as the declarative format printed `$body`: entry block
/// arguments always, the implicit `fsdp.yield` only when it yields.
static void printComputeBody(OpAsmPrinter &printer, Operation *, Region &body) {
  bool printTerminator = true;
  if (Operation *term = body.empty() ? nullptr : body.front().getTerminator())
    printTerminator = !term->getAttrDictionary().empty() ||
                      term->getNumOperands() != 0 || term->getNumResults() != 0;
  printer.printRegion(body, /*printEntryBlockArgs=*/true,
                      /*printBlockTerminators=*/printTerminator);
}

void ComputeOp::build(OpBuilder &builder, OperationState &state,
                      FlatSymbolRefAttr unit, Phase phase, ValueRange inputs,
                      TypeRange resultTypes) {
  state.addAttribute(getUnitAttrName(state.name), unit);
  state.addAttribute(getPhaseAttrName(state.name),
                     PhaseAttr::get(builder.getContext(), phase));
  state.addOperands(inputs);
  state.addTypes(resultTypes);
  Region *body = state.addRegion();
  Block *block = new Block();
  body->push_back(block);
  for (Value input : inputs)
    block->addArgument(input.getType(), input.getLoc());
}

LogicalResult ComputeOp::verify() {
  if ((*this)->getParentOfType<ComputeOp>())
    return emitOpError() << "cannot be nested in another fsdp.compute";
  Block &body = getBodyBlock();
  if (body.getNumArguments() != getInputs().size())
    return emitOpError() << "has " << getInputs().size()
                         << " inputs but its body takes "
                         << body.getNumArguments() << " arguments";
  for (auto [index, pair] :
       llvm::enumerate(llvm::zip(getInputs(), body.getArguments())))
    if (std::get<0>(pair).getType() != std::get<1>(pair).getType())
      return emitOpError() << "input #" << index << " has type "
                           << std::get<0>(pair).getType()
                           << " but body argument #" << index << " has type "
                           << std::get<1>(pair).getType();
  auto yield = llvm::cast<YieldOp>(body.getTerminator());
  if (yield.getValues().getTypes() != getResultTypes())
    return emitOpError() << "yields " << yield.getValues().getTypes()
                         << " but its results are " << getResultTypes();
  return success();
}

LogicalResult ComputeOp::verifySymbolUses(SymbolTableCollection &symbolTable) {
  Operation *target = symbolTable.lookupNearestSymbolFrom(*this, getUnitAttr());
  if (!target)
    return emitOpError() << "refers to unknown unit " << getUnitAttr();
  if (!llvm::isa<UnitOp>(target))
    return emitOpError() << "refers to " << getUnitAttr()
                         << ", which is not an fsdp.unit";
  return success();
}

#define GET_OP_CLASSES
#include "fsdp/Dialect/FSDP/IR/FSDPOps.cpp.inc"
