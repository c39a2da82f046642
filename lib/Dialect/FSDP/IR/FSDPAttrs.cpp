//===- FSDPAttrs.cpp - fsdp dialect attributes ----------------------------===//

#include "fsdp/Dialect/FSDP/IR/FSDP.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/DialectImplementation.h"
#include "llvm/ADT/TypeSwitch.h"
#include "llvm/Support/CheckedArithmetic.h"

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

LogicalResult
MeshAxisAttr::verify(llvm::function_ref<InFlightDiagnostic()> emitError,
                     StringRef name, int64_t size) {
  if (name != MeshAttr::kShardAxis && name != MeshAttr::kReplicateAxis &&
      name != MeshAttr::kExpertAxis)
    return emitError() << "unknown mesh axis \"" << name
                       << "\": fsdp meshes have the axes \""
                       << MeshAttr::kReplicateAxis << "\", \""
                       << MeshAttr::kShardAxis << "\" and \""
                       << MeshAttr::kExpertAxis << "\"";
  if (size < 1)
    return emitError() << "mesh axis \"" << name
                       << "\" needs at least one rank, got " << size;
  return success();
}

// #fsdp.mesh<["replicate" = 2, "shard" = 4]>
Attribute MeshAttr::parse(AsmParser &parser, Type) {
  SMLoc loc = parser.getCurrentLocation();
  SmallVector<MeshAxisAttr> axes;
  auto parseAxis = [&]() -> ParseResult {
    std::string name;
    int64_t size = 0;
    SMLoc axisLoc = parser.getCurrentLocation();
    if (parser.parseString(&name) || parser.parseEqual() ||
        parser.parseInteger(size))
      return failure();
    auto axis =
        MeshAxisAttr::getChecked([&] { return parser.emitError(axisLoc); },
                                 parser.getContext(), name, size);
    if (!axis)
      return failure();
    axes.push_back(axis);
    return success();
  };
  if (parser.parseLess() ||
      parser.parseCommaSeparatedList(AsmParser::Delimiter::Square, parseAxis) ||
      parser.parseGreater())
    return {};
  return getChecked([&] { return parser.emitError(loc); }, parser.getContext(),
                    ArrayRef<MeshAxisAttr>(axes));
}

void MeshAttr::print(AsmPrinter &printer) const {
  printer << "<[";
  llvm::interleaveComma(getAxes(), printer, [&](MeshAxisAttr axis) {
    printer << "\"" << axis.getName() << "\" = " << axis.getSize();
  });
  printer << "]>";
}

LogicalResult
MeshAttr::verify(llvm::function_ref<InFlightDiagnostic()> emitError,
                 ArrayRef<MeshAxisAttr> axes) {
  if (axes.empty())
    return emitError() << "a mesh needs at least one axis";
  // Outer to inner: a replica is a contiguous block of shard ranks, so
  // the shard axis's collectives stay within neighbouring ranks (one node).
  int64_t rank = -1, ranks = 1, shards = 1;
  // Order first, so that an expert axis before the shard axis is named as
  // out of order rather than as not dividing it.
  for (MeshAxisAttr axis : axes) {
    int64_t order = axis.getName() == kReplicateAxis ? 0
                    : axis.getName() == kShardAxis   ? 1
                                                     : 2;
    if (order <= rank)
      return emitError() << "mesh axis \"" << axis.getName()
                         << "\" is repeated or out of order: the axes are \""
                         << kReplicateAxis << "\", \"" << kShardAxis
                         << "\" then \"" << kExpertAxis
                         << "\", each at most once";
    rank = order;
  }
  for (MeshAxisAttr axis : axes) {
    if (axis.getName() == kShardAxis)
      shards = axis.getSize();
    // The expert axis splits the shard axis (it adds no ranks): a shard
    // group of S ranks is S / G expert groups of G. It comes last.
    if (axis.getName() == kExpertAxis) {
      if (shards % axis.getSize() != 0)
        return emitError() << "mesh axis \"" << kExpertAxis
                           << "\" = " << axis.getSize() << " must divide \""
                           << kShardAxis << "\" = " << shards
                           << " (expert groups split a shard group)";
      continue;
    }
    std::optional<int64_t> product = llvm::checkedMul(ranks, axis.getSize());
    if (!product)
      return emitError() << "the mesh has more ranks than int64 can count";
    ranks = *product;
  }
  return success();
}

int64_t MeshAttr::getAxisSize(StringRef name) const {
  for (MeshAxisAttr axis : getAxes())
    if (axis.getName() == name)
      return axis.getSize();
  return 1;
}

int64_t MeshAttr::getNumRanks() const {
  int64_t ranks = 1;
  for (MeshAxisAttr axis : getAxes())
    if (axis.getName() != kExpertAxis) // a split of the shard axis
      ranks *= axis.getSize();
  return ranks;
}
