//===- CollectivesTest.cpp - the runtime's collectives at uneven shards ---===//
//
//   [mpirun -np N] fsdp-collectives-test
//
// The communicator fsdp-run uses (MPI under mpirun when the build has MPI,
// else the local one) against references computed here, on flat tensors of
// sizes that make the seed's shards uneven: 1 element, fewer elements than
// ranks, N, N + 1, and larger odd sizes.
//
// * allGather (from a separate f32 shard, allGatherFrom): every rank's
//   full tensor holds every rank's shard at its offset, and nothing past
//   the end is written;
// * the same in bf16: an f32 shard rounded to nearest even into a bf16
//   gathered tensor (mixed precision), a bf16 shard into bf16, a bf16
//   shard widened into f32, bit for bit;
// * reduceScatterMean (the ring, or MPI's own with FSDP_REDUCE_SCATTER=mpi
//   in the environment): this rank's range of the element-wise mean over
//   ranks, and nothing written past the shard buffer (the largest shard;
//   the input and the padding past this rank's count are the ring's
//   scratch); with the ring, bit for bit the sum in its order (rank c + 1's
//   value first, rank c's last) times 1/N, in f32 and in bf16 (each
//   addition and the scale rounded to bf16, as NCCL's bf16 reduction
//   rounds); in bf16 also bit for bit on values whose sums are exact,
//   whatever the order (MPI's own then too);
// * the CPU backend's all_gather and reduce_scatter kernels on a
//   hand-built plan (an f32 shard gathered into bf16, a bf16 gradient
//   reduce-scattered), run in place and started on stream threads: the
//   jobs it builds from the buffers' element types;
// * allReduceMean, allReduceSum, allReduceMax, broadcast from every root;
// * duplicate(): two duplicates running on CollectiveStreams (a thread
//   each) at once, one a group of all-gathers issued as one job under
//   several tokens (a bucket), the other a group of reduce-scatters, while
//   the main thread reduces scalars on the original communicator;
// * expert parallelism's all-to-alls (CollectivesAllToAll.cpp against
//   AllToAllCheck.h's reference): allToAllCounts
//   (1 and 3 int64 values per peer, over 2^32 and negative) and, in f32,
//   bf16 and i32, allToAllV on rows of uneven counts with none to and
//   from some peers, nothing at all, hundreds of rows of 64, every row to
//   one rank: every received row bit for bit in rank order, nothing
//   written past the rows, the input untouched; on this communicator, on
//   the local one (one rank) and through the flight recorder's watched
//   communicator, whose records carry the bytes sent and received.
//
// Prints "collectives: rank R of N: C checks, F failed" and exits 1 on any
// rank's failure (every rank then fails).
//
// Two more forms, for test/Runtime/flight-recorder.test:
//
//   fsdp-collectives-test --stall-in-all-to-all RANK [DIR]
//       the watchdog (1 s) over the job; the ranks exchange counts, then
//       rank RANK sleeps 30 s before the rows' all-to-all that the others
//       wait in (the watchdog ends the job, dumping to DIR);
//   fsdp-collectives-test --all-to-all-over-int
//       every rank asks to send 2^31 rows in all: the MPI communicator
//       aborts the job with a message instead of truncating MPI's counts.
//
// and one run by hand (gigabytes of memory):
//
//   fsdp-collectives-test --all-to-all-large ROWS ROW_ELEMENTS
//       rank 0 sends ROWS rows of i32 to the last rank, which checks them
//       (rows over 2^31 bytes or elements in all move as whole rows).
//
//===----------------------------------------------------------------------===//

#include "CollectivesAllToAll.h"
#include "cpu/CollectiveStreams.h"
#include "fsdp/runtime/PlanFormat.h"
#include "fsdp/runtime/comm/Communicator.h"
#include "fsdp/runtime/exec/Backend.h"
#include "fsdp/runtime/plan/Plan.h"
#include "fsdp/runtime/support/BFloat16.h"

#include <array>
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
  comm.allGatherFrom(shard.data(), full.data(), total);
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
  comm.reduceScatterMean(full.data(), shard.data(), total, plan::DType::F32);
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

/// A 64-bit mix (splitmix64's finaliser): the test data's randomness.
uint64_t mix(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}
float fromBits(uint32_t word) {
  float value;
  std::memcpy(&value, &word, sizeof(value));
  return value;
}
/// Element i of an f32 shard to be rounded into bf16: random sign,
/// exponent and bf16 part, and a low half that is an exact tie, just below
/// or above one, or random, so that rounding goes both ways.
float roundingValue(int64_t total, int64_t i) {
  uint64_t h = mix(uint64_t(total) * 1000003u + uint64_t(i));
  uint32_t low[4] = {0x8000u, 0x7FFFu, 0x8001u, uint32_t(h >> 40) & 0xFFFFu};
  uint32_t word = uint32_t(h & 1) << 31 | (110u + uint32_t(h >> 1) % 30) << 23 |
                  (uint32_t(h >> 8) & 0x7Fu) << 16 | low[i % 4];
  return fromBits(word);
}
/// Rank r's bf16 gradient element i: random sign, mantissa and exponents
/// 2^-8 .. 2^7 apart, so that sums round.
uint16_t bf16Value(int r, int64_t total, int64_t i) {
  uint64_t h = mix(uint64_t(total) * 7919u + uint64_t(i) * 31u + uint64_t(r));
  return uint16_t((h & 1) << 15 | (119u + (h >> 1) % 16) << 7 |
                  (h >> 8) & 0x7F);
}

/// An all-gather into a gathered tensor of `type` from shards of
/// `shardType`, checked bit for bit against each element converted once.
void checkAllGatherTyped(Communicator &comm, int64_t total,
                         plan::DType shardType, plan::DType type) {
  int N = comm.size(), k = comm.rank();
  plan::ShardRange range = plan::shardRange(total, k, N);
  size_t shardBytes = plan::dtypeSize(shardType);
  size_t bytes = plan::dtypeSize(type);
  // The value of element i as the shard holds it, and as gathered.
  auto held = [&](int64_t i, unsigned char *out) {
    float value = roundingValue(total, i);
    uint16_t half = roundToBF16(value);
    std::memcpy(out, shardType == plan::DType::F32 ? (void *)&value : &half,
                shardBytes);
  };
  auto want = [&](int64_t i, unsigned char *out) {
    float value = roundingValue(total, i);
    uint16_t half = roundToBF16(value);
    float wide = widenBF16(half);
    if (type == plan::DType::BF16)
      std::memcpy(out, &half, 2);
    else
      std::memcpy(out, shardType == plan::DType::F32 ? &value : &wide, 4);
  };
  std::vector<unsigned char> shard(plan::maxShardSize(total, N) * shardBytes,
                                   0xA5);
  for (int64_t i = range.begin; i < range.end; ++i)
    held(i, shard.data() + (i - range.begin) * shardBytes);
  std::vector<unsigned char> full((total + 3) * bytes, 0xA5);
  comm.allGatherFrom(shard.data(), shardType, full.data(), type, total);
  std::string what = std::string("allGather ") +
                     std::string(plan::kDTypeNames[size_t(shardType)]) +
                     " -> " + std::string(plan::kDTypeNames[size_t(type)]);
  int64_t wrong = 0, first = -1;
  for (int64_t i = 0; i < total; ++i) {
    unsigned char expected[4];
    want(i, expected);
    if (std::memcmp(full.data() + i * bytes, expected, bytes) != 0 &&
        wrong++ == 0)
      first = i;
  }
  expect(wrong == 0, where((what + ": wrong element").c_str(), total, first));
  for (size_t b = total * bytes; b < full.size(); ++b)
    expect(full[b] == 0xA5, where((what + ": wrote past the end").c_str(),
                                  total, int64_t(b / bytes)));
}

/// The reduce-scatter's arithmetic per element type, as the reference
/// computes it, and each type's rounding test data (rank r, element i).
struct F32Math {
  using T = float;
  static constexpr plan::DType kType = plan::DType::F32;
  static T add(T a, T b) { return a + b; }
  static T scale(T a, float s) { return a * s; }
  static double wide(T a) { return a; }
  static T value(int r, int64_t total, int64_t i) {
    return roundingValue(total + 1000003 * int64_t(r), i);
  }
};
struct BF16Math {
  using T = uint16_t;
  static constexpr plan::DType kType = plan::DType::BF16;
  static T add(T a, T b) { return roundToBF16(widenBF16(a) + widenBF16(b)); }
  static T scale(T a, float s) { return roundToBF16(widenBF16(a) * s); }
  static double wide(T a) { return widenBF16(a); }
  static T value(int r, int64_t total, int64_t i) {
    return bf16Value(r, total, i);
  }
};

/// The ring's mean of element i of rank k's chunk: rank k + 1's value,
/// plus k + 2's, ..., plus k's, each addition in M's arithmetic, then the
/// scale by 1/N.
template <typename M, typename Value>
typename M::T ringMean(int N, int k, Value value) {
  typename M::T sum = value((k + 1) % N);
  for (int s = 2; s <= N; ++s)
    sum = M::add(sum, value((k + s) % N));
  return M::scale(sum, 1.0f / float(N));
}

/// A reduce-scatter of `type` on values whose sums round: with the ring,
/// bit for bit the reference in the ring's order; with MPI's own (whose
/// order is its business), the same at 2 ranks (one addition, in either
/// order the same), else within the roundings' bound.
template <typename M>
void checkReduceScatterOrder(Communicator &comm, int64_t total, bool ring) {
  using T = typename M::T;
  int N = comm.size(), k = comm.rank();
  bool bitwise = ring || N <= 2;
  plan::ShardRange range = plan::shardRange(total, k, N);
  std::vector<T> full(total);
  for (int64_t i = 0; i < total; ++i)
    full[i] = M::value(k, total, i);
  int64_t width = plan::maxShardSize(total, N);
  T canary = M::value(N + 7, total, 0);
  std::vector<T> shard(width + 2, canary);
  comm.reduceScatterMean(full.data(), shard.data(), total, M::kType);
  int64_t wrong = 0, first = -1;
  for (int64_t i = 0; i < range.end - range.begin; ++i) {
    int64_t at = range.begin + i;
    auto value = [&](int r) { return M::value(r, total, at); };
    T want = ringMean<M>(N, k, value);
    double exact = 0.0, magnitude = 0.0;
    for (int r = 0; r < N; ++r) {
      exact += M::wide(value(r));
      magnitude += std::fabs(M::wide(value(r)));
    }
    bool ok = bitwise ? std::memcmp(&shard[i], &want, sizeof(T)) == 0
                      : std::fabs(M::wide(shard[i]) - exact / N) <=
                            magnitude / 128.0 + 1e-30;
    if (!ok && wrong++ == 0)
      first = at;
  }
  std::string what = std::string("reduceScatterMean ") +
                     std::string(plan::kDTypeNames[size_t(M::kType)]) +
                     (bitwise ? " (bit for bit)" : " (rounding bound)");
  expect(wrong == 0, where((what + ": wrong mean").c_str(), total, first));
  for (int64_t i = width; i < width + 2; ++i)
    expect(std::memcmp(&shard[i], &canary, sizeof(T)) == 0,
           where((what + ": wrote past the shard").c_str(), total, i));
}

/// A bf16 reduce-scatter of small integers, whose sums are exact in bf16
/// in any order: bit for bit the sum's bf16 times 1/N, rounded, with the
/// ring and with MPI's own reduction alike.
void checkReduceScatterExactBF16(Communicator &comm, int64_t total) {
  int N = comm.size(), k = comm.rank();
  plan::ShardRange range = plan::shardRange(total, k, N);
  auto value = [&](int r, int64_t i) {
    return float(
        int64_t(mix(uint64_t(total) * 17 + uint64_t(i) * 5 + uint64_t(r)) %
                41) -
        20);
  };
  std::vector<uint16_t> full(total);
  for (int64_t i = 0; i < total; ++i)
    full[i] = roundToBF16(value(k, i));
  std::vector<uint16_t> shard(plan::maxShardSize(total, N));
  comm.reduceScatterMean(full.data(), shard.data(), total, plan::DType::BF16);
  int64_t wrong = 0, first = -1;
  for (int64_t i = range.begin; i < range.end; ++i) {
    float sum = 0.0f;
    for (int r = 0; r < N; ++r)
      sum += value(r, i);
    uint16_t want = roundToBF16(sum * (1.0f / float(N)));
    if (shard[i - range.begin] != want && wrong++ == 0)
      first = i;
  }
  expect(wrong == 0, where("reduceScatterMean bf16 (exact sums): wrong mean",
                           total, first));
}

/// A hand-built plan of one unit's bf16 collectives: an f32 shard, its
/// bf16 gathered parameter, a bf16 full gradient and its bf16 shard.
struct CollectivePlan {
  Plan plan;
  uint32_t shard, gathered, grad, gradShard;
  uint64_t arenaBytes = 0;
  Instruction gather, scatter;
};

CollectivePlan collectivePlan(int64_t total, int N, uint32_t gatherStream,
                              uint32_t scatterStream) {
  CollectivePlan p;
  auto add = [&](plan::BufferKind kind, plan::DType type, int64_t elements) {
    BufferDesc b{kind, type};
    b.offset = p.arenaBytes;
    b.size = uint64_t(elements) * plan::dtypeSize(type);
    b.shape = {elements};
    p.arenaBytes += (b.size + 63) / 64 * 64;
    p.plan.buffers.push_back(b);
    return uint32_t(p.plan.buffers.size() - 1);
  };
  int64_t width = plan::maxShardSize(total, N);
  p.shard = add(plan::BufferKind::Param, plan::DType::F32, width);
  p.gathered = add(plan::BufferKind::Gathered, plan::DType::BF16, total);
  p.grad = add(plan::BufferKind::Grad, plan::DType::BF16, total);
  p.gradShard = add(plan::BufferKind::Grad, plan::DType::BF16, width);
  auto params = [](uint32_t stream, uint32_t token) {
    std::array<double, plan::kNumCollectiveParams> v =
        plan::collectiveParamValues({double(stream), double(token), 0});
    return std::vector<double>(v.begin(), v.end());
  };
  p.gather = {&plan::kernelInfo(plan::Opcode::AllGather),
              "u",
              {p.shard},
              {p.gathered},
              params(gatherStream, gatherStream ? 1 : 0),
              plan::DType::BF16};
  p.scatter = {&plan::kernelInfo(plan::Opcode::ReduceScatter),
               "u",
               {p.grad},
               {p.gradShard},
               params(scatterStream, scatterStream ? 2 : 0),
               plan::DType::BF16};
  // The backend sizes what it keeps per kernel from the program.
  p.plan.program = {p.gather, p.scatter};
  return p;
}

/// The CPU backend's all_gather and reduce_scatter kernels on that plan,
/// in place (run) and started on stream threads (start, wait): the jobs
/// CpuBackend::collective() builds from the buffers' element types. The
/// gathered parameter must be every owner's f32 values rounded once; the
/// mean, the ring's bf16 sum.
void checkBackendCollectives(Communicator &comm, int64_t total, bool ring,
                             const std::string &threads) {
  int N = comm.size(), k = comm.rank();
  bool started = threads == "on";
  CollectivePlan p = collectivePlan(total, N, started ? 1 : 0, started ? 2 : 0);
  std::string error;
  std::unique_ptr<Backend> backend =
      createCpuBackend({1, "openblas", &comm, threads}, error);
  if (!backend || !backend->allocateArena(p.arenaBytes, error)) {
    expect(false, "CPU backend: " + error);
    return;
  }
  const Plan &plan = p.plan;
  plan::ShardRange range = plan::shardRange(total, k, N);
  std::vector<float> shard(plan::maxShardSize(total, N), kCanary);
  for (int64_t i = range.begin; i < range.end; ++i)
    shard[i - range.begin] = roundingValue(total, i);
  std::vector<uint16_t> grad(total);
  for (int64_t i = 0; i < total; ++i)
    grad[i] = BF16Math::value(k, total, i);
  backend->write(plan.buffers[p.shard].offset, shard.data(), shard.size() * 4);
  backend->write(plan.buffers[p.grad].offset, grad.data(), total * 2);
  if (started) {
    backend->start(plan, {&p.gather}, 1);
    backend->start(plan, {&p.scatter}, 2);
    backend->wait(2);
    backend->wait(1);
  } else {
    backend->run(plan, p.gather, p.gather.params.data(), 1);
    backend->run(plan, p.scatter, p.scatter.params.data(), 1);
  }
  // The whole shard buffer (never empty: a rank's range may be).
  std::vector<uint16_t> gathered(total), mean(plan::maxShardSize(total, N));
  backend->read(plan.buffers[p.gathered].offset, gathered.data(), total * 2);
  backend->read(plan.buffers[p.gradShard].offset, mean.data(), mean.size() * 2);
  std::string what = "CPU backend (collective threads " + threads + "): ";
  int64_t wrong = 0, first = -1;
  for (int64_t i = 0; i < total; ++i)
    if (gathered[i] != roundToBF16(roundingValue(total, i)) && wrong++ == 0)
      first = i;
  expect(wrong == 0,
         where((what + "all_gather f32 -> bf16").c_str(), total, first));
  wrong = 0;
  for (int64_t i = 0; ring && i < range.end - range.begin; ++i) {
    auto value = [&](int r) {
      return BF16Math::value(r, total, range.begin + i);
    };
    if (mean[i] != ringMean<BF16Math>(N, k, value) && wrong++ == 0)
      first = range.begin + i;
  }
  expect(wrong == 0,
         where((what + "reduce_scatter bf16").c_str(), total, first));
}

void checkScalars(Communicator &comm) {
  int N = comm.size(), k = comm.rank();
  double mean = comm.allReduceMean(double(k) * 2.0 + 1.0);
  expect(std::fabs(mean - double(N)) < 1e-12,
         "allReduceMean: got " + std::to_string(mean));
  // Gradient clipping's sum of squares: exact sums of exact values, the
  // same on every rank.
  double sum = comm.allReduceSum(0.25 * double(k + 1));
  expect(sum == 0.125 * double(N) * double(N + 1),
         "allReduceSum: got " + std::to_string(sum));
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

/// Hybrid sharding's groups: the world split into shard groups (ranks of
/// one rank / S) and replica groups (ranks of one rank % S) for every S
/// that divides N; each group's rank and size, an all-gather within the
/// shard group, and the replica all-reduce (the mean, in place, in f32 and
/// bf16) exact on values whose sums are exact, the same bits on every
/// member of a group.
void checkGroups(Communicator &comm) {
  int N = comm.size(), k = comm.rank();
  for (int S = 1; S <= N; ++S) {
    if (N % S != 0)
      continue;
    std::string why, tag = " (S=" + std::to_string(S) + ")";
    auto shard = comm.split(k / S, k, "shard group", why);
    auto replica = comm.split(k % S, k, "replica group", why);
    expect(shard && replica, "split" + tag + ": " + why);
    if (!shard || !replica)
      return;
    expect(shard->rank() == k % S && shard->size() == S,
           "shard group rank and size" + tag);
    expect(replica->rank() == k / S && replica->size() == N / S,
           "replica group rank and size" + tag);
    expect(shard->groupName() == "shard group", "group name" + tag);
    // The gather sees the shard group's members only: rank k / S * S + i
    // in slot i.
    std::vector<float> full(size_t(S), -1.0f);
    full[size_t(k % S)] = float(k);
    shard->allGather(full.data(), S, plan::DType::F32);
    bool gathered = true;
    for (int i = 0; i < S; ++i)
      gathered &= full[size_t(i)] == float(k / S * S + i);
    expect(gathered, "allGather within the shard group" + tag);
    // Means of small integers times 0.5: exact in f32 and bf16 (R is 1..5,
    // the sums stay below 2^8, so R a power of two is exact; other R
    // divide, checked to a rounding).
    int R = N / S;
    for (plan::DType type : {plan::DType::F32, plan::DType::BF16}) {
      const int64_t count = 5;
      std::vector<float> values(count);
      std::vector<uint16_t> halves(count);
      double want[count];
      for (int64_t i = 0; i < count; ++i) {
        values[size_t(i)] = 0.5f * float((k / S + 1) * (i + 1));
        want[i] = 0.5 * double(i + 1) * double(R + 1) / 2.0;
      }
      void *data = values.data();
      if (type == plan::DType::BF16) {
        roundToBF16(halves.data(), values.data(), count);
        data = halves.data();
      }
      replica->allReduceMeanInPlace(data, count, type);
      if (type == plan::DType::BF16)
        widenBF16(values.data(), halves.data(), count);
      bool close = true;
      for (int64_t i = 0; i < count; ++i)
        close &= std::fabs(double(values[size_t(i)]) - want[i]) <=
                 (type == plan::DType::BF16 ? 1e-2 : 1e-6) * want[i];
      expect(close, std::string("allReduceMeanInPlace ") +
                        (type == plan::DType::BF16 ? "bf16" : "f32") + tag);
      // Every member of the replica group holds the same bits: the
      // largest and the smallest bit pattern over the group are its own.
      uint64_t bits = 0;
      std::memcpy(&bits, values.data(), sizeof(float) * 2);
      expect(replica->allReduceMax(bits) == bits &&
                 replica->allReduceMax(~bits) == ~bits,
             "replicas agree bit for bit" + tag);
    }
  }
}

/// Inputs and outputs of every collective of checkStreams' two groups.
struct StreamGather {
  int64_t total;
  std::vector<float> shard, full;
};
struct StreamScatter {
  int64_t total;
  std::vector<float> full, shard;
};

/// Two duplicates of `comm` for the stream threads; false (said by rank 0)
/// where the communicator cannot duplicate itself.
bool duplicateTwice(Communicator &comm,
                    std::vector<std::unique_ptr<Communicator>> &comms) {
  std::string why;
  for (int s = 0; s < 2; ++s) {
    std::unique_ptr<Communicator> copy = comm.duplicate(why);
    if (!copy) {
      if (comm.rank() == 0)
        std::printf("collectives: no duplicate communicators (%s)\n",
                    why.c_str());
      return false;
    }
    expect(copy->rank() == comm.rank() && copy->size() == comm.size(),
           "duplicate: another rank or size");
    comms.push_back(std::move(copy));
  }
  return true;
}

/// A gather and a scatter of each size: rank `k`'s inputs, canaries in
/// the outputs.
void makeStreamInputs(const std::vector<int64_t> &sizes, int k, int N,
                      std::vector<StreamGather> &gathers,
                      std::vector<StreamScatter> &scatters) {
  for (int64_t total : sizes) {
    plan::ShardRange range = plan::shardRange(total, k, N);
    StreamGather g{total,
                   std::vector<float>(plan::maxShardSize(total, N), kCanary),
                   std::vector<float>(total, kCanary)};
    for (int64_t i = range.begin; i < range.end; ++i)
      g.shard[i - range.begin] = gatherValue(total, i);
    gathers.push_back(std::move(g));
    StreamScatter s{total, std::vector<float>(total),
                    std::vector<float>(plan::maxShardSize(total, N), kCanary)};
    for (int64_t i = 0; i < total; ++i)
      s.full[i] = scatterValue(k, total, i);
    scatters.push_back(std::move(s));
  }
}

/// Two duplicates on two stream threads at once, each running a group of
/// collectives as one job, while the original communicator reduces.
void checkStreams(Communicator &comm, const std::vector<int64_t> &sizes) {
  std::vector<std::unique_ptr<Communicator>> comms;
  if (!duplicateTwice(comm, comms))
    return;
  int N = comm.size(), k = comm.rank();
  std::vector<StreamGather> gathers;
  std::vector<StreamScatter> scatters;
  makeStreamInputs(sizes, k, N, gathers, scatters);
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
          c.allGatherFrom(gathers[i].shard.data(), gathers[i].full.data(),
                          gathers[i].total);
      };
    };
    auto scatterJob = [&](size_t from, size_t to) {
      return [&, from, to](Communicator &c) {
        for (size_t i = from; i < to; ++i)
          c.reduceScatterMean(scatters[i].full.data(), scatters[i].shard.data(),
                              scatters[i].total, plan::DType::F32);
      };
    };
    using Tokens = std::vector<uint32_t>;
    streams.start(1, plan::CommAxis::Shard,
                  Tokens(gatherTokens.begin(), gatherTokens.begin() + half),
                  gatherJob(0, half));
    streams.start(2, plan::CommAxis::Shard,
                  Tokens(scatterTokens.begin(), scatterTokens.begin() + half),
                  scatterJob(0, half));
    streams.start(1, plan::CommAxis::Shard,
                  Tokens(gatherTokens.begin() + half, gatherTokens.end()),
                  gatherJob(half, sizes.size()));
    streams.start(2, plan::CommAxis::Shard,
                  Tokens(scatterTokens.begin() + half, scatterTokens.end()),
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
  std::string mode = argc > 1 ? argv[1] : "";
  if (mode == "--stall-in-all-to-all" && argc > 2)
    return test::stallInAllToAll(std::move(comm), std::atoi(argv[2]),
                                 argc > 3 ? argv[3] : "");
  if (mode == "--all-to-all-over-int")
    return test::allToAllOverInt(*comm);
  if (mode == "--all-to-all-large" && argc > 3)
    return test::allToAllLarge(*comm, std::atoll(argv[2]), std::atoll(argv[3]));
  if (!mode.empty()) {
    std::fprintf(stderr, "fsdp-collectives-test: unknown argument '%s'\n",
                 mode.c_str());
    return 2;
  }
  const char *env = std::getenv("FSDP_REDUCE_SCATTER");
  if (me == 0)
    std::printf("collectives: %s, reduce-scatter %s\n",
                comm->description().c_str(),
                env && std::string(env) == "mpi" ? "mpi" : "ring");

  std::vector<int64_t> sizes = {1, 2, 3, 5, 7, 64, 1001, 65537};
  for (int64_t extra : {N - 1, N, N + 1, 2 * N - 1, 3 * N + 2})
    if (extra > 0)
      sizes.push_back(extra);
  bool ring = !env || std::string(env) != "mpi";
  using plan::DType;
  for (int64_t total : sizes) {
    checkAllGather(*comm, total);
    checkReduceScatter(*comm, total);
    checkAllGatherTyped(*comm, total, DType::F32, DType::BF16);
    checkAllGatherTyped(*comm, total, DType::BF16, DType::BF16);
    checkAllGatherTyped(*comm, total, DType::BF16, DType::F32);
    checkAllGatherTyped(*comm, total, DType::F32, DType::F32);
    checkReduceScatterOrder<F32Math>(*comm, total, ring);
    checkReduceScatterOrder<BF16Math>(*comm, total, ring);
    checkReduceScatterExactBF16(*comm, total);
  }
  for (int64_t total : {int64_t(1), int64_t(N) + 1, int64_t(4099)})
    for (const char *threads : {"off", "on"})
      checkBackendCollectives(*comm, total, ring || N <= 2, threads);
  checkScalars(*comm);
  checkGroups(*comm);
  checkStreams(*comm, {1, int64_t(N) + 1, 3, 4099, 2, 77});
  test::checkAllToAll(*comm, "", expect);
  std::unique_ptr<Communicator> local = createLocalCommunicator();
  test::checkAllToAll(*local, "local ", expect);
  test::checkWatchedAllToAll(*comm, expect);

  std::printf("collectives: rank %d of %d: %lld checks, %lld failed\n", me, N,
              (long long)checks, (long long)failures);
  std::fflush(stdout);
  uint64_t anyFailed = comm->allReduceMax(uint64_t(failures));
  return anyFailed ? 1 : 0;
}
