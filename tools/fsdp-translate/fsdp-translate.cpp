//===- fsdp-translate.cpp - fsdp translations -----------------------------===//
//
//   fsdp-translate --fsdp-to-plan program.mlir -o model.plan
//
// (fsdp-opt writes the same plan directly when its output ends in .plan.)
//
//===----------------------------------------------------------------------===//

#include "fsdp/Target/PlanWriter.h"

#include "mlir/Support/LogicalResult.h"
#include "mlir/Tools/mlir-translate/MlirTranslateMain.h"

int main(int argc, char **argv) {
  mlir::fsdp::registerToPlanTranslation();
  return mlir::failed(
             mlir::mlirTranslateMain(argc, argv, "fsdp translations\n"))
             ? 1
             : 0;
}
