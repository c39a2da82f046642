//===- StepCheck.cpp - a plan's training steps against the AdamW formula --===//
//
//   [mpirun -np N] fsdp-step-check PLAN [--steps S] [--seed N]
//       --lr X --beta1 X --beta2 X --eps X --weight-decay X
//       [--no-decay NAME,NAME,...] [--dump-grads FILE]
//       [--max-norm X] [--poison-transients]
//
// Runs the real plan through the runtime (Session on the CPU backend, the
// collectives over MPI under mpirun) and checks every step against a
// reference computed here in double precision:
//
// * every parameter is set to values that depend only on its name and
//   element index (so biases and norms are nonzero and decay is visible,
//   and every world size starts from the same point), and every step's
//   inputs are a global batch that depends only on the step and element
//   index, each rank feeding its own rows of it;
// * before each step, the full parameters and the full gradients (each
//   unit's gradient shard, the buffer its AdamW reads, gathered over ranks)
//   are read after a forward and backward (Session::forwardBackward);
// * the step runs (forward, backward, AdamW) and the full parameters and
//   AdamW moments are gathered again;
// * each element is compared with AdamW, written here from its
//   definition with the hyperparameters of the command line (not the
//   plan's), moments kept in double from zero: m = b1 m + (1 - b1) g,
//   v = b2 v + (1 - b2) g^2, p -= lr (m / (1 - b1^t) / (sqrt(v / (1 - b2^t))
//   + eps) + wd p), with wd = 0 for the parameters that --no-decay names
//   (the plan's no_weight_decay flags must name the same set).
//
// It prints which parameters straddle a shard boundary (so a test can
// require that a split no-decay parameter is among those checked), the
// worst error per parameter and "step-check: N elements checked, M
// failed"; exits 1 on any failure. --dump-grads writes, from rank 0, the
// global loss and every parameter's full gradient of step 1 as text, for
// comparing world sizes (test/Runtime/Inputs/compare_grads.py); without
// the hyperparameters that is all it does.
//
// --max-norm X checks gradient clipping (a plan compiled with
// grad-clip=X): the global norm the step reports (Session::gradNorm) is
// the norm of the full gradients computed here in double, and the update
// is AdamW on gradient x min(1, X / (norm + 1e-6)). --poison-transients
// fills every buffer that does not persist between steps with 1000 before
// each forward-backward and each step: a kernel that read one before
// writing it, or a sum of squares that counted a shorter shard's unused
// last element, would show.
//
//===----------------------------------------------------------------------===//

#include "fsdp/runtime/comm/Communicator.h"
#include "fsdp/runtime/exec/Backend.h"
#include "fsdp/runtime/exec/Session.h"
#include "fsdp/runtime/plan/Plan.h"
#include "fsdp/runtime/support/CommandLine.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <vector>

using namespace fsdp;
using namespace fsdp::rt;

namespace {
Communicator *gComm = nullptr;

[[noreturn]] void die(const std::string &message, int code = 1) {
  std::fprintf(stderr, "fsdp-step-check: error: %s\n", message.c_str());
  std::fflush(stderr);
  if (gComm && gComm->size() > 1)
    gComm->abort(code);
  std::exit(code);
}

const char *const kUsage =
    "usage: fsdp-step-check PLAN --lr X --beta1 X --beta2 X --eps X "
    "--weight-decay X\n"
    "           [--no-decay A,B] [--steps S] [--seed N] [--dump-grads FILE]\n"
    "           [--max-norm X] [--poison-transients]\n"
    "   or: fsdp-step-check PLAN --dump-grads FILE [--seed N] (step 1's "
    "gradients only)\n";

/// A counter-based hash: the same value for the same arguments on every
/// rank and world size.
uint64_t mix(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}
uint64_t hashName(const std::string &name) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : name)
    h = (h ^ c) * 1099511628211ull;
  return h;
}
/// Uniform in [-1, 1).
double uniform(uint64_t a, uint64_t b, uint64_t c) {
  return double(mix(mix(mix(a) ^ b) ^ c) >> 11) * 0x1.0p-52 - 1.0;
}

struct Options {
  std::string planPath, dumpPath;
  int64_t steps = 1;
  uint64_t seed = 1;
  double lr = -1, beta1 = -1, beta2 = -1, eps = -1, weightDecay = -1;
  std::set<std::string> noDecay;
  bool checkAdamW = true; ///< else only dump step 1's gradients
  double maxNorm = 0;     ///< > 0: the plan clips to it
  bool poison = false;
};

Options parse(int argc, char **argv) {
  Options o;
  ToolArguments args(argc, argv, kUsage, die);
  while (args.next()) {
    const std::string &arg = args.arg();
    args.answerHelp();
    if (arg == "--steps")
      o.steps = args.integer(1, 1000000);
    else if (arg == "--seed")
      o.seed = uint64_t(args.integer(0, INT64_MAX));
    else if (arg == "--lr")
      o.lr = args.number(0.0, 10.0);
    else if (arg == "--beta1")
      o.beta1 = args.number(0.0, 1.0);
    else if (arg == "--beta2")
      o.beta2 = args.number(0.0, 1.0);
    else if (arg == "--eps")
      o.eps = args.number(0.0, 1.0);
    else if (arg == "--weight-decay")
      o.weightDecay = args.number(0.0, 10.0);
    else if (arg == "--no-decay") {
      std::stringstream list(args.value());
      std::string name;
      while (std::getline(list, name, ','))
        if (!name.empty())
          o.noDecay.insert(name);
    } else if (arg == "--dump-grads")
      o.dumpPath = args.value();
    else if (arg == "--max-norm")
      o.maxNorm = args.number(0.0, 1e30);
    else if (arg == "--poison-transients")
      o.poison = true;
    else if (!arg.empty() && arg[0] == '-')
      args.unknown();
    else if (arg.empty())
      die("the plan's path is empty", 2);
    else
      o.planPath = arg;
  }
  bool check = o.lr >= 0 || o.beta1 >= 0 || o.beta2 >= 0 || o.eps >= 0 ||
               o.weightDecay >= 0;
  if (o.planPath.empty() ||
      (check && (o.lr < 0 || o.beta1 < 0 || o.beta2 < 0 || o.eps < 0 ||
                 o.weightDecay < 0)) ||
      (!check && o.dumpPath.empty()))
    die(kUsage, 2);
  o.checkAdamW = check;
  return o;
}

/// The AdamW instruction that updates unit `unit`'s shard.
const Instruction *adamwOf(const Plan &plan, uint32_t unit) {
  for (const Instruction &inst : plan.program)
    if ((inst.kernel->opcode == plan::Opcode::AdamWShard ||
         inst.kernel->opcode == plan::Opcode::AdamW) &&
        inst.outs[0] == plan.units[unit].shardBuffer)
      return &inst;
  return nullptr;
}

/// Buffer `buffer` holds rank k's shard of unit `unit`: the full flat
/// tensor, gathered from all ranks.
std::vector<float> gatherUnit(Session &session, Communicator &comm,
                              const Plan &plan, uint32_t unit,
                              uint32_t buffer) {
  std::vector<float> shard = session.readBuffer(buffer);
  std::vector<float> full(plan.units[unit].flatSize);
  comm.allGatherFrom(shard.data(), full.data(), plan.units[unit].flatSize);
  return full;
}

/// Per parameter, its slice of each unit's flat tensor.
std::vector<std::vector<float>>
byParam(const Plan &plan, const std::vector<std::vector<float>> &units) {
  std::vector<std::vector<float>> out;
  for (const ParamDesc &p : plan.params) {
    const std::vector<float> &flat = units[p.unit];
    out.emplace_back(flat.begin() + p.unitOffset,
                     flat.begin() + p.unitOffset + p.numElements());
  }
  return out;
}

/// Every buffer that does not live from one step to the next, set to 1000
/// (in bf16 buffers, whatever those bytes are).
void poisonTransients(const Plan &plan, Session &session) {
  for (uint32_t id = 0; id < plan.buffers.size(); ++id)
    if (!plan::isPersistent(plan.buffers[id].kind))
      session.writeBuffer(
          id, std::vector<float>(plan.buffers[id].numElements(), 1000.0f));
}

/// The global norm of the full gradients, in double.
double globalNorm(const std::vector<std::vector<float>> &grads) {
  double sum = 0.0;
  for (const std::vector<float> &g : grads)
    for (float x : g)
      sum += double(x) * double(x);
  return std::sqrt(sum);
}

/// Random inputs of step `step`: each rank writes its rows of a global
/// batch whose element i depends only on (seed, step, position, i).
void feed(const Plan &plan, Session &session, Communicator &comm, uint64_t seed,
          int64_t step) {
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
    int64_t n = b.numElements(), first = n * comm.rank();
    if (b.dtype == plan::DType::F32) {
      std::vector<float> values(n);
      for (int64_t i = 0; i < n; ++i)
        values[i] = float(uniform(seed, step * 16 + position, first + i));
      session.setInput(uint32_t(position), values.data(), b.size);
    } else {
      int64_t limit = position == 0 && embedRows ? embedRows : classes;
      std::vector<int32_t> values(n);
      for (int64_t i = 0; i < n; ++i)
        values[i] = int32_t(
            mix(mix(seed ^ (step * 16 + position)) ^ uint64_t(first + i)) %
            uint64_t(limit));
      session.setInput(uint32_t(position), values.data(), b.size);
    }
  }
}
/// The steps of a plan run and checked on the ranks of `comm`: the plan's
/// settings against the options, every parameter's AdamW update against
/// the formula in double, the clipped norm against the full gradients'.
class StepChecker {
public:
  StepChecker(const Options &o, Communicator &comm, const Plan &plan,
              Session &session)
      : o(o), comm(comm), plan(plan), session(session), lead(comm.rank() == 0),
        N(comm.size()) {}

  /// Checks the plan, sets the parameters, runs the steps; the exit code.
  int run() {
    checkNoDecay();
    printLayout();
    checkClip();
    setParams();
    findAdamW();
    size_t P = plan.params.size();
    m.resize(P), v.resize(P);
    for (size_t p = 0; p < P; ++p) {
      m[p].assign(plan.params[p].numElements(), 0.0);
      v[p].assign(plan.params[p].numElements(), 0.0);
    }
    worst.assign(P, 0.0);
    for (int64_t t = 1; t <= o.steps; ++t)
      if (!step(t))
        break;
    report();
    return failed ? 1 : 0;
  }

private:
  const Options &o;
  Communicator &comm;
  const Plan &plan;
  Session &session;
  bool lead;
  int N;
  int64_t failed = 0, checked = 0;
  std::vector<const Instruction *> adamw;
  /// The reference's AdamW moments, and each parameter's worst error as a
  /// share of its tolerance.
  std::vector<std::vector<double>> m, v;
  std::vector<double> worst;

  void fail(const std::string &what) {
    if (++failed <= 20 && lead)
      std::printf("FAILED %s\n", what.c_str());
  }

  /// The no-decay set the test expects is the one the plan carries.
  void checkNoDecay() {
    for (const ParamDesc &p : plan.params)
      if (o.checkAdamW && p.noWeightDecay != bool(o.noDecay.count(p.name)))
        fail(p.name + ": the plan says " +
             (p.noWeightDecay ? "no_weight_decay" : "decay") +
             ", the test expects the other");
    for (const std::string &name : o.noDecay) {
      bool found = false;
      for (const ParamDesc &p : plan.params)
        found |= p.name == name;
      if (!found)
        fail("--no-decay names '" + name + "', which the plan does not have");
    }
  }

  /// Rank 0's lines on which parameters a shard boundary splits (at this
  /// world size) and which units' shards differ by one element (a shorter
  /// one leaves the last element of its shard buffer unused).
  void printLayout() {
    std::string straddleDecay, straddleNoDecay;
    for (const ParamDesc &p : plan.params)
      for (int k = 1; k < N; ++k) {
        int64_t at = plan::shardRange(plan.units[p.unit].flatSize, k, N).begin;
        if (at > p.unitOffset && at < p.unitOffset + p.numElements()) {
          (p.noWeightDecay ? straddleNoDecay : straddleDecay) += " " + p.name;
          break;
        }
      }
    std::string uneven;
    for (const UnitDesc &u : plan.units)
      if (u.flatSize % N != 0)
        uneven += " " + u.name;
    if (lead)
      std::printf("step-check: %s, %d rank%s\nstep-check: split by a shard "
                  "boundary: decay [%s ], no-decay [%s ]\nstep-check: units "
                  "whose shards differ by one element: [%s ]\n",
                  o.planPath.c_str(), N, N == 1 ? "" : "s",
                  straddleDecay.c_str(), straddleNoDecay.c_str(),
                  uneven.c_str());
  }

  /// The plan clips as --max-norm says.
  void checkClip() {
    std::optional<double> clip = session.maxGradNorm();
    if (o.checkAdamW && (clip.has_value() != (o.maxNorm > 0) ||
                         (clip && float(*clip) != float(o.maxNorm))))
      fail("the plan clips to " + (clip ? std::to_string(*clip) : "nothing") +
           ", the test expects " +
           (o.maxNorm > 0 ? std::to_string(o.maxNorm) : "nothing"));
  }

  /// Every parameter to values of its name and index alone.
  void setParams() {
    for (uint32_t u = 0; u < plan.units.size(); ++u) {
      std::vector<float> shard = session.readBuffer(plan.units[u].shardBuffer);
      forEachShardSegment(plan, u, comm.rank(),
                          [&](const ParamDesc &param, int64_t at, int64_t begin,
                              int64_t count) {
                            uint64_t h = hashName(param.name);
                            for (int64_t i = 0; i < count; ++i)
                              shard[at + i] =
                                  float(0.5 * uniform(o.seed, h, begin + i));
                          });
      session.writeBuffer(plan.units[u].shardBuffer, shard);
    }
  }

  void findAdamW() {
    adamw.resize(plan.units.size());
    for (uint32_t u = 0; u < plan.units.size(); ++u)
      if (!(adamw[u] = adamwOf(plan, u)))
        die("unit '" + plan.units[u].name + "' has no AdamW");
  }

  /// Every parameter's full values: 0 the parameters, 1 their gradients,
  /// 2 and 3 AdamW's moments.
  std::vector<std::vector<float>> gatherAll(int which) {
    std::vector<std::vector<float>> units;
    for (uint32_t u = 0; u < plan.units.size(); ++u) {
      uint32_t buffer = which == 0   ? plan.units[u].shardBuffer
                        : which == 1 ? adamw[u]->ins[0]
                                     : adamw[u]->outs[which - 1];
      units.push_back(gatherUnit(session, comm, plan, u, buffer));
    }
    return byParam(plan, units);
  }

  /// --dump: the loss and step 1's full gradients, for comparing world
  /// sizes.
  void dumpGradients(double loss,
                     const std::vector<std::vector<float>> &grads) {
    FILE *f = std::fopen(o.dumpPath.c_str(), "w");
    if (!f)
      die(o.dumpPath + ": cannot write");
    std::fprintf(f, "loss %.9e\n", loss);
    for (size_t p = 0; p < grads.size(); ++p) {
      std::fprintf(f, "grad %s %zu", plan.params[p].name.c_str(),
                   grads[p].size());
      for (float g : grads[p])
        std::fprintf(f, " %.9e", g);
      std::fprintf(f, "\n");
    }
    std::fclose(f);
  }

  /// Clipping: the reported norm is the full gradients', and AdamW sees
  /// them scaled by PyTorch's coefficient (returned; 1 without clipping).
  double clipCoefficient(int64_t t,
                         const std::vector<std::vector<float>> &grads,
                         std::optional<double> reported) {
    double norm = globalNorm(grads), coef = 1.0;
    if (o.maxNorm > 0) {
      coef = std::min(1.0, o.maxNorm / (norm + 1e-6));
      if (lead)
        std::printf("step-check: step %lld grad norm %.7g, reference %.7g, "
                    "clip coefficient %.7g\n",
                    (long long)t, reported.value_or(-1.0), norm, coef);
      if (!reported || !(std::fabs(*reported - norm) <= 2e-6 * norm))
        fail("step " + std::to_string(t) + ": grad norm " +
             std::to_string(reported.value_or(-1.0)) + ", reference " +
             std::to_string(norm));
    }
    return coef;
  }

  /// Step `t`'s parameters and moments against AdamW in double on the
  /// (clipped) gradients.
  void checkUpdate(int64_t t, double coef,
                   const std::vector<std::vector<float>> &grads,
                   const std::vector<std::vector<float>> &before) {
    std::vector<std::vector<float>> after = gatherAll(0), ms = gatherAll(2),
                                    vs = gatherAll(3);
    const double c1 = 1.0 - std::pow(o.beta1, double(t)),
                 c2 = 1.0 - std::pow(o.beta2, double(t));
    for (size_t p = 0; p < plan.params.size(); ++p) {
      const ParamDesc &param = plan.params[p];
      double wd = o.noDecay.count(param.name) ? 0.0 : o.weightDecay;
      for (size_t i = 0; i < grads[p].size(); ++i) {
        double g = grads[p][i] * coef, x = before[p][i];
        m[p][i] = o.beta1 * m[p][i] + (1.0 - o.beta1) * g;
        v[p][i] = o.beta2 * v[p][i] + (1.0 - o.beta2) * g * g;
        double want =
            x -
            o.lr * (m[p][i] / c1 / (std::sqrt(v[p][i] / c2) + o.eps) + wd * x);
        // float32 rounding of the parameter, and of an update of size lr
        // (the errors seen are under a fifth of this).
        double tol = 2e-7 * std::fabs(x) + 1e-5 * o.lr;
        double err = std::fabs(double(after[p][i]) - want);
        double errM = std::fabs(double(ms[p][i]) - m[p][i]);
        double errV = std::fabs(double(vs[p][i]) - v[p][i]);
        double tolM = 1e-5 * (std::fabs(m[p][i]) + std::fabs(g)) + 1e-30;
        double tolV = 1e-5 * (v[p][i] + g * g) + 1e-30;
        worst[p] = std::max(worst[p], err / tol);
        ++checked;
        if (err > tol || errM > tolM || errV > tolV || !std::isfinite(err)) {
          char text[320];
          std::snprintf(text, sizeof(text),
                        "step %lld %s[%zu]: param %.9g want %.9g (was %.9g, "
                        "grad %.6g), m %.6g want %.6g, v %.6g want %.6g",
                        (long long)t, param.name.c_str(), i, after[p][i], want,
                        x, g, ms[p][i], m[p][i], vs[p][i], v[p][i]);
          fail(text);
        }
      }
    }
  }

  /// Runs and checks step `t`; false when the run ends after it (only
  /// the gradients were asked for).
  bool step(int64_t t) {
    feed(plan, session, comm, o.seed, t);
    std::vector<std::vector<float>> before = gatherAll(0);
    if (o.poison)
      poisonTransients(plan, session);
    float localLoss = session.forwardBackward();
    std::vector<std::vector<float>> grads = gatherAll(1);
    std::optional<double> reported = session.gradNorm();
    double loss = comm.allReduceMean(localLoss);
    if (t == 1 && !o.dumpPath.empty() && lead)
      dumpGradients(loss, grads);
    if (!o.checkAdamW)
      return false;
    double coef = clipCoefficient(t, grads, reported);
    if (o.poison)
      poisonTransients(plan, session);
    float stepLoss = session.step(t);
    if (stepLoss != localLoss)
      fail("step " + std::to_string(t) +
           ": the step's loss differs from its forward's");
    if (session.gradNorm() != reported)
      fail("step " + std::to_string(t) +
           ": the step's grad norm differs from its forward-backward's");
    checkUpdate(t, coef, grads, before);
    if (lead)
      std::printf("step-check: step %lld loss %.6f\n", (long long)t, loss);
    return true;
  }

  void report() {
    if (lead && o.checkAdamW)
      for (size_t p = 0; p < plan.params.size(); ++p)
        std::printf("step-check: %-12s %s worst error %.3f of tolerance\n",
                    plan.params[p].name.c_str(),
                    plan.params[p].noWeightDecay ? "no-decay" : "decay   ",
                    worst[p]);
    if (lead && !o.checkAdamW)
      std::printf("step-check: step 1's gradients written to %s\n",
                  o.dumpPath.c_str());
    if (lead && o.checkAdamW)
      std::printf("step-check: %lld elements checked, %lld failed\n",
                  (long long)checked, (long long)failed);
    std::fflush(stdout);
  }
};
} // namespace

/// Runs and checks the steps on the ranks of `comm`; the exit code.
int check(const Options &o, Communicator &comm) {
  int N = comm.size();
  Plan plan;
  std::string error;
  if (!loadPlan(o.planPath, plan, error))
    die(error);
  if (int(plan.worldSize) != N)
    die(o.planPath + ": compiled for world size " +
        std::to_string(plan.worldSize) + ", launched on " + std::to_string(N));
  std::unique_ptr<Backend> backend =
      createCpuBackend({1, "openblas", &comm, "auto"}, error);
  if (!backend)
    die(error);
  Session session(plan, *backend, comm);
  if (!session.initialize(o.seed, error))
    die(error);
  return StepChecker(o, comm, plan, session).run();
}

int main(int argc, char **argv) {
  Options o = parse(argc, argv);
  std::unique_ptr<Communicator> comm = haveMpi()
                                           ? createMpiCommunicator(&argc, &argv)
                                           : createLocalCommunicator();
  gComm = comm.get();
  // An exception ends the whole job while the communicator lives.
  int code = 1;
  try {
    code = check(o, *comm);
  } catch (const std::exception &e) {
    die(std::string("unexpected error: ") + e.what());
  }
  gComm = nullptr;
  return code;
}
