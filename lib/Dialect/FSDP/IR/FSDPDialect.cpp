//===- FSDPDialect.cpp - fsdp dialect registration and checks -------------===//

#include "fsdp/Dialect/FSDP/IR/FSDP.h"
#include "fsdp/Dialect/FSDP/IR/ModelConfig.h"
#include "fsdp/runtime/ShardLayout.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/DialectImplementation.h"
#include "llvm/ADT/TypeSwitch.h"
#include "llvm/Support/CheckedArithmetic.h"
#include "llvm/Support/MathExtras.h"

#include <limits>

using namespace mlir;
using namespace mlir::fsdp;

#include "fsdp/Dialect/FSDP/IR/FSDPOpsDialect.cpp.inc"

#define GET_TYPEDEF_CLASSES
#include "fsdp/Dialect/FSDP/IR/FSDPOpsTypes.cpp.inc"

#include "fsdp/Dialect/FSDP/IR/FSDPInterfaces.cpp.inc"

void FSDPDialect::initialize() {
  addOperations<
#define GET_OP_LIST
#include "fsdp/Dialect/FSDP/IR/FSDPOps.cpp.inc"
      >();
  addTypes<
#define GET_TYPEDEF_LIST
#include "fsdp/Dialect/FSDP/IR/FSDPOpsTypes.cpp.inc"
      >();
  registerAttributes();
}

/// fsdp.schedule_choice: a module's schedule knobs, from --fsdp-fit-memory.
static LogicalResult verifyScheduleChoice(Operation *op, NamedAttribute attr) {
  StringRef name = attr.getName().getValue();
  auto dict = llvm::dyn_cast<DictionaryAttr>(attr.getValue());
  auto isCount = [&](StringRef key) {
    auto v = dict ? dict.getAs<IntegerAttr>(key) : IntegerAttr();
    return v && v.getInt() >= 0;
  };
  // shard_copy is optional (mixed precision's copies at a shard group of
  // one; absent where the choice leaves them to the pass's option).
  Attribute copy = dict ? dict.get("shard_copy") : Attribute();
  if (!llvm::isa<ModuleOp>(op) || !isCount("forward_prefetch") ||
      !isCount("backward_prefetch") || !isCount("bucket_bytes") ||
      !dict.getAs<BoolAttr>("reshard_after_forward") ||
      !dict.getAs<BoolAttr>("overlap_all_to_all") ||
      (copy && !llvm::isa<BoolAttr>(copy)))
    return emitError(op->getLoc())
           << "'" << name
           << "' must be a module's {forward_prefetch, backward_prefetch, "
              "bucket_bytes (counts), reshard_after_forward, "
              "overlap_all_to_all, optional shard_copy (bools)}";
  return success();
}

/// fsdp.remat: a unit's recomputation policy.
static LogicalResult verifyRemat(Operation *op, NamedAttribute attr) {
  auto policy = llvm::dyn_cast<StringAttr>(attr.getValue());
  if (!llvm::isa<UnitOp>(op) || !policy ||
      !llvm::is_contained({"none", "full", "selective"}, policy.getValue()))
    return emitError(op->getLoc())
           << "'" << attr.getName().getValue()
           << "' must be \"none\", \"full\" or \"selective\" on an fsdp.unit";
  return success();
}

/// fsdp.param_dtype: the compute type a module asks for.
static LogicalResult verifyParamDtype(Operation *op, NamedAttribute attr) {
  auto type = llvm::dyn_cast<TypeAttr>(attr.getValue());
  if (!llvm::isa<ModuleOp>(op) || !type ||
      !llvm::isa<Float32Type, BFloat16Type>(type.getValue()))
    return emitError(op->getLoc())
           << "'" << attr.getName().getValue()
           << "' must be a module's f32 or bf16 (the compute type its "
              "parameters are gathered in)";
  return success();
}

/// `fsdp.forward` and `fsdp.train_step` mark functions whose single result
/// is the scalar loss; everything downstream (autodiff, the runtime's
/// progress line) relies on that, so it is a verifier rule, not a pass check.
LogicalResult FSDPDialect::verifyOperationAttribute(Operation *op,
                                                    NamedAttribute attr) {
  StringRef name = attr.getName().getValue();
  if (name == kMeshAttrName) {
    if (!llvm::isa<ModuleOp>(op) || !llvm::isa<MeshAttr>(attr.getValue()))
      return emitError(op->getLoc())
             << "'" << name << "' must be a #fsdp.mesh on a module";
    return success();
  }
  if (name == kBatchSplitAttrName) {
    if (!llvm::isa<func::FuncOp>(op) || !llvm::isa<UnitAttr>(attr.getValue()))
      return emitError(op->getLoc())
             << "'" << name << "' must be a unit attribute on a func.func";
    return success();
  }
  if (name == kMaxInflightGathersAttrName) {
    auto size = llvm::dyn_cast<IntegerAttr>(attr.getValue());
    if (!llvm::isa<ModuleOp>(op) || !size || size.getInt() < 1)
      return emitError(op->getLoc())
             << "'" << name << "' must be a positive integer on a module";
    return success();
  }
  if (name == kScheduleChoiceAttrName)
    return verifyScheduleChoice(op, attr);
  if (name == kRematAttrName)
    return verifyRemat(op, attr);
  if (name == kParamDtypeAttrName)
    return verifyParamDtype(op, attr);
  if (name == kActiveRowsAttrName) {
    auto rows = llvm::dyn_cast<IntegerAttr>(attr.getValue());
    if (!llvm::isa<MoeGroupedLinearOp, MoeGroupedLinearGradInputOp,
                   MoeGroupedLinearGradWeightOp>(op) ||
        !rows || rows.getInt() < 0)
      return emitError(op->getLoc())
             << "'" << name
             << "' must be a non-negative integer on a grouped linear";
    return success();
  }
  if (name == kHFConfigAttrName) {
    if (!llvm::isa<ModuleOp>(op) || !llvm::isa<StringAttr>(attr.getValue()))
      return emitError(op->getLoc())
             << "'" << name
             << "' must be a string on a module (a Hugging Face config.json)";
    return success();
  }
  if (name != kForwardAttrName && name != kTrainStepAttrName)
    return emitError(op->getLoc())
           << "unknown fsdp dialect attribute '" << name << "'";
  if (!llvm::isa<UnitAttr>(attr.getValue()))
    return emitError(op->getLoc())
           << "'" << name << "' must be a unit attribute";
  auto func = llvm::dyn_cast<func::FuncOp>(op);
  if (!func)
    return emitError(op->getLoc())
           << "'" << name << "' may only be attached to a func.func";
  FunctionType type = func.getFunctionType();
  auto loss = type.getNumResults() == 1
                  ? llvm::dyn_cast<RankedTensorType>(type.getResult(0))
                  : RankedTensorType();
  if (!loss || loss.getRank() != 0 ||
      !llvm::isa<FloatType>(loss.getElementType()))
    return emitError(func.getLoc())
           << "'" << name
           << "' function must return exactly one scalar loss (a 0-d float "
              "tensor such as tensor<f32>), but it returns "
           << type.getResults();
  for (auto [index, input] : llvm::enumerate(type.getInputs())) {
    auto tensor = llvm::dyn_cast<RankedTensorType>(input);
    if (name == kForwardAttrName && (!tensor || !tensor.hasStaticShape()))
      return emitError(func.getLoc())
             << "'" << name << "' function input #" << index
             << " must be a statically shaped tensor, got " << input;
    if (tensor && tensor.hasStaticShape() &&
        failed(verifySizeFits(
            func, "'" + name + "' function input #" + llvm::Twine(index),
            tensor)))
      return failure();
  }
  return success();
}

StringRef mlir::fsdp::getBlockPrefix(StringRef paramName) {
  size_t pos = 0;
  while (pos < paramName.size()) {
    size_t dot = paramName.find('.', pos);
    StringRef component = paramName.slice(pos, dot);
    if (!component.empty() &&
        llvm::all_of(component, [](char c) { return llvm::isDigit(c); }))
      return paramName.take_front(dot == StringRef::npos ? paramName.size()
                                                         : dot);
    if (dot == StringRef::npos)
      break;
    pos = dot + 1;
  }
  return StringRef();
}

int64_t mlir::fsdp::getElementSizeInBytes(Type type) {
  return llvm::divideCeil(type.getIntOrFloatBitWidth(), 8);
}

// The verifiers call these for every value of every op: the overflow
// builtins, not APInt (llvm::checkedMul), keep them cheap.
std::optional<int64_t>
mlir::fsdp::getCheckedNumElements(ArrayRef<int64_t> shape) {
  int64_t elements = 1;
  for (int64_t dim : shape)
    if (dim < 0 || llvm::MulOverflow(elements, dim, elements))
      return std::nullopt;
  return elements;
}

std::optional<int64_t> mlir::fsdp::getCheckedSizeInBytes(Type type) {
  auto shaped = llvm::dyn_cast<ShapedType>(type);
  if (!shaped || !llvm::isa<RankedTensorType, MemRefType>(type))
    return 0;
  if (!shaped.hasStaticShape())
    return std::nullopt;
  std::optional<int64_t> elements = getCheckedNumElements(shaped.getShape());
  int64_t bytes;
  if (!elements ||
      llvm::MulOverflow(*elements,
                        getElementSizeInBytes(shaped.getElementType()), bytes))
    return std::nullopt;
  return bytes;
}

int64_t mlir::fsdp::getSizeInBytes(Type type) {
  if (!llvm::isa<RankedTensorType>(type))
    return 0;
  std::optional<int64_t> bytes = getCheckedSizeInBytes(type);
  assert(bytes && "the verifier rejects tensors whose size overflows int64");
  return *bytes;
}

LogicalResult mlir::fsdp::verifySizeFits(Operation *op, const llvm::Twine &what,
                                         Type type) {
  if (getCheckedSizeInBytes(type))
    return success();
  // At the location only: a note printing the op would print a whole
  // function when the op is one.
  return emitError(op->getLoc())
         << "'" << op->getName() << "' op " << what << " of type " << type
         << " holds more than " << std::numeric_limits<int64_t>::max()
         << " bytes, the most the compiler can count (int64)";
}

LogicalResult mlir::fsdp::verifyTensorSizesFit(Operation *op) {
  for (auto [i, type] : llvm::enumerate(op->getOperandTypes()))
    if (llvm::isa<RankedTensorType>(type) &&
        failed(verifySizeFits(op, "operand #" + llvm::Twine(i), type)))
      return failure();
  for (auto [i, type] : llvm::enumerate(op->getResultTypes()))
    if (llvm::isa<RankedTensorType>(type) &&
        failed(verifySizeFits(op, "result #" + llvm::Twine(i), type)))
      return failure();
  return success();
}

// The layout is the plan format's: compiler and runtime must agree on it
// element for element.
ShardRange mlir::fsdp::getShardRange(int64_t size, int64_t rank,
                                     int64_t worldSize) {
  ::fsdp::plan::ShardRange range =
      ::fsdp::plan::shardRange(size, rank, worldSize);
  return {range.begin, range.end};
}

int64_t mlir::fsdp::getMaxShardSize(int64_t size, int64_t worldSize) {
  return ::fsdp::plan::maxShardSize(size, worldSize);
}

MeshAttr mlir::fsdp::getMesh(Operation *op) {
  auto module = llvm::dyn_cast<ModuleOp>(op);
  if (!module)
    module = op->getParentOfType<ModuleOp>();
  return module ? module->getAttrOfType<MeshAttr>(kMeshAttrName) : MeshAttr();
}

Type mlir::fsdp::getRequestedParamDtype(ModuleOp module) {
  auto type = module->getAttrOfType<TypeAttr>(kParamDtypeAttrName);
  return type ? type.getValue() : Type();
}

int64_t mlir::fsdp::getShardSize(Operation *op) {
  MeshAttr mesh = getMesh(op);
  return mesh ? mesh.getShardSize() : 1;
}

int64_t UnitOp::getShardGroupSize() {
  MeshAttr mesh = getMesh(*this);
  if (!mesh)
    return 1;
  return getExpertParallel() ? mesh.getShardSize() / mesh.getExpertSize()
                             : mesh.getShardSize();
}

int64_t mlir::fsdp::getNumRanks(Operation *op) {
  MeshAttr mesh = getMesh(op);
  return mesh ? mesh.getNumRanks() : 1;
}
