//===- fsdp-opt.cpp - the fsdp compiler driver ----------------------------===//
//
// mlir-opt with the fsdp and fsdprt dialects, their passes and pipeline,
// and the upstream dialects and passes a training step needs (and, for
// tests only, the test passes of test/lib). When the output file
// ends in `.plan`, the result is written as a plan file for fsdp-run
// instead of as IR:
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
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Support/FileUtilities.h"
#include "mlir/Tools/mlir-opt/MlirOptMain.h"
#include "mlir/Transforms/Passes.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/ToolOutputFile.h"

using namespace mlir;

namespace mlir::fsdp_test {
// Test-only passes (test/lib/Analysis): the network model on group shapes,
// declared here as mlir-opt declares upstream's test passes: their header
// stays out of the tool's include path.
void registerFSDPTestPasses();
} // namespace mlir::fsdp_test

/// Parses the input and runs the command line's passes on it in process,
/// as mlir-opt would (same pass manager options, verifier, timing).
static OwningOpRef<ModuleOp> runPasses(StringRef inputFilename,
                                       const MlirOptMainConfig &config,
                                       MLIRContext &context,
                                       llvm::SourceMgr &sourceMgr) {
  std::string errorMessage;
  std::unique_ptr<llvm::MemoryBuffer> input =
      openInputFile(inputFilename, &errorMessage);
  if (!input) {
    llvm::errs() << errorMessage << "\n";
    return {};
  }
  sourceMgr.AddNewSourceBuffer(std::move(input), llvm::SMLoc());
  context.allowUnregisteredDialects(config.shouldAllowUnregisteredDialects());
  OwningOpRef<ModuleOp> module =
      parseSourceFile<ModuleOp>(sourceMgr, ParserConfig(&context));
  if (!module)
    return {};
  PassManager pm(&context, ModuleOp::getOperationName(),
                 OpPassManager::Nesting::Implicit);
  pm.enableVerifier(config.shouldVerifyPasses());
  if (failed(applyPassManagerCLOptions(pm)))
    return {};
  applyDefaultTimingPassManagerCLOptions(pm);
  if (failed(config.setupPassPipeline(pm)) || failed(pm.run(*module)))
    return {};
  return module;
}

/// Runs the passes, then writes the result as a plan: the module goes from
/// the last pass to the plan writer in memory, never through text or
/// bytecode.
static LogicalResult writePlanOutput(StringRef inputFilename,
                                     StringRef outputFilename,
                                     DialectRegistry &registry) {
  MlirOptMainConfig config = MlirOptMainConfig::createFromCLOptions();
  if (config.shouldVerifyDiagnostics() || !config.inputSplitMarker().empty()) {
    llvm::errs() << "fsdp-opt: a .plan output takes one module: "
                    "-split-input-file and -verify-diagnostics do not apply\n";
    return failure();
  }
  MLIRContext context(registry);
  llvm::SourceMgr sourceMgr;
  SourceMgrDiagnosticHandler diagnostics(sourceMgr, &context);
  OwningOpRef<ModuleOp> module =
      runPasses(inputFilename, config, context, sourceMgr);
  if (!module)
    return failure();
  std::string planBytes;
  llvm::raw_string_ostream planStream(planBytes);
  if (failed(fsdp::writePlan(*module, planStream)))
    return failure();

  std::string errorMessage;
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
  fsdp_test::registerFSDPTestPasses();

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
