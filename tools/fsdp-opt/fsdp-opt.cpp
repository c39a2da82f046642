//===- fsdp-opt.cpp - the fsdp compiler driver ----------------------------===//
//
// mlir-opt with the fsdp dialect, its passes and pipeline, and the upstream
// dialects and passes a training step needs.
//
//===----------------------------------------------------------------------===//

#include "fsdp/Dialect/FSDP/IR/FSDP.h"
#include "fsdp/Dialect/FSDP/Transforms/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/Tools/mlir-opt/MlirOptMain.h"
#include "mlir/Transforms/Passes.h"

int main(int argc, char **argv) {
  mlir::registerCanonicalizerPass();
  mlir::registerCSEPass();
  mlir::registerSymbolDCEPass();
  mlir::fsdp::registerFSDPPasses();
  mlir::fsdp::registerTrainPipeline();

  mlir::DialectRegistry registry;
  registry.insert<mlir::fsdp::FSDPDialect, mlir::func::FuncDialect,
                  mlir::arith::ArithDialect>();
  return mlir::asMainReturnCode(mlir::MlirOptMain(
      argc, argv, "fsdp compiler: models to FSDP training steps\n", registry));
}
