//===- fsdp-opt.cpp - the fsdp compiler driver ----------------------------===//
//
// mlir-opt with the fsdp and fsdprt dialects, their passes and pipeline,
// and the upstream dialects and passes a training step needs. When the
// output file ends in `.plan`, the result is written as a plan file for
// fsdp-run instead of as IR:
//
//   fsdp-opt model.mlir --fsdp-train-pipeline -o model.plan
//
// A plan is only written (atomically) when every pass and the translation
// succeed: a failure leaves no partial file behind.
//
//===----------------------------------------------------------------------===//

#include "fsdp/Conversion/Passes.h"
#include "fsdp/Dialect/FSDP/IR/FSDP.h"
#include "fsdp/Dialect/FSDP/Transforms/Passes.h"
#include "fsdp/Dialect/Runtime/IR/Runtime.h"
#include "fsdp/Dialect/Runtime/Transforms/Passes.h"
#include "fsdp/Pipelines/Pipelines.h"
#include "fsdp/Target/PlanWriter.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Support/FileUtilities.h"
#include "mlir/Tools/mlir-opt/MlirOptMain.h"
#include "mlir/Transforms/Passes.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/ToolOutputFile.h"

using namespace mlir;

/// Runs the passes as mlir-opt would, then writes the result as a plan.
static LogicalResult writePlanOutput(StringRef inputFilename,
                                     StringRef outputFilename,
                                     DialectRegistry &registry) {
  MlirOptMainConfig config = MlirOptMainConfig::createFromCLOptions();
  if (config.shouldVerifyDiagnostics() || !config.inputSplitMarker().empty()) {
    llvm::errs() << "fsdp-opt: a .plan output takes one module: "
                    "-split-input-file and -verify-diagnostics do not apply\n";
    return failure();
  }
  config.emitBytecode(true);
  std::string errorMessage;
  std::unique_ptr<llvm::MemoryBuffer> input =
      openInputFile(inputFilename, &errorMessage);
  if (!input) {
    llvm::errs() << errorMessage << "\n";
    return failure();
  }
  std::string transformed;
  llvm::raw_string_ostream transformedStream(transformed);
  if (failed(
          MlirOptMain(transformedStream, std::move(input), registry, config)))
    return failure();

  MLIRContext context(registry);
  OwningOpRef<ModuleOp> module =
      parseSourceString<ModuleOp>(transformed, &context, inputFilename);
  if (!module)
    return failure();
  std::string planBytes;
  llvm::raw_string_ostream planStream(planBytes);
  if (failed(fsdp::writePlan(*module, planStream)))
    return failure();

  std::unique_ptr<llvm::ToolOutputFile> output =
      openOutputFile(outputFilename, &errorMessage);
  if (!output) {
    llvm::errs() << errorMessage << "\n";
    return failure();
  }
  output->os() << planBytes;
  output->os().flush();
  if (output->os().has_error()) {
    llvm::errs() << "fsdp-opt: could not write '" << outputFilename << "'\n";
    output->os().clear_error();
    return failure();
  }
  output->keep();
  return success();
}

int main(int argc, char **argv) {
  registerCanonicalizerPass();
  registerCSEPass();
  registerSymbolDCEPass();
  fsdp::registerFSDPPasses();
  fsdp::registerFSDPConversionPasses();
  fsdprt::registerFSDPRuntimePasses();
  fsdp::registerTrainPipeline();

  DialectRegistry registry;
  registry.insert<fsdp::FSDPDialect, fsdprt::FSDPRuntimeDialect,
                  func::FuncDialect, arith::ArithDialect>();
  auto [inputFilename, outputFilename] = registerAndParseCLIOptions(
      argc, argv, "fsdp compiler: models to FSDP training steps\n", registry);
  if (StringRef(outputFilename).ends_with(".plan"))
    return asMainReturnCode(
        writePlanOutput(inputFilename, outputFilename, registry));
  return asMainReturnCode(
      MlirOptMain(argc, argv, inputFilename, outputFilename, registry));
}
