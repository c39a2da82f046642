//===- FSDPTestDialect.cpp - fsdp_test, a test-only dialect ---------------===//
//
// The C++ half of the test ops: the KernelOpInterface methods that
// FSDP_KernelOpBase leaves to the dialect. None of them matter to the
// tests but getKernelScratch and getKernelOpcode, which are what the ops
// get wrong; the rest exist because the interface requires them.
//
//===----------------------------------------------------------------------===//

#include "FSDPTestDialect.h"
#include "fsdp/runtime/PlanFormat.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinTypes.h"

using namespace mlir;
using namespace mlir::fsdp_test;

#include "FSDPTestOpsDialect.cpp.inc"

void FSDPTestDialect::initialize() {
  addOperations<
#define GET_OP_LIST
#include "FSDPTestOps.cpp.inc"
      >();
}

void mlir::fsdp_test::registerFSDPTestDialect(DialectRegistry &registry) {
  registry.insert<FSDPTestDialect>();
}

// No cost model: the ops never reach --fsdp-simulate.
double GeluOp::getFlops() { return 0.0; }
double NotGeluOp::getFlops() { return 0.0; }
double LinearOp::getFlops() { return 0.0; }
double AttentionBackwardOp::getFlops() { return 0.0; }
double CrossEntropyOp::getFlops() { return 0.0; }
double ReluOp::getFlops() { return 0.0; }
double NoKernelOp::getFlops() { return 0.0; }

/// A scratch buffer that relu's kernel does not have.
void ReluOp::getKernelScratch(SmallVectorImpl<RankedTensorType> &scratch) {
  scratch.push_back(llvm::cast<RankedTensorType>(getResult().getType()));
}

/// The first opcode past the table, which no plan::Opcode enumerator names.
uint32_t NoKernelOp::getKernelOpcode() {
  return uint32_t(::fsdp::plan::kNumOpcodes);
}

#define GET_OP_CLASSES
#include "FSDPTestOps.cpp.inc"
