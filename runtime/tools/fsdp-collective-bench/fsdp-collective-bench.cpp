//===- fsdp-collective-bench.cpp - all-gather / reduce-scatter bandwidth --===//
//
//   mpirun -np N fsdp-collective-bench [--min-mb 1] [--max-mb 256]
//
// Times the runtime's own collectives (the Communicator the CPU backend
// uses: MPI_Allgatherv and MPI_Reduce_scatter in the seed's uneven layout)
// on flat fp32 tensors of 1 MB to 256 MB, and a memcpy of the same size in
// the same run as the baseline. Reports nccl-tests' definitions: algbw =
// bytes / time, busbw = algbw * (N - 1) / N for both collectives, where
// bytes is the full (gathered) tensor.
//
//===----------------------------------------------------------------------===//

#include "fsdp/runtime/Communicator.h"
#include "fsdp/runtime/PlanFormat.h"

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
} // namespace

int main(int argc, char **argv) {
  int minMb = 1, maxMb = 256;
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string arg = argv[i];
    if (arg == "--min-mb")
      minMb = std::atoi(argv[i + 1]);
    else if (arg == "--max-mb")
      maxMb = std::atoi(argv[i + 1]);
  }
  std::unique_ptr<Communicator> comm = haveMpi()
                                           ? createMpiCommunicator(&argc, &argv)
                                           : createLocalCommunicator();
  int n = comm->size(), rank = comm->rank();
  if (rank == 0)
    std::printf("collective-bench: %s\n"
                "%10s %12s %12s %12s %12s %12s\n",
                comm->description().c_str(), "size", "memcpy GB/s", "ag algbw",
                "ag busbw", "rs algbw", "rs busbw");
  for (int mb = minMb; mb <= maxMb; mb *= 2) {
    int64_t total = int64_t(mb) * (1 << 20) / sizeof(float);
    plan::ShardRange range = plan::shardRange(total, rank, n);
    std::vector<float> full(total, 1.0f), shard(range.end - range.begin, 1.0f);
    std::vector<float> copy(total);
    double bytes = double(total) * sizeof(float);
    double tCopy = timeIt(*comm, [&] {
      std::memcpy(copy.data(), full.data(), total * sizeof(float));
    });
    double tGather = timeIt(
        *comm, [&] { comm->allGather(shard.data(), full.data(), total); });
    double tScatter = timeIt(*comm, [&] {
      comm->reduceScatterMean(full.data(), shard.data(), total);
    });
    double factor = double(n - 1) / n;
    if (rank == 0)
      std::printf("%7d MB %12.2f %12.2f %12.2f %12.2f %12.2f\n", mb,
                  bytes / tCopy * 1e-9, bytes / tGather * 1e-9,
                  bytes / tGather * 1e-9 * factor, bytes / tScatter * 1e-9,
                  bytes / tScatter * 1e-9 * factor);
    std::fflush(stdout);
  }
  return 0;
}
