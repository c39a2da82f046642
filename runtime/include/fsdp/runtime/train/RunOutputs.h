//===- RunOutputs.h - parameters, trace and report files --------*- C++ -*-===//
//===//
//
// The formats of fsdp-run's outputs, each written through an OutputFile
// reserved before the run: the trained weights as safetensors (Weights.h),
// the measured timeline as a Chrome trace, and the run's figures as JSON.
//
//===----------------------------------------------------------------------===//

#ifndef FSDP_RUNTIME_RUNOUTPUTS_H
#define FSDP_RUNTIME_RUNOUTPUTS_H

#include "fsdp/runtime/exec/Session.h"
#include "fsdp/runtime/io/Weights.h"
#include "fsdp/runtime/plan/Plan.h"
#include "fsdp/runtime/support/OutputFile.h"
#include "fsdp/runtime/train/Trainer.h"

#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace fsdp::rt {

/// The measured timeline (Chrome trace JSON; Perfetto opens it), one
/// process per rank and one lane per stream, like --fsdp-simulate's.
/// traceBytes bounds its size for `steps` steps; with several ranks, rank
/// r writes traceFileFor(PATH, r, ranks): ".rank<r>" before the extension.
uint64_t traceBytes(const Plan &plan, int64_t steps);
std::string traceFileFor(const std::string &path, int rank, int ranks);
bool writeTrace(const Plan &plan, const Session &session, int rank,
                OutputFile &output, std::string &error);

/// What --report-json writes: the run's figures for scripts (the GPU
/// check, benchmarks), one JSON object. reportBytes bounds its size.
struct RunReport {
  std::string backend, collectives;
  int ranks = 1;
  bool skipCollectives = false;
  double secondsPerStep = 0.0, tokensPerSecond = 0.0;
  std::vector<float> losses;
  /// Each step's learning rate, and the schedule that gave them.
  std::vector<double> learningRates;
  std::string lrSchedule;
  /// One rank's model FLOPs per step (the plan's) and its device's peak
  /// FLOP/s (0: unknown); MFU is their ratio at secondsPerStep.
  double modelFlops = 0.0, peakFlops = 0.0;
  /// Each step's global gradient norm, and the norm they are clipped to,
  /// for a plan that clips its gradients (else empty, and no clip).
  std::vector<double> gradNorms;
  std::optional<double> gradClip;
  /// Every evaluation (--val-data), in step order.
  std::vector<ValidationPoint> validation;
  uint64_t arenaPredicted = 0, arenaMeasured = 0, peakPredicted = 0;
  /// The process heap (fsdp/runtime/support/HeapMeter.h), max over ranks: live
  /// after setup (the arena is part of it) and the high-water mark during
  /// training. Not written when the heap is not counted.
  bool heapCounted = false;
  uint64_t heapAfterSetup = 0, heapPeak = 0;
  /// The compiler's prediction of the bytes outside the arena on the
  /// backend that ran (the plan's summary).
  uint64_t outsidePredicted = 0;
  /// The CPU's bf16 widening buffer (Backend::HostBeyondPlan): with every
  /// bf16 GEMM widened, and as this run sized it. Written where known.
  bool wideningKnown = false;
  uint64_t wideningAll = 0, widening = 0;
  /// The resident set (ProcessMemory.h), max over ranks.
  bool rssMeasured = false;
  uint64_t rssAfterSetup = 0, rssPeak = 0;
  /// The compiler's prediction of the resident set on the CPU backend at
  /// the run's BLAS threads (Plan::predictedResident), else 0.
  uint64_t rssPredicted = 0;
  /// Device memory in use (Backend::DeviceMemory), where there is one.
  bool deviceMeasured = false;
  uint64_t deviceAfterSetup = 0, devicePeak = 0;
  /// Rank 0's device memory in use after each setup stage and the first
  /// step (Backend::DeviceMemory::stages): "device_stages".
  std::vector<std::pair<std::string, uint64_t>> deviceStages;
  /// Expert parallelism's all_to_all bytes per training step (moved to and
  /// from other ranks: TrainResult::allToAllBytes over the steps run),
  /// rank 0's and the max over ranks; written only for a plan with
  /// expert-parallel units.
  bool allToAllCounted = false;
  uint64_t allToAllPerStep = 0, allToAllPerStepMax = 0;
  /// Drop mode (docs/moe.md): each training step's dropped pairs over all
  /// ranks (TrainResult::droppedPairs); written only for a plan with
  /// moe_capacity_trim kernels.
  bool dropsPairs = false;
  std::vector<int64_t> droppedPairs;
};
/// Drop mode: the least and the most `capacity` (received rows a rank
/// keeps per layer) of the plan's moe_capacity_trim kernels; nullopt for a
/// plan without one (it drops nothing).
std::optional<std::pair<int64_t, int64_t>> moeCapacities(const Plan &plan);
/// The most bytes the report of `steps` steps and `evaluations`
/// evaluations takes.
uint64_t reportBytes(int64_t steps, int64_t evaluations);
bool writeReport(const RunReport &report, OutputFile &output,
                 std::string &error);
/// The report of a finished run: `result`'s figures next to the plan's
/// predictions, with the backend and collective mode it ran with.
RunReport makeRunReport(const Plan &plan, const TrainResult &result,
                        int64_t tokensPerStep, std::string backend,
                        std::string collectives, int ranks,
                        bool skipCollectives);

/// Where a run's outputs go (an empty path: not written) and their files,
/// reserved before the first step.
struct RunOutputPaths {
  std::string trace, report, weights;
  /// The names --export writes the weights by, their dtype
  /// (--export-dtype) and a directory's largest shard
  /// (--export-shard-size).
  WeightNaming weightNames = WeightNaming::HuggingFace;
  TensorDType weightDType = TensorDType::F32;
  uint64_t weightShardBytes = ExportSpec().shardBytes;
  /// The evaluations the report will list (its size grows with them).
  int64_t evaluations = 0;
};
struct RunOutputFiles {
  OutputFile trace, report;
  /// --export's file, or its directory's files.
  WeightsExport weights;
};
/// Checks and reserves every output of a run of `steps` steps: the weights
/// and the report on rank 0, the trace on every rank (its own file). On
/// failure returns false with `error` from the first that fails.
bool reserveRunOutputs(const Plan &plan, const RunOutputPaths &paths,
                       int64_t steps, int rank, int ranks,
                       RunOutputFiles &files, std::string &error);

} // namespace fsdp::rt

#endif // FSDP_RUNTIME_RUNOUTPUTS_H
