//===- adamw-bench.cpp - one AdamW pass against one per segment -----------===//
//
//   fsdp-adamw-bench PLAN [--threads N] [--reps N]
//
// Times the optimizer of a plan's step three ways on the CPU kernels, on
// the step's own parameter segments (forEachShardSegment of every unit at
// rank 0, each with its decay), gradient type (f32 or bf16, as the plan's
// adamw_shard reads it) and shard copies (where the plan has them):
//
//   per segment  cpu::adamw on each segment: a parallel region for each
//                of 32768 elements or more, the rest on one thread (how
//                the executor ran AdamW before the multi-tensor pass);
//   per unit     cpu::adamwTensors on each unit's segments: a pass per
//                adamw_shard instruction;
//   one pass     cpu::adamwTensors on every segment of the step (what the
//                executor runs now: Backend::runOptimizer).
//
// Rounds interleave the three, each on its own state from the same start;
// it prints the median of N rounds of each, its bandwidth (the bytes each
// element's update reads and writes) and the ratio to per segment, after
// checking that the three states hold the same bits.
//
//===----------------------------------------------------------------------===//

#include "fsdp/runtime/plan/Plan.h"
#include "fsdp/runtime/support/BFloat16.h"
#include "fsdp/runtime/support/CommandLine.h"

#include "CpuModel.h"

#include "cpu/Kernels.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <omp.h>
#include <string>
#include <vector>

using namespace fsdp::rt;

namespace {
const char *const kUsage =
    "usage: fsdp-adamw-bench PLAN [--threads N] [--reps N]\n";

[[noreturn]] void die(const std::string &message, int code = 1) {
  std::fprintf(stderr, "fsdp-adamw-bench: error: %s\n", message.c_str());
  std::exit(code);
}

using fsdp::bench::cpuModel;

/// One AdamW segment of the step: where it lies in the flat arrays of all
/// shards, its unit, its decay.
struct Segment {
  int64_t at, n;
  uint32_t unit;
  bool decay;
};

/// The step's segments, and whether its gradients are bf16 and its units
/// have copies; dies on a plan without a sharded AdamW.
std::vector<Segment> stepSegments(const Plan &plan, bool &bf16Grad,
                                  bool &copies, int64_t &total) {
  std::vector<Segment> segments;
  const Instruction *adamw = nullptr;
  for (const Instruction &inst : plan.program)
    if (inst.kernel->opcode == fsdp::plan::Opcode::AdamWShard && !adamw)
      adamw = &inst;
  if (!adamw)
    die("the plan has no adamw_shard: nothing to time");
  bf16Grad = plan.buffers[adamw->ins[0]].dtype == fsdp::plan::DType::BF16;
  copies = adamw->outs.size() > 3;
  total = 0;
  for (uint32_t u = 0; u < plan.units.size(); ++u) {
    int64_t base = total;
    forEachShardSegment(
        plan, u, 0,
        [&](const ParamDesc &param, int64_t at, int64_t, int64_t count) {
          if (!param.isSelectionBias() && count > 0)
            segments.push_back({base + at, count, u, !param.noWeightDecay});
          total = std::max(total, base + at + count);
        });
  }
  return segments;
}

/// The arrays of one way of running it: shards, moments, copies.
struct State {
  std::vector<float> p, m, v;
  std::vector<uint16_t> copy;
};

AdamWTensor tensorOf(const Segment &s, State &state, const float *grad,
                     const uint16_t *gradBF16, bool copies) {
  AdamWTensor t;
  t.param = state.p.data() + s.at;
  t.m = state.m.data() + s.at;
  t.v = state.v.data() + s.at;
  t.grad = gradBF16 ? static_cast<const void *>(gradBF16 + s.at)
                    : static_cast<const void *>(grad + s.at);
  t.bf16Grad = gradBF16 != nullptr;
  t.copy = copies ? state.copy.data() + s.at : nullptr;
  t.n = s.n;
  t.lr = 3e-4f, t.beta1 = 0.9f, t.beta2 = 0.95f, t.eps = 1e-8f;
  t.weightDecay = s.decay ? 0.1f : 0.0f;
  return t;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

void parseOptions(int argc, char **argv, std::string &planPath, int &threads,
                  int &reps) {
  ToolArguments args(argc, argv, kUsage, die);
  while (args.next()) {
    const std::string &arg = args.arg();
    args.answerHelp();
    if (arg == "--threads")
      threads = int(args.integer(1, 4096));
    else if (arg == "--reps")
      reps = int(args.integer(1, 1000));
    else if (!arg.empty() && arg[0] == '-')
      args.unknown();
    else if (arg.empty() || !planPath.empty())
      die(arg.empty() ? "the plan's path is empty" : "more than one plan given",
          2);
    else
      planPath = arg;
  }
  if (planPath.empty())
    die(std::string("no plan given\n") + kUsage, 2);
}
} // namespace

int run(int argc, char **argv) {
  std::string planPath, error;
  int threads = 2, reps = 7;
  parseOptions(argc, argv, planPath, threads, reps);
  Plan plan;
  if (!loadPlan(planPath, plan, error))
    die(error);
  bool bf16Grad = false, copies = false;
  int64_t total = 0;
  std::vector<Segment> segments = stepSegments(plan, bf16Grad, copies, total);
  omp_set_num_threads(threads);

  std::vector<float> grad(size_t(total), 0.0f);
  std::vector<uint16_t> gradBF16(bf16Grad ? size_t(total) : 0);
  for (int64_t i = 0; i < total; ++i) {
    grad[i] = float((i * 7919) % 2001 - 1000) * 1e-5f;
    if (bf16Grad)
      gradBF16[i] = roundToBF16(grad[i]);
  }
  const State start{std::vector<float>(size_t(total), 0.02f),
                    std::vector<float>(size_t(total), 0.0f),
                    std::vector<float>(size_t(total), 0.0f),
                    std::vector<uint16_t>(copies ? size_t(total) : 0, 0)};
  const char *names[] = {"per segment", "per unit", "one pass"};
  State states[3] = {start, start, start};
  std::vector<double> times[3];
  const uint16_t *gb = bf16Grad ? gradBF16.data() : nullptr;
  std::vector<AdamWTensor> list;
  for (int r = 0; r < reps; ++r)
    for (int way = 0; way < 3; ++way) {
      auto begin = std::chrono::steady_clock::now();
      list.clear();
      for (size_t k = 0; k < segments.size(); ++k) {
        list.push_back(
            tensorOf(segments[k], states[way], grad.data(), gb, copies));
        bool unitEnds = k + 1 == segments.size() ||
                        segments[k + 1].unit != segments[k].unit;
        if (way == 0 || (way == 1 && unitEnds)) {
          cpu::adamwTensors(list.data(), list.size(), r + 1);
          list.clear();
        }
      }
      if (way == 2)
        cpu::adamwTensors(list.data(), list.size(), r + 1);
      times[way].push_back(std::chrono::duration<double>(
                               std::chrono::steady_clock::now() - begin)
                               .count());
    }
  for (int way = 1; way < 3; ++way)
    if (std::memcmp(states[way].p.data(), states[0].p.data(),
                    size_t(total) * 4) != 0 ||
        std::memcmp(states[way].m.data(), states[0].m.data(),
                    size_t(total) * 4) != 0 ||
        states[way].copy != states[0].copy)
      die(std::string(names[way]) + " and per segment differ");

  // Per element: param, m and v read and written, the gradient read, the
  // copy written.
  const double bytes =
      double(total) * (24 + (bf16Grad ? 2 : 4) + (copies ? 2 : 0));
  std::printf("adamw-bench: cpu %s, %d threads; %s: %zu segments in %zu "
              "units, %lld elements, %s gradients%s\n",
              cpuModel().c_str(), threads, planPath.c_str(), segments.size(),
              plan.units.size(), (long long)total, bf16Grad ? "bf16" : "f32",
              copies ? ", bf16 shard copies" : "");
  std::printf("\n| AdamW over the step | ms (median of %d) | GB/s | vs per "
              "segment |\n|---|---|---|---|\n",
              reps);
  for (int way = 0; way < 3; ++way) {
    double t = median(times[way]);
    std::printf("| %s | %.2f | %.1f | %.2fx |\n", names[way], t * 1e3,
                bytes / t * 1e-9, median(times[0]) / t);
  }
  return 0;
}

int main(int argc, char **argv) { return runTool(run, argc, argv, die); }
