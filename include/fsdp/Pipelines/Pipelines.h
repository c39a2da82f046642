//===- Pipelines.h - the fsdp compilation pipelines -------------*- C++ -*-===//
//
// The pipelines that chain passes from every stage (graph-level fsdp
// passes, the lowering, fsdprt passes); they live in their own library so
// that no stage depends on a later one.
//
//===----------------------------------------------------------------------===//

#ifndef FSDP_PIPELINES_PIPELINES_H
#define FSDP_PIPELINES_PIPELINES_H

#include "fsdp/Dialect/FSDP/Transforms/Passes.h"
#include "fsdp/Support/ByteSize.h"

#include "mlir/Pass/PassManager.h"
#include "mlir/Pass/PassOptions.h"

namespace mlir::fsdp {

/// Options of --fsdp-train-pipeline: one struct for every stage. Each
/// option sets one pass's option of the same name, and its default is that
/// pass's own default, read from the pass's generated options struct, so
/// the two cannot drift apart. Two are the pipeline's own: `world-size`
/// (it sets the mesh: --fsdp-mesh=shard=N, or checks mesh=RxS) and `policy`'s
/// default, `given` where --fsdp-wrap's is `per-block`, so that a wrapped input
/// keeps its units.
struct TrainPipelineOptions : public PassPipelineOptions<TrainPipelineOptions> {
  Option<int64_t> worldSize{
      *this, "world-size",
      llvm::cl::desc("Ranks to shard over (the mesh 1xN; the global batch is "
                     "split too); given with mesh, its rank count"),
      llvm::cl::init(FsdpMeshPassOptions().shard)};
  Option<std::string> mesh{
      *this, "mesh",
      llvm::cl::desc("The mesh RxS: R replicas of S-way sharding (1xN: "
                     "full sharding, Nx1: DDP; see --fsdp-mesh), or auto: "
                     "the budget search picks it for world-size ranks (see "
                     "--fsdp-fit-memory mesh)"),
      llvm::cl::init(FsdpMeshPassOptions().spec)};
  Option<std::string> expert{
      *this, "expert",
      llvm::cl::desc("Expert parallelism: the ranks of an expert group, "
                     "which splits the shard axis (see --fsdp-mesh expert "
                     "and --fsdp-expert-parallel; 1: none), or auto: the "
                     "budget search picks it (see --fsdp-fit-memory "
                     "experts)"),
      llvm::cl::init("1")};
  Option<double> moeCapacityFactor{
      *this, "moe-capacity-factor",
      llvm::cl::desc("Expert parallelism: the received rows' bound as a "
                     "multiple of the rows a rank sends (see "
                     "--fsdp-expert-parallel capacity-factor; 0: the worst "
                     "case)"),
      llvm::cl::init(FsdpExpertParallelPassOptions().capacityFactor)};
  Option<std::string> moeOverflow{
      *this, "moe-overflow",
      llvm::cl::desc("Expert parallelism with a capacity factor: fail (a "
                     "step past the capacity stops with an error) or drop "
                     "(its pairs past it are dropped and counted; see "
                     "--fsdp-expert-parallel overflow)"),
      llvm::cl::init(FsdpExpertParallelPassOptions().overflow)};
  Option<int64_t> ranksPerNode{
      *this, "ranks-per-node",
      llvm::cl::desc("The budget search prices steps on the two-level "
                     "network of nodes of this many ranks (see "
                     "--fsdp-fit-memory; 0: one level)"),
      llvm::cl::init(FsdpFitMemoryPassOptions().ranksPerNode)};
  Option<int64_t> forwardPrefetch{
      *this, "forward-prefetch",
      llvm::cl::desc("Forward regions ahead whose gathers start early"),
      llvm::cl::init(FsdpSchedulePassOptions().forwardPrefetch)};
  Option<int64_t> backwardPrefetch{
      *this, "backward-prefetch",
      llvm::cl::desc("Backward regions ahead whose gathers start early"),
      llvm::cl::init(FsdpSchedulePassOptions().backwardPrefetch)};
  Option<int64_t> maxInflightGathers{
      *this, "max-inflight-gathers",
      llvm::cl::desc("Gathers allowed in flight (0: no limit)"),
      llvm::cl::init(FsdpSchedulePassOptions().maxInflightGathers)};
  Option<bool> reshardAfterForward{
      *this, "reshard-after-forward",
      llvm::cl::desc("Free gathered parameters after each forward region"),
      llvm::cl::init(FsdpSchedulePassOptions().reshardAfterForward)};
  Option<bool> overlapAllToAll{
      *this, "overlap-all-to-all",
      llvm::cl::desc("Start expert parallelism's all-to-alls on their own "
                     "stream (see --fsdp-schedule)"),
      llvm::cl::init(FsdpSchedulePassOptions().overlapAllToAll)};
  Option<ByteSize> memoryBudget{
      *this, "memory-budget",
      llvm::cl::desc("Bytes a rank may use: 40GB, 37.5GiB, or bytes (0: no "
                     "budget)"),
      llvm::cl::init(FsdpSchedulePassOptions().memoryBudget)};
  Option<std::string> runtime{
      *this, "runtime",
      llvm::cl::desc("Whose memory outside the arena memory-budget counts: "
                     "cpu, cuda or none (see --fsdp-schedule)"),
      llvm::cl::init(FsdpSchedulePassOptions().runtime)};
  Option<int64_t> bucketBytes{
      *this, "bucket-bytes",
      llvm::cl::desc("Merge consecutive collectives into buckets of up to "
                     "this many bytes (see --fsdp-schedule)"),
      llvm::cl::init(FsdpSchedulePassOptions().bucketBytes)};
  Option<std::string> attention{
      *this, "attention",
      llvm::cl::desc("Attention's form: auto, materialized or blocked (see "
                     "--fsdp-attention)"),
      llvm::cl::init(FsdpAttentionPassOptions().impl)};
  Option<std::string> remat{
      *this, "remat",
      llvm::cl::desc("Recompute activations in the backward: none, full or "
                     "selective (see --fsdp-remat)"),
      llvm::cl::init(FsdpRematPassOptions().policy)};
  ListOption<std::string> rematOverrides{
      *this, "remat-overrides",
      llvm::cl::desc("Per-unit remat policies, UNIT-PATTERN=POLICY (see "
                     "--fsdp-remat overrides)")};
  Option<std::string> paramDtype{
      *this, "param-dtype",
      llvm::cl::desc("Gathered parameters, activations and gradients: f32 or "
                     "bf16 (default: the model's fsdp.param_dtype, else f32; "
                     "see --fsdp-mixed-precision)"),
      llvm::cl::init(FsdpMixedPrecisionPassOptions().paramDtype)};
  Option<std::string> reduceDtype{
      *this, "reduce-dtype",
      llvm::cl::desc("Reduce-scatters of full-size gradients: f32 or bf16 "
                     "(see --fsdp-mixed-precision)"),
      llvm::cl::init(FsdpMixedPrecisionPassOptions().reduceDtype)};
  Option<bool> shardCopy{
      *this, "shard-copy",
      llvm::cl::desc("At a shard group of one, keep each unit's shard in "
                     "param-dtype too, written by AdamW and read in place of "
                     "the gathers (see --fsdp-mixed-precision)"),
      llvm::cl::init(FsdpMixedPrecisionPassOptions().shardCopy)};
  Option<double> gradClip{
      *this, "grad-clip",
      llvm::cl::desc("Clip the gradients to this global norm (0: no "
                     "clipping; see --fsdp-clip-grad)"),
      llvm::cl::init(FsdpFitMemoryPassOptions().gradClip)};
  // The pipeline keeps the units its input has (fsdp-gen's, or the
  // author's); an explicit policy regroups.
  Option<std::string> policy{
      *this, "policy",
      llvm::cl::desc("Wrap policy (see --fsdp-wrap); given keeps the "
                     "input's units"),
      llvm::cl::init("given")};
  Option<bool> splitEnds{
      *this, "split-ends",
      llvm::cl::desc("Per-block: embedding and head in units of their own "
                     "(see --fsdp-wrap)"),
      llvm::cl::init(FsdpWrapPassOptions().splitEnds)};
  Option<int64_t> thresholdBytes{
      *this, "threshold-bytes",
      llvm::cl::desc("Smallest unit under policy=size-threshold"),
      llvm::cl::init(FsdpWrapPassOptions().thresholdBytes)};
  Option<double> learningRate{
      *this, "lr", llvm::cl::desc("AdamW lr"),
      llvm::cl::init(FsdpAutodiffPassOptions().learningRate)};
  Option<double> beta1{*this, "beta1", llvm::cl::desc("AdamW beta1"),
                       llvm::cl::init(FsdpAutodiffPassOptions().beta1)};
  Option<double> beta2{*this, "beta2", llvm::cl::desc("AdamW beta2"),
                       llvm::cl::init(FsdpAutodiffPassOptions().beta2)};
  Option<double> epsilon{*this, "eps", llvm::cl::desc("AdamW epsilon"),
                         llvm::cl::init(FsdpAutodiffPassOptions().epsilon)};
  Option<double> weightDecay{
      *this, "weight-decay", llvm::cl::desc("AdamW weight decay"),
      llvm::cl::init(FsdpAutodiffPassOptions().weightDecay)};
};

/// Adds the training pipeline to `pm`: mesh, wrap, data-parallel, autodiff,
/// shard, mixed precision, gradient clipping (grad-clip > 0), schedule,
/// verify, lower to the runtime, plan memory.
void buildTrainPipeline(OpPassManager &pm, const TrainPipelineOptions &options);

/// Registers --fsdp-train-pipeline.
void registerTrainPipeline();

} // namespace mlir::fsdp

#endif // FSDP_PIPELINES_PIPELINES_H
