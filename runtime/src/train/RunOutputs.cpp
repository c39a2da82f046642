//===- RunOutputs.cpp - what a training run writes ------------------------===//

#include "fsdp/runtime/train/RunOutputs.h"
#include "fsdp/runtime/exec/MemoryTimeline.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <iterator>
#include <utility>

namespace fsdp::rt {

/// a * b + c, or INT64_MAX where that does not fit (--steps may be
/// 2^63 - 1): a reservation that large fails cleanly, naming the file.
static uint64_t bytesFor(uint64_t a, uint64_t b, uint64_t c) {
  uint64_t product, sum;
  if (__builtin_mul_overflow(a, b, &product) ||
      __builtin_add_overflow(product, c, &sum) || sum > uint64_t(INT64_MAX))
    return uint64_t(INT64_MAX);
  return sum;
}

uint64_t traceBytes(const Plan &plan, int64_t steps) {
  uint64_t perStep = 0;
  // A kernel's event, and on the compute lane its four memory counters:
  // about 430 characters of names and 13 figures of at most 20 digits.
  // An all_to_all's counter of its bytes: at most 120 more.
  for (const Instruction &inst : plan.program)
    perStep += 120 + inst.kernel->name.size() + inst.unit.size() + 800 +
               (inst.kernel->opcode == plan::Opcode::AllToAll ? 120 : 0);
  return bytesFor(perStep, uint64_t(steps), 4096);
}

std::string traceFileFor(const std::string &path, int rank, int ranks) {
  if (ranks == 1)
    return path;
  size_t dot = path.rfind('.');
  size_t slash = path.rfind('/');
  std::string suffix = ".rank" + std::to_string(rank);
  if (dot == std::string::npos || (slash != std::string::npos && dot < slash))
    return path + suffix;
  return path.substr(0, dot) + suffix + path.substr(dot);
}

/// The memory counters at a compute-lane event: the arena's live bytes by
/// kind and in all (the plan's lifetimes at the kernel's measured start),
/// the heap the sampler saw, and the arena's size and the compiler's
/// prediction of the heap outside it, constant.
static void writeMemoryCounters(std::ostream &out, const Plan &plan,
                                const LiveBytes &live,
                                const Session::TraceEvent &e, int rank) {
  using plan::BufferKind;
  auto kind = [&](BufferKind k) { return live.byKind[uint32_t(k)]; };
  char ts[64];
  std::snprintf(ts, sizeof(ts), "%.3f", e.start);
  auto counter = [&](const char *name) {
    out << ",\n{\"name\": \"" << name << "\", \"ph\": \"C\", \"pid\": " << rank
        << ", \"ts\": " << ts << ", \"args\": {";
  };
  counter("memory by kind");
  // A shard's copy in the compute type counts as parameters, as in the
  // compiler's peak rows.
  out << "\"parameters\": "
      << kind(BufferKind::Param) + kind(BufferKind::ShardCopy)
      << ", \"gradients\": " << kind(BufferKind::Grad) << ", \"optimizer\": "
      << kind(BufferKind::AdamM) + kind(BufferKind::AdamV)
      << ", \"gathered\": " << kind(BufferKind::Gathered)
      << ", \"activations\": " << kind(BufferKind::Activation)
      << ", \"scratch\": " << kind(BufferKind::Scratch)
      << ", \"inputs\": " << kind(BufferKind::Input) << "}}";
  counter("memory total");
  out << "\"arena live\": " << live.total() << "}}";
  counter("memory limits");
  out << "\"arena\": " << plan.arenaSize
      << ", \"predicted outside the arena\": " << plan.outsideArenaCpu << "}}";
  // The budget the plan was compiled for, constant, as the simulated
  // trace draws it.
  if (plan.memoryBudget) {
    counter("memory budget");
    out << "\"bytes\": " << plan.memoryBudget << "}}";
  }
  if (e.heapBytes) {
    counter("heap");
    out << "\"measured\": " << e.heapBytes << "}}";
  }
}

bool writeTrace(const Plan &plan, const Session &session, int rank,
                OutputFile &output, std::string &error) {
  std::vector<LiveBytes> live = liveBytesByInstruction(plan);
  return output.write(
      [&](std::ostream &out) {
        out << "{\"displayTimeUnit\": \"ms\", \"traceEvents\": [\n";
        const char *lanes[] = {"compute", "all-gather", "reduce-scatter",
                               "replica all-reduce", "all-to-all"};
        static_assert(std::size(lanes) == plan::kNumStreams);
        for (uint32_t lane = 0; lane < plan::kNumStreams; ++lane)
          out << "{\"name\": \"thread_name\", \"ph\": \"M\", \"pid\": " << rank
              << ", \"tid\": " << lane << ", \"args\": {\"name\": \""
              << lanes[lane] << "\"}},\n";
        out << "{\"name\": \"process_name\", \"ph\": \"M\", \"pid\": " << rank
            << ", \"args\": {\"name\": \"rank " << rank << "\"}}";
        char number[64];
        for (const Session::TraceEvent &e : session.traceEvents()) {
          const Instruction &inst = plan.program[e.instruction];
          // A group run as one pass (the multi-tensor AdamW) is one
          // event, "adamw_shard x13", its units in its arguments.
          out << ",\n{\"name\": \"" << inst.kernel->name
              << (e.members > 1       ? " x" + std::to_string(e.members)
                  : inst.unit.empty() ? ""
                                      : " @" + inst.unit)
              << "\", \"ph\": \"X\", "
              << "\"pid\": " << rank << ", \"tid\": " << e.lane;
          std::snprintf(number, sizeof(number), ", \"ts\": %.3f, \"dur\": %.3f",
                        e.start, e.duration);
          out << number << ", \"args\": {\"step\": " << e.step;
          if (e.members > 1) {
            out << ", \"units\": [";
            for (uint32_t k = 0; k < e.members; ++k)
              out << (k ? ", \"" : "\"") << plan.program[e.instruction + k].unit
                  << "\"";
            out << "]";
          }
          out << "}}";
          if (e.lane == 0)
            writeMemoryCounters(out, plan, live[e.instruction], e, rank);
          // Expert parallelism's traffic: what this rank's all_to_alls
          // have moved to and from other ranks so far, a rising track.
          if (inst.kernel->opcode == plan::Opcode::AllToAll) {
            std::snprintf(number, sizeof(number), "%.3f", e.start + e.duration);
            out << ",\n{\"name\": \"all-to-all bytes\", \"ph\": \"C\", "
                   "\"pid\": "
                << rank << ", \"ts\": " << number
                << ", \"args\": {\"moved\": " << e.allToAllBytes << "}}";
          }
        }
        out << "\n]}\n";
      },
      error);
}

// Fixed fields and the schedule's description, then a loss and a rate of
// at most 24 characters each per step, and per evaluation its step, loss,
// seconds and batches (at most 100 characters with their keys); the
// all-to-all figures take at most 100 more. Drop mode's dropped pairs: at
// most 21 characters more per step (19 digits and ", ").
uint64_t reportBytes(int64_t steps, int64_t evaluations) {
  return bytesFor(93, uint64_t(steps),
                  bytesFor(100, uint64_t(evaluations), 1700));
}

/// `values` as a JSON list of %.9g numbers.
static void writeNumbers(std::ostream &out, const std::vector<double> &values) {
  char number[64];
  out << "[";
  for (size_t i = 0; i < values.size(); ++i) {
    std::snprintf(number, sizeof(number), "%.9g", values[i]);
    out << (i ? ", " : "") << (std::isfinite(values[i]) ? number : "null");
  }
  out << "]";
}

/// Expert parallelism's figures: the all_to_alls' bytes per step, and in
/// drop mode each step's dropped pairs.
static void writeExpertFields(std::ostream &out, const RunReport &r) {
  if (r.allToAllCounted)
    out << ", \"all_to_all_bytes_per_step\": " << r.allToAllPerStep
        << ", \"all_to_all_bytes_per_step_max\": " << r.allToAllPerStepMax;
  if (!r.dropsPairs)
    return;
  out << ", \"moe_dropped_pairs\": [";
  for (size_t i = 0; i < r.droppedPairs.size(); ++i)
    out << (i ? ", " : "") << r.droppedPairs[i];
  out << "]";
}

/// `text` as a JSON string (a newline as a space).
static std::string quoted(const std::string &text) {
  std::string out = "\"";
  for (char c : text)
    out += c == '"' || c == '\\' ? std::string("\\") + c
           : c == '\n'           ? std::string(" ")
                                 : std::string(1, c);
  return out + "\"";
}

/// The resident set, the device's memory (with its setup stages) and the
/// heap, where each was measured.
static void writeMemoryFields(std::ostream &out, const RunReport &r) {
  if (r.rssMeasured)
    out << ", \"rss_bytes_after_setup\": " << r.rssAfterSetup
        << ", \"rss_bytes_peak\": " << r.rssPeak
        << ", \"rss_bytes_predicted\": " << r.rssPredicted;
  if (r.deviceMeasured)
    out << ", \"device_bytes_after_setup\": " << r.deviceAfterSetup
        << ", \"device_bytes_peak\": " << r.devicePeak;
  if (!r.deviceStages.empty()) {
    out << ", \"device_stages\": [";
    for (size_t i = 0; i < r.deviceStages.size(); ++i)
      out << (i ? ", " : "")
          << "{\"stage\": " << quoted(r.deviceStages[i].first)
          << ", \"bytes_in_use\": " << r.deviceStages[i].second << "}";
    out << "]";
  }
  if (r.heapCounted)
    out << ", \"heap_bytes_after_setup\": " << r.heapAfterSetup
        << ", \"heap_bytes_peak\": " << r.heapPeak;
}

bool writeReport(const RunReport &r, OutputFile &output, std::string &error) {
  return output.write(
      [&](std::ostream &out) {
        char number[64];
        out << "{\"backend\": " << quoted(r.backend)
            << ", \"collectives\": " << quoted(r.collectives)
            << ", \"ranks\": " << r.ranks << ", \"skip_collectives\": "
            << (r.skipCollectives ? "true" : "false");
        std::snprintf(number, sizeof(number), "%.4f", r.secondsPerStep * 1e3);
        out << ", \"ms_per_step\": " << number;
        std::snprintf(number, sizeof(number), "%.1f", r.tokensPerSecond);
        out << ", \"tokens_per_s\": " << number << ", \"losses\": [";
        for (size_t i = 0; i < r.losses.size(); ++i) {
          std::snprintf(number, sizeof(number), "%.9g", r.losses[i]);
          out << (i ? ", " : "")
              << (std::isfinite(r.losses[i]) ? number : "null");
        }
        out << "], \"lr_schedule\": " << quoted(r.lrSchedule)
            << ", \"learning_rates\": ";
        writeNumbers(out, r.learningRates);
        out << ", \"grad_norms\": ";
        writeNumbers(out, r.gradNorms);
        out << ", \"validation\": [";
        for (size_t i = 0; i < r.validation.size(); ++i) {
          const ValidationPoint &v = r.validation[i];
          std::snprintf(number, sizeof(number), "%.9g", v.loss);
          out << (i ? ", " : "") << "{\"step\": " << v.step
              << ", \"loss\": " << (std::isfinite(v.loss) ? number : "null");
          std::snprintf(number, sizeof(number), "%.6f", v.seconds);
          out << ", \"seconds\": " << number << ", \"batches\": " << v.batches
              << "}";
        }
        out << "]";
        if (r.gradClip) {
          std::snprintf(number, sizeof(number), "%.9g", *r.gradClip);
          out << ", \"grad_clip\": " << number;
        }
        std::snprintf(number, sizeof(number), "%.17g", r.modelFlops);
        out << ", \"model_flops_per_step\": " << number;
        if (r.peakFlops > 0.0 && r.secondsPerStep > 0.0) {
          std::snprintf(number, sizeof(number), "%.6g", r.peakFlops);
          out << ", \"peak_flops\": " << number;
          std::snprintf(number, sizeof(number), "%.6f",
                        r.modelFlops / r.secondsPerStep / r.peakFlops);
          out << ", \"mfu\": " << number;
        }
        out << ", \"arena_bytes_predicted\": " << r.arenaPredicted
            << ", \"arena_bytes_measured\": " << r.arenaMeasured
            << ", \"peak_bytes_predicted\": " << r.peakPredicted
            << ", \"outside_arena_bytes_predicted\": " << r.outsidePredicted;
        if (r.wideningKnown)
          out << ", \"bf16_widening_bytes\": {\"all_widened\": "
              << r.wideningAll << ", \"this_run\": " << r.widening << "}";
        writeMemoryFields(out, r);
        writeExpertFields(out, r);
        out << "}\n";
      },
      error);
}

RunReport makeRunReport(const Plan &plan, const TrainResult &result,
                        int64_t tokensPerStep, std::string backend,
                        std::string collectives, int ranks,
                        bool skipCollectives) {
  RunReport report;
  report.backend = std::move(backend);
  report.collectives = std::move(collectives);
  report.ranks = ranks;
  report.skipCollectives = skipCollectives;
  report.secondsPerStep = result.meanSeconds;
  report.tokensPerSecond = double(tokensPerStep) / result.meanSeconds;
  report.losses = result.losses;
  report.learningRates = result.learningRates;
  report.lrSchedule = result.lrSchedule;
  report.gradNorms = result.gradNorms;
  report.validation = result.validation;
  for (const Instruction &inst : plan.program)
    if (inst.kernel->opcode == plan::Opcode::ClipCoefficient)
      report.gradClip = inst.params[plan::paramIndex(
          plan::Opcode::ClipCoefficient, "max_norm")];
  if ((report.dropsPairs = moeCapacities(plan).has_value()))
    report.droppedPairs = result.droppedPairs;
  report.arenaPredicted = plan.arenaSize;
  report.arenaMeasured = result.highWaterMarkMax;
  report.peakPredicted = plan.peakBytes;
  return report;
}

std::optional<std::pair<int64_t, int64_t>> moeCapacities(const Plan &plan) {
  const plan::Opcode trim = plan::Opcode::MoeCapacityTrim;
  std::optional<std::pair<int64_t, int64_t>> range;
  for (const Instruction &inst : plan.program) {
    if (inst.kernel->opcode != trim)
      continue;
    auto capacity = int64_t(inst.params[plan::paramIndex(trim, "capacity")]);
    range = range ? std::make_pair(std::min(range->first, capacity),
                                   std::max(range->second, capacity))
                  : std::make_pair(capacity, capacity);
  }
  return range;
}

bool reserveRunOutputs(const Plan &plan, const RunOutputPaths &paths,
                       int64_t steps, int rank, int ranks,
                       RunOutputFiles &files, std::string &error) {
  bool lead = rank == 0;
  if (!paths.weights.empty() && lead &&
      !files.weights.reserve(plan,
                             ExportSpec{paths.weights, paths.weightNames,
                                        paths.weightDType,
                                        paths.weightShardBytes},
                             error))
    return false;
  if (!paths.trace.empty() &&
      !files.trace.reserve(traceFileFor(paths.trace, rank, ranks), "trace",
                           traceBytes(plan, steps), error))
    return false;
  return paths.report.empty() || !lead ||
         files.report.reserve(paths.report, "report",
                              reportBytes(steps, paths.evaluations), error);
}

} // namespace fsdp::rt
