//===- Pipelines.cpp - the fsdp training pipeline -------------------------===//

#include "fsdp/Dialect/FSDP/Transforms/Passes.h"

#include "mlir/Pass/PassManager.h"
#include "mlir/Pass/PassRegistry.h"

using namespace mlir;
using namespace mlir::fsdp;

void mlir::fsdp::buildTrainPipeline(OpPassManager &pm,
                                    const TrainPipelineOptions &options) {
  FsdpWrapPassOptions wrap;
  wrap.policy = options.policy;
  wrap.thresholdBytes = options.thresholdBytes;
  pm.addPass(createFsdpWrapPass(wrap));

  FsdpAutodiffPassOptions autodiff;
  autodiff.learningRate = options.learningRate;
  autodiff.beta1 = options.beta1;
  autodiff.beta2 = options.beta2;
  autodiff.epsilon = options.epsilon;
  autodiff.weightDecay = options.weightDecay;
  pm.addPass(createFsdpAutodiffPass(autodiff));
}

void mlir::fsdp::registerTrainPipeline() {
  PassPipelineRegistration<TrainPipelineOptions>(
      "fsdp-train-pipeline",
      "Turn a model into a training step: wrap into units, then autodiff "
      "(forward, backward, AdamW)",
      buildTrainPipeline);
}
