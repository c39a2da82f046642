//===- attention-bench.cpp - materialized vs blocked causal attention -----===//
//
//   fsdp-attention-bench [--reps N] [--threads A,B,...] [--seq T1,T2,...]
//                        [--blas openblas|blis] [--window W]
//
// Times forward + backward of the CPU backend's two attention forms on
// the same inputs, in the same process: the materialized kernels
// (attentionForward/Backward: BLAS GEMMs on a B x NH x T x T probabilities
// buffer and as much scratch) and the blocked ones (blockedAttention*:
// FlashAttention-2's recomputation, one log-sum-exp per query row). For
// each thread count, width (C = 256, NH = 4 and C = 768, NH = 12; hs = 64)
// and sequence length it prints the median of N runs of each form, the
// ratio blocked / materialized, and the bytes each form needs beyond its
// inputs and outputs: probs + scratch = 2 B NH T^2 floats against lse =
// B NH T floats. B = 1. Both forms are also compared (their outputs must
// agree to float rounding), so a broken kernel does not time well.
// --window W gives both forms a sliding window of W keys (Mistral's): the
// materialized form only masks, the blocked one skips the key blocks
// outside it.
//
//===----------------------------------------------------------------------===//

#include "fsdp/runtime/support/CommandLine.h"

#include "CpuModel.h"

#include "cpu/Blas.h"
#include "cpu/Kernels.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <omp.h>
#include <random>
#include <string>
#include <vector>

using namespace fsdp::rt;

namespace {
const char *const kUsage =
    "usage: fsdp-attention-bench [--reps N] [--threads A,B,...] "
    "[--seq T1,T2,...]\n"
    "                            [--blas openblas|blis] [--window W]\n";

[[noreturn]] void die(const std::string &message, int code = 1) {
  std::fprintf(stderr, "fsdp-attention-bench: error: %s\n", message.c_str());
  std::exit(code);
}

/// A comma-separated list of integers in [1, max] for option `flag`.
std::vector<int64_t> parseList(const std::string &flag, const std::string &text,
                               int64_t max) {
  std::vector<int64_t> values;
  size_t start = 0;
  while (start <= text.size()) {
    size_t end = text.find(',', start);
    if (end == std::string::npos)
      end = text.size();
    int64_t value = 0;
    std::string error;
    if (!parseIntegerOption(flag, text.substr(start, end - start).c_str(), 1,
                            max, value, error))
      die(error, 2);
    values.push_back(value);
    start = end + 1;
  }
  return values;
}

using fsdp::bench::cpuModel;

double seconds(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
      .count();
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.size() % 2 ? v[v.size() / 2]
                      : 0.5 * (v[v.size() / 2 - 1] + v[v.size() / 2]);
}

/// One shape's buffers, both forms'.
struct Case {
  int64_t B = 1, T, C, NH, W;
  std::vector<float> qkv, dout, out, probs, scratch, dqkv, bout, lse, bdqkv;
  Case(int64_t T, int64_t C, int64_t NH, int64_t W, std::mt19937 &rng)
      : T(T), C(C), NH(NH), W(W), qkv(T * 3 * C), dout(T * C), out(T * C),
        probs(NH * T * T), scratch(NH * T * T), dqkv(T * 3 * C), bout(T * C),
        lse(NH * T), bdqkv(T * 3 * C) {
    std::uniform_real_distribution<float> uniform(-1.5f, 1.5f);
    for (float &x : qkv)
      x = uniform(rng);
    for (float &x : dout)
      x = uniform(rng);
  }
  void materialized(const cpu::Blas &blas) {
    cpu::attentionForward(blas, out.data(), probs.data(), qkv.data(), B, T, C,
                          NH, NH, W);
    cpu::attentionBackward(blas, dqkv.data(), scratch.data(), dout.data(),
                           qkv.data(), probs.data(), B, T, C, NH, NH, W);
  }
  void blocked(const cpu::Blas &blas) {
    cpu::blockedAttentionForward(blas, bout.data(), lse.data(), qkv.data(), B,
                                 T, C, NH, NH, W);
    cpu::blockedAttentionBackward(blas, bdqkv.data(), dout.data(), qkv.data(),
                                  bout.data(), lse.data(), B, T, C, NH, NH, W);
  }
  /// max |blocked - materialized| / max |materialized| over out and dqkv.
  double difference() const {
    auto rel = [](const std::vector<float> &a, const std::vector<float> &b) {
      double err = 0.0, scale = 1e-30;
      for (size_t i = 0; i < a.size(); ++i) {
        err = std::max(err, double(std::fabs(a[i] - b[i])));
        scale = std::max(scale, double(std::fabs(b[i])));
      }
      return err / scale;
    };
    return std::max(rel(bout, out), rel(bdqkv, dqkv));
  }
};

void runCase(const cpu::Blas &blas, int threads, int64_t T, int64_t C,
             int64_t NH, int64_t W, int reps, std::mt19937 &rng) {
  Case c(T, C, NH, W, rng);
  c.materialized(blas); // warm-up (page faults, BLAS buffers)
  c.blocked(blas);
  const double diff = c.difference();
  if (!(diff < 1e-4))
    die("blocked and materialized attention differ by " + std::to_string(diff) +
        " at T=" + std::to_string(T));
  std::vector<double> mat, blk;
  for (int r = 0; r < reps; ++r) {
    auto start = std::chrono::steady_clock::now();
    c.materialized(blas);
    mat.push_back(seconds(start));
    start = std::chrono::steady_clock::now();
    c.blocked(blas);
    blk.push_back(seconds(start));
  }
  const double matMs = median(mat) * 1e3, blkMs = median(blk) * 1e3;
  const double matMiB = 2.0 * c.B * NH * T * T * 4 / (1 << 20);
  const double blkKiB = double(c.B * NH * T * 4) / 1024;
  std::printf("| %7d | %4lld | %3lld | %5lld | %10.2f | %10.2f | %5.2f | "
              "%10.2f | %10.2f |\n",
              threads, (long long)C, (long long)NH, (long long)T, matMs, blkMs,
              blkMs / matMs, matMiB, blkKiB);
  std::fflush(stdout);
}
} // namespace

/// Times both forms at every thread count, width and length.
int run(int argc, char **argv) {
  std::string library = "openblas";
  int reps = 7;
  std::vector<int64_t> threadCounts = {1, omp_get_num_procs()};
  std::vector<int64_t> seqs = {64, 128, 256, 512, 1024};
  int64_t window = 0;
  ToolArguments args(argc, argv, kUsage, die);
  while (args.next()) {
    const std::string &arg = args.arg();
    args.answerHelp();
    if (arg == "--blas")
      library = args.value();
    else if (arg == "--reps")
      reps = int(args.integer(1, 1000000));
    else if (arg == "--threads")
      threadCounts = parseList(arg, args.value(), 4096);
    else if (arg == "--seq")
      seqs = parseList(arg, args.value(), 1 << 20);
    else if (arg == "--window")
      window = args.integer(0, 1 << 20);
    else
      args.unknown();
  }
  if (threadCounts.size() == 2 && threadCounts[0] == threadCounts[1])
    threadCounts.pop_back();
  const char *coretype = std::getenv("OPENBLAS_CORETYPE");
  std::printf("attention-bench: cpu %s, %d logical cpus\n", cpuModel().c_str(),
              omp_get_num_procs());
  std::printf("attention-bench: OPENBLAS_CORETYPE=%s, median of %d runs, "
              "B=1, hs=64, forward + backward, window %lld%s\n",
              coretype ? coretype : "(unset)", reps, (long long)window,
              window ? "" : " (none)");
  std::mt19937 rng(1);
  bool header = false;
  for (int64_t threads : threadCounts) {
    std::string error;
    omp_set_num_threads(int(threads));
    std::unique_ptr<cpu::Blas> blas =
        cpu::Blas::open(library, int(threads), error);
    if (!blas)
      die(error);
    if (!header) {
      std::printf("attention-bench: %s\n\n", blas->description().c_str());
      std::printf("| threads |    C |  NH |     T | mat. ms    | blocked ms | "
                  "ratio | mat. MiB   | blk. KiB   |\n");
      std::printf("|--------:|-----:|----:|------:|-----------:|-----------:|"
                  "------:|-----------:|-----------:|\n");
      header = true;
    }
    for (auto [C, NH] : {std::pair<int64_t, int64_t>{256, 4}, {768, 12}})
      for (int64_t T : seqs)
        runCase(*blas, int(threads), T, C, NH, window, reps, rng);
  }
  std::printf("\nmat. MiB: probs + scratch, 2 B NH T^2 floats; blk. KiB: "
              "lse, B NH T floats; ratio: blocked / materialized\n");
  return 0;
}

int main(int argc, char **argv) { return runTool(run, argc, argv, die); }
