//===- CollectivesTest.cpp - the runtime's collectives at uneven shards ---===//
//
//   [mpirun -np N] fsdp-collectives-test
//
// The communicator fsdp-run uses (MPI under mpirun when the build has MPI,
// else the local one) against references computed here, on flat tensors of
// sizes that make the seed's shards uneven: 1 element, fewer elements than
// ranks, N, N + 1, and larger odd sizes.
//
// * allGather: every rank's full tensor holds every rank's shard at its
//   offset, and nothing past the end is written;
// * reduceScatterMean (the ring, or MPI's own with FSDP_REDUCE_SCATTER=mpi
//   in the environment): this rank's range of the element-wise mean over
//   ranks, and nothing written past the shard buffer (the largest shard;
//   the input and the padding past this rank's count are the ring's
//   scratch);
// * allReduceMean, allReduceMax, broadcast from every root;
// * duplicate(): two duplicates running on CollectiveStreams (a thread
//   each) at once, one a group of all-gathers issued as one job under
//   several tokens (a bucket), the other a group of reduce-scatters, while
//   the main thread reduces scalars on the original communicator.
//
// Prints "collectives: rank R of N: C checks, F failed" and exits 1 on any
// rank's failure (every rank then fails).
//
//===----------------------------------------------------------------------===//

#include "CollectiveStreams.h"
#include "fsdp/runtime/Communicator.h"
#include "fsdp/runtime/PlanFormat.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

using namespace fsdp;
using namespace fsdp::rt;

namespace {
constexpr float kCanary = -12345.5f;
int64_t checks = 0, failures = 0;
int me = 0;
Communicator *gComm = nullptr;
template <typename Gathers, typename Scatters>
void checkStreamed(const Gathers &gathers, const Scatters &scatters);

void expect(bool ok, const std::string &what) {
  ++checks;
  if (ok)
    return;
  if (++failures <= 20)
    std::printf("FAILED rank %d: %s\n", me, what.c_str());
}

/// Element i of the tensor everybody gathers (exact in float).
float gatherValue(int64_t total, int64_t i) {
  return float((i * 37 + total) % 1009) - 500.0f;
}
/// Rank r's contribution to element i of a reduce-scatter (exact in float,
/// and so are the sums: small integers and halves).
float scatterValue(int r, int64_t total, int64_t i) {
  return float((r * 131 + i * 17 + total) % 61) * 0.5f - 15.0f + float(r);
}

bool near(float got, double want) {
  return std::fabs(double(got) - want) <= 1e-6 * std::fabs(want) + 1e-7;
}

std::string where(const char *what, int64_t total, int64_t i) {
  return std::string(what) + ": total " + std::to_string(total) + ", element " +
         std::to_string(i);
}

void checkAllGather(Communicator &comm, int64_t total) {
  int N = comm.size(), k = comm.rank();
  plan::ShardRange range = plan::shardRange(total, k, N);
  std::vector<float> shard(plan::maxShardSize(total, N), kCanary);
  for (int64_t i = range.begin; i < range.end; ++i)
    shard[i - range.begin] = gatherValue(total, i);
  std::vector<float> full(total + 3, kCanary);
  comm.allGather(shard.data(), full.data(), total);
  int64_t wrong = 0, first = -1;
  for (int64_t i = 0; i < total; ++i)
    if (full[i] != gatherValue(total, i) && wrong++ == 0)
      first = i;
  expect(wrong == 0, where("allGather: wrong element", total, first));
  for (int64_t i = total; i < total + 3; ++i)
    expect(full[i] == kCanary,
           where("allGather: wrote past the end", total, i));
}

void checkReduceScatter(Communicator &comm, int64_t total) {
  int N = comm.size(), k = comm.rank();
  plan::ShardRange range = plan::shardRange(total, k, N);
  std::vector<float> full(total);
  for (int64_t i = 0; i < total; ++i)
    full[i] = scatterValue(k, total, i);
  int64_t width = plan::maxShardSize(total, N);
  std::vector<float> shard(width + 2, kCanary);
  comm.reduceScatterMean(full.data(), shard.data(), total);
  int64_t count = range.end - range.begin, wrong = 0, first = -1;
  for (int64_t i = 0; i < count; ++i) {
    double sum = 0.0;
    for (int r = 0; r < N; ++r)
      sum += scatterValue(r, total, range.begin + i);
    if (!near(shard[i], sum / N) && wrong++ == 0)
      first = range.begin + i;
  }
  expect(wrong == 0, where("reduceScatterMean: wrong mean", total, first));
  // The ring receives other ranks' chunks in the shard buffer, so its
  // padding (the largest shard less this rank's count) is scratch; past
  // the buffer nothing may be written.
  for (int64_t i = width; i < width + 2; ++i)
    expect(shard[i] == kCanary,
           where("reduceScatterMean: wrote past the shard buffer", total, i));
}

void checkScalars(Communicator &comm) {
  int N = comm.size(), k = comm.rank();
  double mean = comm.allReduceMean(double(k) * 2.0 + 1.0);
  expect(std::fabs(mean - double(N)) < 1e-12,
         "allReduceMean: got " + std::to_string(mean));
  uint64_t max = comm.allReduceMax(uint64_t(1000 + 7 * ((k + 2) % N)));
  uint64_t wantMax = 0;
  for (int r = 0; r < N; ++r)
    wantMax = std::max<uint64_t>(wantMax, 1000 + 7 * ((r + 2) % N));
  expect(max == wantMax, "allReduceMax: got " + std::to_string(max));
  for (int root = 0; root < N; ++root) {
    char text[13] = {};
    std::snprintf(text, sizeof(text), "rank %d here", k);
    comm.broadcast(text, sizeof(text), root);
    char want[13] = {};
    std::snprintf(want, sizeof(want), "rank %d here", root);
    expect(std::memcmp(text, want, sizeof(want)) == 0,
           "broadcast from " + std::to_string(root) + ": got '" + text + "'");
  }
}

/// Two duplicates on two stream threads at once, each running a group of
/// collectives as one job, while the original communicator reduces.
void checkStreams(Communicator &comm, const std::vector<int64_t> &sizes) {
  std::string why;
  std::vector<std::unique_ptr<Communicator>> comms;
  for (int s = 0; s < 2; ++s) {
    std::unique_ptr<Communicator> copy = comm.duplicate(why);
    if (!copy) {
      if (comm.rank() == 0)
        std::printf("collectives: no duplicate communicators (%s)\n",
                    why.c_str());
      return;
    }
    expect(copy->rank() == comm.rank() && copy->size() == comm.size(),
           "duplicate: another rank or size");
    comms.push_back(std::move(copy));
  }
  int N = comm.size(), k = comm.rank();
  // Inputs and outputs of every collective of both groups.
  struct Gather {
    int64_t total;
    std::vector<float> shard, full;
  };
  struct Scatter {
    int64_t total;
    std::vector<float> full, shard;
  };
  std::vector<Gather> gathers;
  std::vector<Scatter> scatters;
  for (int64_t total : sizes) {
    plan::ShardRange range = plan::shardRange(total, k, N);
    Gather g{total, std::vector<float>(plan::maxShardSize(total, N), kCanary),
             std::vector<float>(total, kCanary)};
    for (int64_t i = range.begin; i < range.end; ++i)
      g.shard[i - range.begin] = gatherValue(total, i);
    gathers.push_back(std::move(g));
    Scatter s{total, std::vector<float>(total),
              std::vector<float>(plan::maxShardSize(total, N), kCanary)};
    for (int64_t i = 0; i < total; ++i)
      s.full[i] = scatterValue(k, total, i);
    scatters.push_back(std::move(s));
  }
  {
    CollectiveStreams streams(std::move(comms));
    // Tokens 1.. for the gathers (stream 1), 100.. for the scatters
    // (stream 2), each group one job, split in two so that a stream also
    // runs two jobs in order.
    std::vector<uint32_t> gatherTokens, scatterTokens;
    for (size_t i = 0; i < sizes.size(); ++i) {
      gatherTokens.push_back(uint32_t(1 + i));
      scatterTokens.push_back(uint32_t(100 + i));
    }
    size_t half = sizes.size() / 2;
    auto gatherJob = [&](size_t from, size_t to) {
      return [&, from, to](Communicator &c) {
        for (size_t i = from; i < to; ++i)
          c.allGather(gathers[i].shard.data(), gathers[i].full.data(),
                      gathers[i].total);
      };
    };
    auto scatterJob = [&](size_t from, size_t to) {
      return [&, from, to](Communicator &c) {
        for (size_t i = from; i < to; ++i)
          c.reduceScatterMean(scatters[i].full.data(), scatters[i].shard.data(),
                              scatters[i].total);
      };
    };
    using Tokens = std::vector<uint32_t>;
    streams.start(1, Tokens(gatherTokens.begin(), gatherTokens.begin() + half),
                  gatherJob(0, half));
    streams.start(2,
                  Tokens(scatterTokens.begin(), scatterTokens.begin() + half),
                  scatterJob(0, half));
    streams.start(1, Tokens(gatherTokens.begin() + half, gatherTokens.end()),
                  gatherJob(half, sizes.size()));
    streams.start(2, Tokens(scatterTokens.begin() + half, scatterTokens.end()),
                  scatterJob(half, sizes.size()));
    // The main thread's own collective, concurrently.
    double mean = comm.allReduceMean(double(k));
    expect(std::fabs(mean - (N - 1) / 2.0) < 1e-12,
           "allReduceMean beside the streams");
    for (uint32_t token : scatterTokens)
      streams.wait(token);
    for (uint32_t token : gatherTokens)
      streams.wait(token);
    // Checked before the streams stop: a wait must return only once its
    // collective has finished.
    checkStreamed(gathers, scatters);
  }
}

template <typename Gathers, typename Scatters>
void checkStreamed(const Gathers &gathers, const Scatters &scatters) {
  int N = gComm->size(), k = gComm->rank();
  for (const auto &g : gathers) {
    int64_t wrong = 0, first = -1;
    for (int64_t i = 0; i < g.total; ++i)
      if (g.full[i] != gatherValue(g.total, i) && wrong++ == 0)
        first = i;
    expect(wrong == 0, where("streamed allGather", g.total, first));
  }
  for (const auto &s : scatters) {
    plan::ShardRange range = plan::shardRange(s.total, k, N);
    int64_t wrong = 0, first = -1;
    for (int64_t i = 0; i < range.end - range.begin; ++i) {
      double sum = 0.0;
      for (int r = 0; r < N; ++r)
        sum += scatterValue(r, s.total, range.begin + i);
      if (!near(s.shard[i], sum / N) && wrong++ == 0)
        first = range.begin + i;
    }
    expect(wrong == 0, where("streamed reduceScatterMean", s.total, first));
  }
}
} // namespace

int main(int argc, char **argv) {
  std::unique_ptr<Communicator> comm = haveMpi()
                                           ? createMpiCommunicator(&argc, &argv)
                                           : createLocalCommunicator();
  int N = comm->size();
  me = comm->rank();
  gComm = comm.get();
  const char *env = std::getenv("FSDP_REDUCE_SCATTER");
  if (me == 0)
    std::printf("collectives: %s, reduce-scatter %s\n",
                comm->description().c_str(),
                env && std::string(env) == "mpi" ? "mpi" : "ring");

  std::vector<int64_t> sizes = {1, 2, 3, 5, 7, 64, 1001, 65537};
  for (int64_t extra : {N - 1, N, N + 1, 2 * N - 1, 3 * N + 2})
    if (extra > 0)
      sizes.push_back(extra);
  for (int64_t total : sizes) {
    checkAllGather(*comm, total);
    checkReduceScatter(*comm, total);
  }
  checkScalars(*comm);
  checkStreams(*comm, {1, int64_t(N) + 1, 3, 4099, 2, 77});

  std::printf("collectives: rank %d of %d: %lld checks, %lld failed\n", me, N,
              (long long)checks, (long long)failures);
  std::fflush(stdout);
  uint64_t anyFailed = comm->allReduceMax(uint64_t(failures));
  return anyFailed ? 1 : 0;
}
