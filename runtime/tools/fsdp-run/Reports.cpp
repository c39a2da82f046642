//===- Reports.cpp - what fsdp-run prints and writes ----------------------===//

#include "Reports.h"
#include "Errors.h"

#include "fsdp/runtime/io/Checkpoint.h"
#include "fsdp/runtime/support/OutputFile.h"

#include <csignal>
#include <cstdio>
#include <vector>

namespace fsdprun {
namespace {
/// The model FLOPs and, where the peak is known, the utilisation.
/// The tokens are the global batch's, the FLOPs one rank's share of it.
void printFlops(const ProgressMeter &meter, double secondsPerStep, int ranks) {
  double flops = meter.modelFlopsPerStep();
  std::printf("summary: model FLOPs per rank and step %.4g (%.4g per "
              "token), %.3f TFLOP/s per rank; ",
              flops, flops * ranks / double(meter.tokensPerStep()),
              flops / secondsPerStep / 1e12);
  double mfu = meter.mfu(secondsPerStep);
  if (mfu >= 0.0)
    std::printf("MFU %.1f%% of %.1f TFLOP/s\n", 100.0 * mfu,
                meter.peakFlops() / 1e12);
  else
    std::printf("MFU not known (no peak for this device: --peak-tflops)\n");
}

/// The summary's validation line: the last loss, the first and the best.
void printValidationSummary(const std::vector<ValidationPoint> &points) {
  if (points.empty())
    return;
  const ValidationPoint *best = &points.front();
  double seconds = 0.0;
  for (const ValidationPoint &p : points) {
    seconds += p.seconds;
    if (p.loss < best->loss)
      best = &p;
  }
  std::printf("summary: validation loss %.6f after step %lld (first %.6f "
              "after step %lld, best %.6f after step %lld; %zu evaluations "
              "of %lld batches, %.3f s each)\n",
              points.back().loss, (long long)points.back().step,
              points.front().loss, (long long)points.front().step, best->loss,
              (long long)best->step, points.size(),
              (long long)points.back().batches, seconds / points.size());
}

/// Expert parallelism's all-to-all traffic per training step: rank 0's
/// (sent to and received from other ranks) and the max over ranks (the
/// routing decides how many rows each rank moves). Only where the plan
/// has expert-parallel units.
void printAllToAll(const Plan &plan, const TrainResult &r, int ranks) {
  if (!plan.hasExpertUnits() || r.losses.empty())
    return;
  uint64_t steps = r.losses.size();
  std::printf("summary: all-to-all %s per step per rank (rank 0, mean over "
              "%llu steps), %s max over %d ranks\n",
              bytes(r.allToAllBytes / steps).c_str(), (unsigned long long)steps,
              bytes(r.allToAllBytesMax / steps).c_str(), ranks);
}

/// Drop mode: the pairs the training steps dropped over all ranks, and
/// the capacity they were cut to. Only where the plan has
/// moe_capacity_trim kernels.
void printDropped(const Plan &plan, const TrainResult &r) {
  std::optional<std::pair<int64_t, int64_t>> capacity = moeCapacities(plan);
  if (!capacity || r.droppedPairs.empty())
    return;
  int64_t dropped = 0;
  for (int64_t n : r.droppedPairs)
    dropped += n;
  char rows[64];
  std::snprintf(rows, sizeof(rows),
                capacity->first == capacity->second ? "%lld" : "%lld..%lld",
                (long long)capacity->first, (long long)capacity->second);
  std::printf("summary: dropped %lld pairs over %zu steps (mixture of "
              "experts, capacity %s received rows per rank and layer)\n",
              (long long)dropped, r.droppedPairs.size(), rows);
}

void printSummary(const Plan &plan, const Options &o, const TrainResult &r,
                  const HeapFigures &heap, const ProgressMeter &meter,
                  int ranks) {
  // The steps this process ran: first.. (a resumed run starts later); the
  // mean leaves out the first of them when there are others.
  int64_t ran = int64_t(r.losses.size()), first = r.lastStep - ran + 1;
  char over[48];
  std::snprintf(over, sizeof(over), ran > 1 ? "%lld..%lld" : "%lld",
                (long long)(ran > 1 ? first + 1 : first),
                (long long)r.lastStep);
  std::printf("summary: %lld steps, loss %.6f -> %.6f, %.2f ms/step, %.0f "
              "tok/s (mean over steps %s)\n",
              (long long)ran, r.losses.front(), r.losses.back(),
              r.meanSeconds * 1e3, meter.tokensPerStep() / r.meanSeconds, over);
  printFlops(meter, r.meanSeconds, ranks);
  printValidationSummary(r.validation);
  std::printf(
      "summary: arena high-water mark per rank %s measured (max "
      "over %d ranks), %s predicted (%s)\n",
      bytes(r.highWaterMarkMax).c_str(), ranks, bytes(plan.arenaSize).c_str(),
      r.highWaterMark == plan.arenaSize && r.highWaterMarkMax == plan.arenaSize
          ? "match"
          : "MISMATCH");
  std::printf("summary: predicted live peak %s: params %llu, grads %llu, "
              "optimizer %llu, activations %llu, scratch %llu, gathered "
              "%llu, inputs %llu\n",
              bytes(plan.peakBytes).c_str(),
              (unsigned long long)plan.peak.params,
              (unsigned long long)plan.peak.grads,
              (unsigned long long)plan.peak.optimizer,
              (unsigned long long)plan.peak.activations,
              (unsigned long long)plan.peak.scratch,
              (unsigned long long)plan.peak.gathered,
              (unsigned long long)plan.peak.inputs);
  printHeap(plan, o, heap, ranks);
  printAllToAll(plan, r, ranks);
  printDropped(plan, r);
  if (o.heapBreakdown && heap.counted)
    printHeapBreakdown();
}

void printProfile(const KernelTimes &t, int64_t timedSteps) {
  double all = 0.0;
  for (double s : t.seconds)
    all += s;
  // On a device, the kernels' own time on it; waits and started
  // collectives there are what the host saw (docs/cuda.md).
  std::printf("profile: kernel time by kind over %lld steps (%s)\n",
              (long long)timedSteps,
              t.onDevice ? "GPU time, CUDA events" : "wall time on the host");
  for (size_t k = 0; k < plan::kKernels.size(); ++k)
    if (t.calls[k])
      std::printf("profile: %-24s %8lld calls %10.2f ms %6.1f%%\n",
                  std::string(plan::kKernels[k].name).c_str(),
                  (long long)t.calls[k], t.seconds[k] * 1e3,
                  100.0 * t.seconds[k] / all);
}
} // namespace

void printStart(const Options &o, const Plan &plan, const Backend &backend,
                const Communicator &comm, const std::string &collectiveMode,
                const StepInputs &inputs, const TokenData *tokens) {
  int64_t globalBatch = inputs.batch * comm.size();
  std::printf("fsdp-run: %s; %s; started collectives run %s\n",
              backend.description().c_str(), comm.description().c_str(),
              collectiveMode.c_str());
  if (o.skipCollectives)
    std::printf("fsdp-run: --skip-collectives: compute only, no "
                "communication; the losses mean nothing\n");
  std::printf("fsdp-run: %s, %zu parameters in %zu units, %zu kernels, "
              "global batch %lld, data %s\n",
              plan.path.c_str(), plan.params.size(), plan.units.size(),
              plan.program.size(), (long long)globalBatch,
              tokens ? tokens->source().c_str() : "(synthetic teacher)");
  if (tokens)
    std::printf("fsdp-run: data: %zu tokens (%s), %lld batches of %lld x "
                "%lld per epoch, %lld tail tokens unused\n",
                tokens->size(), tokens->formatName(),
                (long long)tokens->windowsPerEpoch(globalBatch, inputs.seq),
                (long long)globalBatch, (long long)inputs.seq,
                (long long)tokens->unusedTail(globalBatch, inputs.seq));
}

void printValidationPlan(const Options &o, const Plan &plan, const Validator &v,
                         int64_t tokensPerBatch) {
  const ValidationOptions &s = v.settings();
  std::string when =
      s.every ? "after every " + std::to_string(s.every) + " steps and the last"
              : "after the last step";
  std::printf("fsdp-run: validation: %lld batches (%lld tokens) of %s %s "
              "(the plan's evaluation step: %u of %zu kernels, %zu "
              "collectives finished at its end)\n",
              (long long)s.batches, (long long)(s.batches * tokensPerBatch),
              o.valDataPath.c_str(), when.c_str(), plan.evalKernels,
              plan.program.size(), plan.evalDrainTokens.size());
}

void printWeightLines(const Options &o, const Plan &plan,
                      const InitialWeights *weights, WeightNaming naming) {
  if (weights)
    std::printf("fsdp-run: --init-from %s: %s\n", o.initFromPath.c_str(),
                weights->summary().c_str());
  if (!o.exportPath.empty() && o.exportNames.empty() &&
      naming == WeightNaming::Ours)
    std::printf("fsdp-run: --export %s: our names (only fsdp-gen's GPT-2 "
                "and Llama have Hugging Face names; this is %s)\n",
                o.exportPath.c_str(),
                detectFamily(plan) == ModelFamily::MLP ? "an MLP"
                                                       : "another model");
}

void printValidation(const ValidationPoint &p, int64_t tokensPerBatch) {
  std::printf("fsdp-run: validation after step %lld: loss %.6f over %lld "
              "batches (%lld tokens) in %.3f s\n",
              (long long)p.step, p.loss, (long long)p.batches,
              (long long)(p.batches * tokensPerBatch), p.seconds);
}

int reportStop(const Options &o, const Communicator &comm, int64_t step,
               int signal) {
  removeTemporaryFiles();
  if (comm.rank() != 0)
    return kStoppedExitCode;
  const char *name = signal == SIGINT    ? "SIGINT"
                     : signal == SIGTERM ? "SIGTERM"
                                         : "a signal";
  if (o.checkpointDir.empty())
    std::printf("fsdp-run: %s at step %lld: stopped (no --checkpoint-dir: "
                "nothing saved)\n",
                name, (long long)step);
  else
    std::printf("fsdp-run: %s at step %lld: checkpoint %s written; resume "
                "with --resume %s\n",
                name, (long long)step,
                stepDirectory(o.checkpointDir, step).c_str(),
                o.checkpointDir.c_str());
  std::fflush(stdout);
  return kStoppedExitCode;
}

void finish(const Options &o, const Plan &plan, Session &session,
            const Backend &backend, const Communicator &comm,
            const std::string &collectiveMode, const TrainResult &result,
            const HeapFigures &heap, const ProgressMeter &meter,
            RunOutputFiles &outputs, WeightNaming naming) {
  int64_t tokensPerStep = meter.tokensPerStep();
  std::string error;
  bool lead = comm.rank() == 0;
  std::vector<std::vector<float>> finalParams;
  if (!o.exportPath.empty())
    finalParams = session.gatherParams();
  if (lead)
    printSummary(plan, o, result, heap, meter, comm.size());
  if (o.profile && lead)
    printProfile(session.kernelTimes(), result.timedSteps);
  if (outputs.weights.active()) {
    if (!outputs.weights.write(plan, finalParams, error))
      die(error);
    std::printf("fsdp-run: exported %zu parameters to %s (%s names)\n",
                plan.params.size(), outputs.weights.summary().c_str(),
                naming == WeightNaming::Ours ? "our" : "Hugging Face");
    if (!outputs.weights.noConfigReason().empty())
      std::printf("fsdp-run: --export %s: no config.json written: %s\n",
                  o.exportPath.c_str(),
                  outputs.weights.noConfigReason().c_str());
  }
  if (outputs.report.active()) {
    RunReport report =
        makeRunReport(plan, result, tokensPerStep, backend.description(),
                      collectiveMode, comm.size(), o.skipCollectives);
    report.heapCounted = heap.counted;
    report.heapAfterSetup = heap.afterSetup;
    report.heapPeak = heap.peak;
    report.outsidePredicted =
        o.backend == "cpu" ? heap.outsideArenaCpu(plan) : plan.outsideArenaCuda;
    report.wideningKnown = heap.beyondPlan.widens;
    report.wideningAll = heap.beyondPlan.wideningAll;
    report.widening = heap.beyondPlan.widening;
    report.rssMeasured = heap.rss.measured;
    report.rssAfterSetup = heap.rssAfterSetup.now;
    report.rssPeak = heap.rss.peak;
    if (o.backend == "cpu")
      report.rssPredicted = heap.predictedResident(plan, runThreads(o));
    report.deviceMeasured = heap.device.measured;
    report.deviceAfterSetup = heap.device.afterSetup;
    report.devicePeak = heap.device.peak;
    for (const Backend::DeviceMemory::Stage &stage : heap.device.stages)
      report.deviceStages.emplace_back(stage.name, stage.used);
    if ((report.allToAllCounted = plan.hasExpertUnits()) &&
        !result.losses.empty()) {
      report.allToAllPerStep = result.allToAllBytes / result.losses.size();
      report.allToAllPerStepMax =
          result.allToAllBytesMax / result.losses.size();
    }
    report.modelFlops = meter.modelFlopsPerStep();
    report.peakFlops = meter.peakFlops();
    if (!writeReport(report, outputs.report, error))
      die(error);
  }
  if (outputs.trace.active() &&
      !writeTrace(plan, session, comm.rank(), outputs.trace, error))
    die(error);
}

} // namespace fsdprun
