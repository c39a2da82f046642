//===- fsdp-gemm-bench.cpp - bare sgemm rate on a plan's GEMM shapes ------===//
//
//   fsdp-gemm-bench model.plan [--blas openblas|blis|onednn|auto] [--threads N]
//                   [--seconds S]
//
// For every distinct GEMM the plan's linear kernels run (forward, grad
// input, grad weight), times the BLAS library's sgemm alone on buffers of
// that shape, checks one result against a double-precision reference, and
// prints the rate per shape and for the whole set weighted as one training
// step calls them. This is the baseline the CPU step benchmark compares its
// in-step GEMM rate with.
//
//===----------------------------------------------------------------------===//

#include "fsdp/runtime/plan/Plan.h"
#include "fsdp/runtime/support/CommandLine.h"

#include "cpu/Blas.h"

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <random>
#include <string>
#include <tuple>
#include <vector>

using namespace fsdp;
using namespace fsdp::rt;

namespace {
const char *const kUsage =
    "usage: fsdp-gemm-bench PLAN [--blas openblas|blis|onednn|auto]\n"
    "                       [--threads N] [--seconds S]\n";

[[noreturn]] void die(const std::string &message, int code = 1) {
  std::fprintf(stderr, "fsdp-gemm-bench: error: %s\n", message.c_str());
  std::exit(code);
}

struct Gemm {
  bool transA, transB;
  int64_t M, N, K;
  auto key() const { return std::make_tuple(transA, transB, M, N, K); }
  bool operator<(const Gemm &o) const { return key() < o.key(); }
};

/// The GEMMs of the plan's linear kernels, with how often a step runs each.
std::map<Gemm, int> collectGemms(const Plan &plan) {
  std::map<Gemm, int> gemms;
  for (const Instruction &inst : plan.program) {
    auto in = [&](size_t k) -> const BufferDesc & {
      return plan.buffers[inst.ins[k]];
    };
    switch (inst.kernel->opcode) {
    case plan::Opcode::Linear: {
      int64_t OC = in(1).shape[0], IC = in(1).shape[1];
      ++gemms[{false, true, in(0).numElements() / IC, OC, IC}];
      break;
    }
    case plan::Opcode::LinearGradInput: {
      int64_t OC = in(1).shape[0], IC = in(1).shape[1];
      ++gemms[{false, false, in(0).numElements() / OC, IC, OC}];
      break;
    }
    case plan::Opcode::LinearGradWeight: {
      const BufferDesc &w = plan.buffers[inst.outs[0]];
      int64_t OC = w.shape[0], IC = w.shape[1];
      ++gemms[{true, false, OC, IC, in(0).numElements() / OC}];
      break;
    }
    default:
      break;
    }
  }
  return gemms;
}

/// Fills A and B with uniform values in [-1, 1), runs C = op(A) op(B)
/// once, and checks 16 entries of C against a double-precision reference.
void checkGemm(cpu::Blas &blas, const Gemm &gemm, std::mt19937 &rng,
               std::vector<float> &A, std::vector<float> &B,
               std::vector<float> &C) {
  auto [transA, transB, M, N, K] = gemm.key();
  std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
  for (float &v : A)
    v = uniform(rng);
  for (float &v : B)
    v = uniform(rng);
  int64_t lda = transA ? M : K, ldb = transB ? K : N;
  blas.sgemm(transA, transB, M, N, K, 1.0f, A.data(), lda, B.data(), ldb, 0.0f,
             C.data(), N);
  for (int64_t check = 0; check < 16; ++check) {
    int64_t i = (check * 7919) % M, j = (check * 104729) % N;
    double ref = 0.0;
    for (int64_t k = 0; k < K; ++k)
      ref += double(transA ? A[k * M + i] : A[i * K + k]) *
             double(transB ? B[j * K + k] : B[k * N + j]);
    if (std::fabs(ref - C[i * N + j]) > 1e-3 * std::sqrt(double(K)))
      die("sgemm result differs from the reference at " + std::to_string(i) +
          "," + std::to_string(j));
  }
}

/// Seconds per call of `gemm`: calls repeated for at least `seconds`, at
/// least 3 times, after a checked warm-up; prints the shape's line.
double benchGemm(cpu::Blas &blas, const Gemm &gemm, int calls, double seconds,
                 std::mt19937 &rng) {
  auto [transA, transB, M, N, K] = gemm.key();
  std::vector<float> A(M * K), B(K * N), C(M * N);
  checkGemm(blas, gemm, rng, A, B, C); // warm-up, and the result we check
  int64_t lda = transA ? M : K, ldb = transB ? K : N;
  int reps = 0;
  auto start = std::chrono::steady_clock::now();
  double elapsed = 0.0;
  while (elapsed < seconds || reps < 3) {
    blas.sgemm(transA, transB, M, N, K, 1.0f, A.data(), lda, B.data(), ldb,
               0.0f, C.data(), N);
    ++reps;
    elapsed =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
            .count();
  }
  double perCall = elapsed / reps, flops = 2.0 * M * N * K;
  std::printf("gemm-bench: %c%c M=%-6lld N=%-6lld K=%-6lld x%-3d %8.3f ms "
              "%7.1f GFLOP/s\n",
              transA ? 'T' : 'N', transB ? 'T' : 'N', (long long)M,
              (long long)N, (long long)K, calls, perCall * 1e3,
              flops / perCall * 1e-9);
  return perCall;
}

/// The command line: a plan and the benchmark's knobs.
void parseOptions(int argc, char **argv, std::string &planPath,
                  std::string &library, int &threads, double &seconds) {
  ToolArguments args(argc, argv, kUsage, die);
  while (args.next()) {
    const std::string &arg = args.arg();
    args.answerHelp();
    if (arg == "--blas")
      library = args.value();
    else if (arg == "--threads")
      threads = int(args.integer(1, 4096));
    else if (arg == "--seconds")
      seconds = args.number(0.0, 3600.0, "seconds");
    else if (!arg.empty() && arg[0] == '-')
      args.unknown();
    else if (arg.empty() || !planPath.empty())
      die(arg.empty() ? "the plan's path is empty" : "more than one plan given",
          2);
    else
      planPath = arg;
  }
}
} // namespace

/// Times every GEMM shape of the plan; the exit code.
int run(int argc, char **argv) {
  std::string planPath, library = "openblas";
  int threads = 2;
  double seconds = 0.3;
  parseOptions(argc, argv, planPath, library, threads, seconds);
  Plan plan;
  std::string error;
  if (planPath.empty())
    die(std::string("no plan given\n") + kUsage, 2);
  if (!loadPlan(planPath, plan, error))
    die(error);
  std::unique_ptr<cpu::Blas> blas = cpu::Blas::open(library, threads, error);
  if (!blas)
    die(error);
  std::printf("gemm-bench: %s, %d threads\n", blas->description().c_str(),
              threads);

  std::mt19937 rng(1);
  double stepFlops = 0.0, stepSeconds = 0.0;
  for (auto [gemm, calls] : collectGemms(plan)) {
    stepFlops += 2.0 * gemm.M * gemm.N * gemm.K * calls;
    stepSeconds += benchGemm(*blas, gemm, calls, seconds, rng) * calls;
  }
  std::printf("gemm-bench: per step %.3f GFLOP in %.2f ms: %.1f GFLOP/s\n",
              stepFlops * 1e-9, stepSeconds * 1e3,
              stepSeconds > 0 ? stepFlops / stepSeconds * 1e-9 : 0.0);
  return 0;
}

int main(int argc, char **argv) { return runTool(run, argc, argv, die); }
