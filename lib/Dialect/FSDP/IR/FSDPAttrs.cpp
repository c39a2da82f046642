//===- FSDPAttrs.cpp - fsdp dialect attributes ----------------------------===//

#include "fsdp/Dialect/FSDP/IR/FSDP.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/DialectImplementation.h"
#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;
using namespace mlir::fsdp;

#include "fsdp/Dialect/FSDP/IR/FSDPEnums.cpp.inc"

#define GET_ATTRDEF_CLASSES
#include "fsdp/Dialect/FSDP/IR/FSDPAttrs.cpp.inc"

void FSDPDialect::registerAttributes() {
  addAttributes<
#define GET_ATTRDEF_LIST
#include "fsdp/Dialect/FSDP/IR/FSDPAttrs.cpp.inc"
      >();
}

// #fsdp.init<zeros> | #fsdp.init<ones> | #fsdp.init<normal, std = 0.02>
Attribute InitAttr::parse(AsmParser &parser, Type) {
  StringRef keyword;
  SMLoc loc = parser.getCurrentLocation();
  if (parser.parseLess() || parser.parseKeyword(&keyword))
    return {};
  std::optional<InitKind> kind = symbolizeInitKind(keyword);
  if (!kind) {
    parser.emitError(loc) << "unknown initializer '" << keyword
                          << "', expected zeros, ones or normal";
    return {};
  }
  double stddev = 0.0;
  if (*kind == InitKind::Normal) {
    if (parser.parseComma() || parser.parseKeyword("std") ||
        parser.parseEqual() || parser.parseFloat(stddev))
      return {};
  }
  if (parser.parseGreater())
    return {};
  return getChecked([&] { return parser.emitError(loc); }, parser.getContext(),
                    *kind, llvm::APFloat(stddev));
}

void InitAttr::print(AsmPrinter &printer) const {
  printer << "<" << stringifyInitKind(getKind());
  if (getKind() == InitKind::Normal) {
    printer << ", std = ";
    printer.printFloat(getStd());
  }
  printer << ">";
}

LogicalResult
InitAttr::verify(llvm::function_ref<InFlightDiagnostic()> emitError,
                 InitKind kind, llvm::APFloat std) {
  double stddev = std.convertToDouble();
  if (kind == InitKind::Normal && !(stddev > 0.0 && std::isfinite(stddev)))
    return emitError() << "normal initializer needs a positive finite std, got "
                       << stddev;
  if (kind != InitKind::Normal && stddev != 0.0)
    return emitError() << stringifyInitKind(kind)
                       << " initializer takes no std";
  return success();
}
