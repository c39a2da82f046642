//===- Pipelines.cpp - the fsdp training pipeline -------------------------===//

#include "fsdp/Pipelines/Pipelines.h"

#include "fsdp/Conversion/Passes.h"
#include "fsdp/Dialect/FSDP/Transforms/Passes.h"
#include "fsdp/Dialect/Runtime/Transforms/Passes.h"

#include "mlir/Pass/PassManager.h"
#include "mlir/Pass/PassRegistry.h"

using namespace mlir;
using namespace mlir::fsdp;

/// The schedule's options, which the schedule and the budget's search
/// (whose trial compiles schedule the same way) both take.
template <typename PassOptions>
static PassOptions scheduleOptions(const TrainPipelineOptions &options) {
  PassOptions o;
  o.forwardPrefetch = options.forwardPrefetch;
  o.backwardPrefetch = options.backwardPrefetch;
  o.maxInflightGathers = options.maxInflightGathers;
  o.bucketBytes = options.bucketBytes;
  o.memoryBudget = options.memoryBudget;
  o.runtime = options.runtime;
  o.reshardAfterForward = options.reshardAfterForward;
  o.overlapAllToAll = options.overlapAllToAll;
  return o;
}

/// The mesh: world-size=N alone is 1xN; mesh=RxS must have R * S = N
/// where N is given; mesh=auto leaves RxS to the budget's search.
static void addMeshPass(OpPassManager &pm,
                        const TrainPipelineOptions &options) {
  // mesh=auto: world-size=N is the world; the budget search picks RxS
  // (--fsdp-fit-memory's mesh=auto), which needs N: without it there is no
  // mesh, and the search says so.
  bool autoMesh = options.mesh == "auto";
  FsdpMeshPassOptions mesh;
  if (options.mesh.empty() || autoMesh) {
    mesh.shard = options.worldSize;
  } else {
    mesh.spec = options.mesh;
    // Checked only where given: world-size's default is one rank.
    if (options.worldSize.getNumOccurrences() > 0)
      mesh.worldSize = options.worldSize;
  }
  // expert=auto: the budget search adds the axis; otherwise a whole number
  // (--fsdp-mesh refuses one below 1).
  if (options.expert != "auto" &&
      llvm::StringRef(options.expert).getAsInteger(10, mesh.expert))
    mesh.expert = kExpertOptionNotANumber;
  if (!autoMesh || options.worldSize.getNumOccurrences() > 0)
    pm.addPass(createFsdpMeshPass(mesh));
}

/// The budget search's options. With a budget, the search chooses
/// attention's form (within what attention= allows) and each unit's
/// recomputation (fsdp.remat on the units, which --fsdp-remat follows), and
/// with mesh=auto or expert=auto the mesh; without one, --fsdp-attention
/// chooses the form.
static FsdpFitMemoryPassOptions
fitOptions(const TrainPipelineOptions &options) {
  auto fit = scheduleOptions<FsdpFitMemoryPassOptions>(options);
  fit.attention = options.attention;
  fit.paramDtype = options.paramDtype;
  fit.reduceDtype = options.reduceDtype;
  fit.shardCopy = options.shardCopy;
  fit.gradClip = options.gradClip;
  if (options.mesh == "auto")
    fit.mesh = "auto";
  if (options.expert == "auto")
    fit.experts = "auto";
  fit.moeCapacityFactor = options.moeCapacityFactor;
  fit.moeOverflow = options.moeOverflow;
  if (options.ranksPerNode.getNumOccurrences() > 0)
    fit.ranksPerNode = options.ranksPerNode;
  return fit;
}

void mlir::fsdp::buildTrainPipeline(OpPassManager &pm,
                                    const TrainPipelineOptions &options) {
  addMeshPass(pm, options);

  FsdpWrapPassOptions wrap;
  wrap.policy = options.policy;
  wrap.thresholdBytes = options.thresholdBytes;
  wrap.splitEnds = options.splitEnds;
  pm.addPass(createFsdpWrapPass(wrap));

  pm.addPass(createFsdpDataParallelPass());

  pm.addPass(createFsdpFitMemoryPass(fitOptions(options)));
  // After the search, which may have chosen the expert axis (its trials
  // run this pass themselves).
  FsdpExpertParallelPassOptions experts;
  experts.capacityFactor = options.moeCapacityFactor;
  experts.overflow = options.moeOverflow;
  pm.addPass(createFsdpExpertParallelPass(experts));

  if (options.memoryBudget == 0) {
    FsdpAttentionPassOptions attention;
    attention.impl = options.attention;
    pm.addPass(createFsdpAttentionPass(attention));
  }

  FsdpAutodiffPassOptions autodiff;
  autodiff.learningRate = options.learningRate;
  autodiff.beta1 = options.beta1;
  autodiff.beta2 = options.beta2;
  autodiff.epsilon = options.epsilon;
  autodiff.weightDecay = options.weightDecay;
  pm.addPass(createFsdpAutodiffPass(autodiff));

  FsdpRematPassOptions remat;
  remat.policy = options.remat;
  remat.overrides.assign(options.rematOverrides.begin(),
                         options.rematOverrides.end());
  pm.addPass(createFsdpRematPass(remat));

  pm.addPass(createFsdpShardPass());

  FsdpMixedPrecisionPassOptions precision;
  precision.paramDtype = options.paramDtype;
  precision.reduceDtype = options.reduceDtype;
  precision.shardCopy = options.shardCopy;
  pm.addPass(createFsdpMixedPrecisionPass(precision));

  // 0 is off; a negative norm reaches the pass, which rejects it.
  if (options.gradClip != 0.0) {
    FsdpClipGradPassOptions clip;
    clip.maxNorm = options.gradClip;
    pm.addPass(createFsdpClipGradPass(clip));
  }

  pm.addPass(createFsdpSchedulePass(
      scheduleOptions<FsdpSchedulePassOptions>(options)));
  pm.addPass(createFsdpVerifyPass());

  pm.addPass(createFsdpLowerToRuntimePass());
  // The budget travels into the plan (fsdp-run's trace draws it).
  fsdprt::FsdpPlanMemoryPassOptions planMemory;
  planMemory.memoryBudget = options.memoryBudget;
  pm.addPass(fsdprt::createFsdpPlanMemoryPass(planMemory));
}

void mlir::fsdp::registerTrainPipeline() {
  PassPipelineRegistration<TrainPipelineOptions>(
      "fsdp-train-pipeline",
      "Turn a model into a runtime step program: set the mesh, wrap into "
      "units, split the batch, choose attention's form, autodiff (forward, "
      "backward, AdamW), shard over world-size ranks, set the mixed "
      "precision, clip gradients by their global norm (grad-clip), schedule "
      "collectives, verify, lower to buffers and kernels, plan memory",
      buildTrainPipeline);
}
