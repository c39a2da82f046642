//===- RuntimeDialect.cpp - fsdprt dialect registration -------------------===//

#include "fsdp/Dialect/Runtime/IR/PlanTypes.h"
#include "fsdp/Dialect/Runtime/IR/Runtime.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/DialectImplementation.h"
#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;
using namespace mlir::fsdprt;
namespace plan = ::fsdp::plan;

#include "fsdp/Dialect/Runtime/IR/RuntimeOpsDialect.cpp.inc"

#include "fsdp/Dialect/Runtime/IR/RuntimeEnums.cpp.inc"

#define GET_ATTRDEF_CLASSES
#include "fsdp/Dialect/Runtime/IR/RuntimeAttrs.cpp.inc"

void FSDPRuntimeDialect::initialize() {
  addOperations<
#define GET_OP_LIST
#include "fsdp/Dialect/Runtime/IR/RuntimeOps.cpp.inc"
      >();
  registerAttributes();
}

void FSDPRuntimeDialect::registerAttributes() {
  addAttributes<
#define GET_ATTRDEF_LIST
#include "fsdp/Dialect/Runtime/IR/RuntimeAttrs.cpp.inc"
      >();
}

// The dialect's buffer kinds are the plan's, value for value: a kind added
// to one side only, or renumbered, is a compile error here.
static_assert(getMaxEnumValForBufferKind() + 1 == plan::kNumBufferKinds);
#define FSDPRT_SAME_KIND(kind)                                                 \
  static_assert(uint32_t(BufferKind::kind) == uint32_t(plan::BufferKind::kind));
FSDPRT_SAME_KIND(Input)
FSDPRT_SAME_KIND(Param)
FSDPRT_SAME_KIND(Grad)
FSDPRT_SAME_KIND(AdamM)
FSDPRT_SAME_KIND(AdamV)
FSDPRT_SAME_KIND(Activation)
FSDPRT_SAME_KIND(Scratch)
FSDPRT_SAME_KIND(Gathered)
FSDPRT_SAME_KIND(ShardCopy)
#undef FSDPRT_SAME_KIND

bool mlir::fsdprt::isPersistent(BufferKind kind) {
  return plan::isPersistent(toPlanBufferKind(kind));
}

Type mlir::fsdprt::getElementType(plan::DType dtype, MLIRContext *context) {
  switch (dtype) { // every DType: -Werror=switch (CMakeLists.txt)
  case plan::DType::F32:
    return Float32Type::get(context);
  case plan::DType::I32:
    return IntegerType::get(context, 32);
  case plan::DType::BF16:
    return BFloat16Type::get(context);
  }
  llvm_unreachable("not a plan element type");
}

std::optional<plan::DType> mlir::fsdprt::getPlanDType(Type type) {
  for (uint32_t d = 0; d < plan::kNumDTypes; ++d)
    if (getElementType(plan::DType(d), type.getContext()) == type)
      return plan::DType(d);
  return std::nullopt;
}
