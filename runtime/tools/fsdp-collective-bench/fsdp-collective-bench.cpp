//===- fsdp-collective-bench.cpp - all-gather / reduce-scatter bandwidth --===//
//
//   mpirun -np N fsdp-collective-bench [--min-mb 1] [--max-mb 256]
//
// Times the runtime's own collectives (the Communicator the CPU backend
// uses: MPI_Allgatherv in place and the ring reduce-scatter, or MPI's
// MPI_Reduce_scatter with FSDP_REDUCE_SCATTER=mpi, in the seed's uneven
// layout) on flat tensors of P elements, P being 1 MB to 256 MB of f32,
// each in f32 and in bf16 in the same run, and a memcpy of the f32 tensor
// as the baseline. An all-gather is timed as the CPU backend runs one: this
// rank's f32 shard copied (f32) or rounded to nearest even (bf16, mixed
// precision) into its slot of the gathered buffer, then the gather in
// place. Reports nccl-tests' bus bandwidth, busbw = bytes / time * (N - 1)
// / N, bytes being the full tensor in its type, and the bytes each rank
// moves, (N - 1) / N of them (either collective).
//
//===----------------------------------------------------------------------===//

#include "fsdp/runtime/PlanFormat.h"
#include "fsdp/runtime/comm/Communicator.h"
#include "fsdp/runtime/support/CommandLine.h"

#include "fsdp/runtime/support/BFloat16.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

using namespace fsdp;
using namespace fsdp::rt;

namespace {
template <typename Fn> double timeIt(Communicator &comm, Fn &&fn) {
  using Clock = std::chrono::steady_clock;
  auto seconds = [](Clock::time_point since) {
    return std::chrono::duration<double>(Clock::now() - since).count();
  };
  // Every rank must run the collective the same number of times (a rank
  // that stopped early would leave the others waiting forever): the
  // repetition count comes from the slowest rank's warm-up.
  auto start = Clock::now();
  fn();
  uint64_t warmup = comm.allReduceMax(uint64_t(seconds(start) * 1e9) + 1);
  int reps = int(std::clamp(0.2e9 / double(warmup), 3.0, 50.0));
  start = Clock::now();
  for (int i = 0; i < reps; ++i)
    fn();
  uint64_t nanos = uint64_t(seconds(start) / reps * 1e9);
  return double(comm.allReduceMax(nanos)) * 1e-9;
}

/// The times of one size: memcpy, then all-gather and reduce-scatter in
/// f32 and in bf16.
struct Times {
  double copy, gatherF32, gatherBF16, scatterF32, scatterBF16;
};

Times measure(Communicator &comm, int64_t total) {
  std::vector<float> shard(plan::maxShardSize(total, comm.size()), 1.0f);
  std::vector<float> full(total, 1.0f), copy(total);
  std::vector<uint16_t> half(total, roundToBF16(1.0f));
  Times t{};
  t.copy = timeIt(comm, [&] {
    std::memcpy(copy.data(), full.data(), total * sizeof(float));
  });
  t.gatherF32 = timeIt(
      comm, [&] { comm.allGatherFrom(shard.data(), full.data(), total); });
  t.gatherBF16 = timeIt(comm, [&] {
    comm.allGatherFrom(shard.data(), plan::DType::F32, half.data(),
                       plan::DType::BF16, total);
  });
  t.scatterF32 = timeIt(comm, [&] {
    comm.reduceScatterMean(full.data(), shard.data(), total, plan::DType::F32);
  });
  // The bf16 shard lands in the f32 shard buffer's first half.
  t.scatterBF16 = timeIt(comm, [&] {
    comm.reduceScatterMean(half.data(), shard.data(), total, plan::DType::BF16);
  });
  return t;
}

const char *const kUsage =
    "usage: [mpirun -np N] fsdp-collective-bench [--min-mb M] [--max-mb M]\n";

/// Set once the ranks are connected: an error then ends the whole job.
Communicator *gComm = nullptr;

[[noreturn]] void die(const std::string &message, int code = 1) {
  std::fprintf(stderr, "fsdp-collective-bench: error: %s\n", message.c_str());
  std::fflush(stderr);
  if (gComm && gComm->size() > 1)
    gComm->abort(code);
  std::exit(code);
}

/// --min-mb and --max-mb: the smallest and largest tensor, doubling.
void parseOptions(int argc, char **argv, int &minMb, int &maxMb) {
  ToolArguments args(argc, argv, kUsage, die);
  while (args.next()) {
    args.answerHelp();
    if (args.arg() == "--min-mb")
      minMb = int(args.integer(1, 65536));
    else if (args.arg() == "--max-mb")
      maxMb = int(args.integer(1, 65536));
    else
      args.unknown();
  }
  if (minMb > maxMb)
    die("--min-mb " + std::to_string(minMb) + " is above --max-mb " +
            std::to_string(maxMb),
        2);
}

/// Rank 0's table: one line per size, minMb to maxMb doubling.
void runSizes(Communicator &comm, int minMb, int maxMb) {
  int n = comm.size(), rank = comm.rank();
  if (rank == 0)
    std::printf("collective-bench: %s\n"
                "%8s %7s %17s | %15s %13s | %15s %13s\n"
                "%8s %7s %8s %8s | %7s %7s %6s %6s | %7s %7s %6s %6s\n",
                comm.description().c_str(), "size", "memcpy", "MiB moved/rank",
                "all-gather ms", "busbw GB/s", "red.-scatter ms", "busbw GB/s",
                "(f32)", "GB/s", "f32", "bf16", "f32", "bf16", "f32", "bf16",
                "f32", "bf16", "f32", "bf16");
  for (int mb = minMb; mb <= maxMb; mb *= 2) {
    int64_t total = int64_t(mb) * (1 << 20) / sizeof(float);
    Times t = measure(comm, total);
    double factor = double(n - 1) / n;
    double f32 = double(total) * 4, bf16 = double(total) * 2;
    auto busbw = [&](double bytes, double seconds) {
      return bytes / seconds * 1e-9 * factor;
    };
    if (rank == 0)
      std::printf("%5d MB %7.2f %8.1f %8.1f | %7.2f %7.2f %6.2f %6.2f | %7.2f "
                  "%7.2f %6.2f %6.2f\n",
                  mb, f32 / t.copy * 1e-9, f32 * factor / (1 << 20),
                  bf16 * factor / (1 << 20), t.gatherF32 * 1e3,
                  t.gatherBF16 * 1e3, busbw(f32, t.gatherF32),
                  busbw(bf16, t.gatherBF16), t.scatterF32 * 1e3,
                  t.scatterBF16 * 1e3, busbw(f32, t.scatterF32),
                  busbw(bf16, t.scatterBF16));
    std::fflush(stdout);
  }
}
} // namespace

int main(int argc, char **argv) {
  int minMb = 1, maxMb = 256;
  parseOptions(argc, argv, minMb, maxMb);
  std::unique_ptr<Communicator> comm = haveMpi()
                                           ? createMpiCommunicator(&argc, &argv)
                                           : createLocalCommunicator();
  gComm = comm.get();
  // An exception (a size too large to allocate) ends the whole job while
  // the communicator lives.
  try {
    runSizes(*comm, minMb, maxMb);
  } catch (const std::exception &e) {
    die(std::string("unexpected error: ") + e.what());
  }
  gComm = nullptr;
  return 0;
}
