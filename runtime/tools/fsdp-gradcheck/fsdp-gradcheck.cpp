//===- fsdp-gradcheck.cpp - finite-difference check of a plan's gradients -===//
//
//   fsdp-gradcheck model.plan [--seed N] [--blas openblas|blis|onednn|auto]
//                  [--epsilon E] [--tolerance T]
//
// Runs the plan's forward and backward (every kernel but AdamW) on random
// inputs through the real runtime, reads each parameter's gradient from the
// buffer its AdamW would consume, and compares directional derivatives with
// central differences of the loss: for every parameter, along a random
// unit direction and along the normalised gradient itself, so that both a
// wrong direction and a wrong magnitude are caught. Prints one line per
// parameter and "gradcheck: N passed, M failed"; exits non-zero on any
// failure.
//
//===----------------------------------------------------------------------===//

#include "fsdp/runtime/comm/Communicator.h"
#include "fsdp/runtime/exec/Backend.h"
#include "fsdp/runtime/exec/Session.h"
#include "fsdp/runtime/plan/Plan.h"
#include "fsdp/runtime/support/CommandLine.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>

using namespace fsdp;
using namespace fsdp::rt;

namespace {
const char *const kUsage =
    "usage: fsdp-gradcheck PLAN [--seed N] [--blas openblas|blis|onednn|auto]\n"
    "                      [--epsilon E] [--tolerance T]\n";

[[noreturn]] void die(const std::string &message, int code = 1) {
  std::fprintf(stderr, "fsdp-gradcheck: error: %s\n", message.c_str());
  std::exit(code);
}

/// Random inputs: token ids below the vocabulary of the kernel that reads
/// them, class ids below the classifier's width, Gaussian features.
void fillInputs(const Plan &plan, Session &session, std::mt19937_64 &rng) {
  int64_t embedRows = 0, classes = 0;
  for (const Instruction &inst : plan.program) {
    if (inst.kernel->opcode == plan::Opcode::Embedding)
      embedRows = plan.buffers[inst.ins[1]].shape[0];
    if (inst.kernel->opcode == plan::Opcode::CrossEntropy)
      classes = plan.buffers[inst.ins[0]].shape.back();
  }
  for (size_t position = 0; position < plan.inputs.size(); ++position) {
    if (plan.inputs[position] == plan::kNone)
      continue;
    const BufferDesc &b = plan.buffers[plan.inputs[position]];
    if (b.dtype == plan::DType::F32) {
      std::normal_distribution<float> normal;
      std::vector<float> values(b.numElements());
      for (float &v : values)
        v = normal(rng);
      session.setInput(position, values.data(), b.size);
    } else {
      int64_t limit = position == 0 && embedRows ? embedRows : classes;
      std::uniform_int_distribution<int32_t> pick(0, int32_t(limit) - 1);
      std::vector<int32_t> values(b.numElements());
      for (int32_t &v : values)
        v = pick(rng);
      session.setInput(position, values.data(), b.size);
    }
  }
}

double dot(const std::vector<float> &a, const std::vector<float> &b) {
  double sum = 0.0;
  for (size_t i = 0; i < a.size(); ++i)
    sum += double(a[i]) * double(b[i]);
  return sum;
}

struct Options {
  std::string planPath, blas = "openblas";
  uint64_t seed = 1;
  double epsilon = 3e-3, tolerance = 2e-2;
};

/// The command line: a plan and the check's knobs.
Options parseOptions(int argc, char **argv) {
  Options o;
  ToolArguments args(argc, argv, kUsage, die);
  while (args.next()) {
    const std::string &arg = args.arg();
    args.answerHelp();
    if (arg == "--seed")
      o.seed = uint64_t(args.integer(0, INT64_MAX));
    else if (arg == "--blas")
      o.blas = args.value();
    else if (arg == "--epsilon")
      o.epsilon = args.number(1e-8, 1.0);
    else if (arg == "--tolerance")
      o.tolerance = args.number(0.0, 1e6);
    else if (!arg.empty() && arg[0] == '-')
      args.unknown();
    else if (arg.empty() || !o.planPath.empty())
      die(arg.empty() ? "the plan's path is empty"
                      : "more than one plan given ('" + o.planPath + "', '" +
                            arg + "')",
          2);
    else
      o.planPath = arg;
  }
  if (o.planPath.empty())
    die(std::string("no plan given\n") + kUsage, 2);
  return o;
}

/// Every parameter's gradient, read before any parameter moves: each
/// finite difference reruns the backward at a perturbed point. On one rank
/// a unit's shard is its whole flat tensor: a parameter is the slice
/// [unitOffset, unitOffset + numel) of it and of its gradient.
std::vector<std::vector<float>> readGradients(const Plan &plan,
                                              Session &session) {
  std::vector<std::vector<float>> grads;
  for (const ParamDesc &param : plan.params) {
    std::optional<uint32_t> gradBuffer = session.gradientShard(param.unit);
    if (!gradBuffer)
      die("unit '" + plan.units[param.unit].name +
          "' has no AdamW, hence no gradient");
    std::vector<float> flat = session.readBuffer(*gradBuffer);
    grads.emplace_back(flat.begin() + param.unitOffset,
                       flat.begin() + param.unitOffset + param.numElements());
  }
  return grads;
}

/// The disagreement of two derivatives beyond the float32 loss's noise,
/// relative to their size. A float32 loss is exact to a few units in the
/// last place (~2e-7 relative); the difference quotient turns that into an
/// absolute uncertainty of the numeric derivative. Only the disagreement
/// beyond it counts.
double relativeError(double analytic, double numeric, float loss,
                     double epsilon) {
  double noise = 2e-7 * std::fabs(loss) / epsilon;
  double excess = std::max(0.0, std::fabs(analytic - numeric) - noise);
  return excess / std::max({std::fabs(analytic), std::fabs(numeric), 1e-30});
}

/// Checks parameter `p` along a random unit direction and along its
/// normalised gradient; prints its line and returns whether it passed.
bool checkParam(const Plan &plan, Session &session, uint32_t p,
                const std::vector<float> &grad, float loss,
                std::mt19937_64 &rng, const Options &o) {
  const ParamDesc &param = plan.params[p];
  uint32_t shardBuffer = plan.units[param.unit].shardBuffer;
  const std::vector<float> shard = session.readBuffer(shardBuffer);
  std::vector<float> theta(shard.begin() + param.unitOffset,
                           shard.begin() + param.unitOffset +
                               param.numElements());

  std::normal_distribution<float> normal;
  std::vector<float> random(theta.size());
  for (float &v : random)
    v = normal(rng);
  std::vector<float> along = grad;
  double worst = -1.0; // below any error, so the first direction reports
  std::string detail;
  for (std::vector<float> *direction : {&random, &along}) {
    double norm = std::sqrt(dot(*direction, *direction));
    if (norm == 0.0)
      continue; // a zero gradient has no direction of its own
    for (float &v : *direction)
      v = float(v / norm);
    double analytic = dot(grad, *direction);
    auto lossAt = [&](double scale) {
      std::vector<float> moved = shard;
      for (size_t i = 0; i < theta.size(); ++i)
        moved[param.unitOffset + i] = theta[i] + float(scale) * (*direction)[i];
      session.writeBuffer(shardBuffer, moved);
      return double(session.forwardBackward());
    };
    double numeric = (lossAt(o.epsilon) - lossAt(-o.epsilon)) / (2 * o.epsilon);
    session.writeBuffer(shardBuffer, shard);
    double error = relativeError(analytic, numeric, loss, o.epsilon);
    if (error > worst) {
      worst = error;
      char text[160];
      std::snprintf(text, sizeof(text), "analytic %+.6e numeric %+.6e",
                    analytic, numeric);
      detail = text;
    }
  }
  worst = std::max(worst, 0.0);
  bool ok = worst <= o.tolerance;
  std::printf("gradcheck: %-28s %s rel %.2e %s\n", param.name.c_str(),
              detail.empty() ? "(zero gradient)" : detail.c_str(), worst,
              ok ? "ok" : "FAILED");
  return ok;
}
} // namespace

/// Loads the plan, runs it once and checks every parameter's gradient;
/// the exit code.
int run(int argc, char **argv) {
  Options options = parseOptions(argc, argv);
  Plan plan;
  std::string error;
  if (!loadPlan(options.planPath, plan, error))
    die(error);
  if (plan.worldSize != 1)
    die(options.planPath + ": compiled for world size " +
        std::to_string(plan.worldSize) + "; gradient checks run one rank");
  std::unique_ptr<Communicator> comm = createLocalCommunicator();
  std::unique_ptr<Backend> backend =
      createCpuBackend({1, options.blas, comm.get()}, error);
  if (!backend)
    die(error);
  Session session(plan, *backend, *comm);
  if (!session.initialize(options.seed, error))
    die(error);
  std::mt19937_64 rng(options.seed * 31 + 7);
  fillInputs(plan, session, rng);

  float loss = session.forwardBackward();
  std::printf("gradcheck: %s, loss %.6f\n", options.planPath.c_str(), loss);
  std::vector<std::vector<float>> grads = readGradients(plan, session);
  int passed = 0, failed = 0;
  for (uint32_t p = 0; p < plan.params.size(); ++p) {
    // A mixture of experts' selection bias has no gradient: its slot holds
    // the load signal that updates it (docs/moe.md).
    if (plan.params[p].isSelectionBias()) {
      std::printf("gradcheck: %-28s selection bias: no gradient, skipped\n",
                  plan.params[p].name.c_str());
      continue;
    }
    (checkParam(plan, session, p, grads[p], loss, rng, options) ? passed
                                                                : failed)++;
  }
  std::printf("gradcheck: %d passed, %d failed\n", passed, failed);
  return failed ? 1 : 0;
}

int main(int argc, char **argv) { return runTool(run, argc, argv, die); }
