//===- CpuBackend.cpp - the CPU backend: our kernels plus a CBLAS ---------===//

#include "fsdp/runtime/comm/Communicator.h"
#include "fsdp/runtime/comm/FlightRecorder.h"
#include "fsdp/runtime/exec/Backend.h"

#include "BF16Convert.h"
#include "BF16Kernels.h"
#include "BF16Linear.h"
#include "Blas.h"
#include "Kernels.h"
#include "cpu/CollectiveStreams.h"
#include "fsdp/runtime/exec/AllToAll.h"
#include "fsdp/runtime/exec/KernelDispatch.h"
#include "fsdp/runtime/exec/MeshGroup.h"
#include "fsdp/runtime/support/BFloat16.h"

#include <algorithm>
#include <array>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <omp.h>
#include <unistd.h>
#include <utility>
#include <vector>

namespace fsdp::rt {
namespace {
constexpr unsigned char kCanary = 0xA5;

/// The most operands a kernel has, each widened at most once.
constexpr size_t kMaxOperands =
    plan::kMaxKernelInputs + plan::kMaxKernelOutputs;

/// Calls fn(buffer, isResult) once for each distinct bf16 buffer that
/// compute instruction `inst` reads or writes as a Float operand, inputs
/// first: what the CPU widens around it. A buffer both read and written
/// is named once, as a result.
template <typename Fn>
void forEachWidened(const Plan &plan, const Instruction &inst, Fn fn) {
  const plan::KernelInfo &info = *inst.kernel;
  auto isBF16 = [&](uint32_t id, plan::ElementRule rule) {
    return rule == plan::ElementRule::Float &&
           plan.buffers[id].dtype == plan::DType::BF16;
  };
  // Fixed space: this runs around every bf16 kernel of every step.
  std::array<uint32_t, kMaxOperands> seen;
  size_t count = 0;
  auto once = [&](uint32_t id) {
    if (std::find(seen.begin(), seen.begin() + count, id) !=
        seen.begin() + count)
      return false;
    seen[count++] = id;
    return true;
  };
  auto written = [&](uint32_t id) {
    return std::find(inst.outs.begin(), inst.outs.end(), id) != inst.outs.end();
  };
  for (size_t i = 0; i < inst.ins.size(); ++i)
    if (isBF16(inst.ins[i], info.ins[i].rule) && !written(inst.ins[i]) &&
        once(inst.ins[i]))
      fn(inst.ins[i], false);
  for (size_t i = 0; i < inst.outs.size(); ++i)
    if (isBF16(inst.outs[i], info.outs[i].rule) && once(inst.outs[i]))
      fn(inst.outs[i], true);
}

/// x[i] *= scale over n elements of `type` (bf16 rounded to nearest
/// even, as the communicators' own scale by 1 / N).
void scaleShard(void *x, plan::DType type, int64_t n, float scale) {
  if (type == plan::DType::BF16) {
    auto *b = static_cast<uint16_t *>(x);
    for (int64_t i = 0; i < n; ++i)
      b[i] = roundToBF16(widenBF16(b[i]) * scale);
    return;
  }
  auto *f = static_cast<float *>(x);
  for (int64_t i = 0; i < n; ++i)
    f[i] *= scale;
}

/// Converts n elements between f32 and bf16 (either way, or a copy),
/// over the OpenMP team: call it on the main thread.
void castElements(void *out, plan::DType to, const void *in, plan::DType from,
                  int64_t n) {
  using plan::DType;
  if (from == to) {
    std::memmove(out, in, uint64_t(n) * plan::dtypeSize(to));
  } else if (from == DType::F32) {
    cpu::roundToBF16Team(static_cast<uint16_t *>(out),
                         static_cast<const float *>(in), n);
  } else {
    cpu::widenBF16Team(static_cast<float *>(out),
                       static_cast<const uint16_t *>(in), n);
  }
}

/// The CPU kernels under the names runCompute calls; the GEMM-based ones
/// get the CBLAS.
struct CpuKernels {
  const cpu::Blas &blas;
#define FSDP_KERNEL(name)                                                      \
  template <typename... Args> void name(Args... args) { cpu::name(args...); }
#define FSDP_GEMM_KERNEL(name)                                                 \
  template <typename... Args> void name(Args... args) {                        \
    cpu::name(blas, args...);                                                  \
  }
  FSDP_RUNTIME_OTHER_KERNELS(FSDP_KERNEL)
  FSDP_RUNTIME_GEMM_KERNELS(FSDP_GEMM_KERNEL)
#undef FSDP_KERNEL
#undef FSDP_GEMM_KERNEL
  /// The CPU sums the rows in the kernel; it needs no per-row scratch.
  void crossEntropyForward(float *loss, const float *logits,
                           const int32_t *targets, int64_t N, int64_t V,
                           float * /*rowLosses*/) {
    cpu::crossEntropyForward(loss, logits, targets, N, V);
  }
  void copy(float *out, const float *in, uint64_t bytes) {
    std::memmove(out, in, bytes);
  }
  void adamwTensors(const AdamWTensor *tensors, size_t count, int64_t step) {
    cpu::adamwTensors(tensors, count, step);
  }
  void moeSelectionBiasUpdate(float *bias, const float *signal, int64_t n,
                              double rate, uint16_t *copy) {
    cpu::moeSelectionBiasUpdate(bias, signal, n, rate, copy);
  }
  /// Summed in the kernel in a fixed order; no per-block partials.
  void gradSqSum(float *out, const float *grad, const float *acc, int64_t n,
                 float * /*partials*/) {
    cpu::gradSqSum(out, grad, acc, n);
  }
};

class CpuBackend : public Backend {
public:
  CpuBackend(std::unique_ptr<cpu::Blas> blas, int threads, Communicator &comm,
             const std::string &collectiveThreads)
      : blas(std::move(blas)), threads(threads), comm(comm) {
    // Every rank must take the same decision: duplicating a communicator
    // is collective.
    int cores = omp_get_num_procs();
    bool spare = comm.localSize() * (threads + 1) <= cores;
    bool want =
        collectiveThreads == "on" || (collectiveThreads == "auto" && spare);
    if (comm.allReduceMax(want ? 0 : 1) != 0) {
      mode = collectiveThreads == "off"
                 ? "synchronously (--collective-threads off)"
             : collectiveThreads == "on"
                 ? "synchronously (another rank has them off)"
                 : "synchronously (auto: " + std::to_string(comm.localSize()) +
                       " rank(s) x " + std::to_string(threads) +
                       " thread(s) leave no core for communication threads "
                       "on " +
                       std::to_string(cores) +
                       " cores somewhere; --collective-threads on forces them)";
      return;
    }
    // A thread per plan stream, on its own communicator; synchronous
    // collectives where the communicator cannot run on other threads.
    std::vector<std::unique_ptr<Communicator>> comms;
    for (uint32_t s = 1; s < plan::kNumStreams; ++s) {
      std::string why;
      if (auto copy = comm.duplicate(why)) {
        comms.push_back(std::move(copy));
        continue;
      }
      mode = "synchronously (" + why + ")";
      return;
    }
    streams = std::make_unique<CollectiveStreams>(std::move(comms));
    mode = "a thread per stream";
  }
  ~CpuBackend() override {
    streams.reset(); // joins the stream threads first
    std::free(arena);
  }

  std::string description() const override {
    return "cpu: " + std::to_string(threads) + " threads, GEMM " +
           blas->description();
  }

  bool allocateArena(uint64_t bytes, std::string &error) override {
    // The whole arena is written (the canary) at once: one larger than the
    // host's memory would only fail later, killed by the kernel.
    uint64_t hostBytes =
        uint64_t(sysconf(_SC_PHYS_PAGES)) * uint64_t(sysconf(_SC_PAGESIZE));
    if (bytes > SIZE_MAX - 63 || (hostBytes > 0 && bytes > hostBytes)) {
      error = "cannot allocate the " + std::to_string(bytes) +
              "-byte arena on the host: it has " + std::to_string(hostBytes) +
              " bytes of memory";
      return false;
    }
    size_t rounded = (std::max<uint64_t>(bytes, 1) + 63) / 64 * 64;
    arena = static_cast<unsigned char *>(std::aligned_alloc(64, rounded));
    if (!arena) {
      error = "cannot allocate the " + std::to_string(bytes) +
              "-byte arena on the host";
      return false;
    }
    arenaSize = bytes;
    std::memset(arena, kCanary, rounded);
    return true;
  }

  bool prepare(const Plan &plan, std::string &error) override;
  HostBeyondPlan hostBeyondPlan() const override;

  void write(uint64_t offset, const void *data, uint64_t bytes) override {
    std::memcpy(arena + offset, data, bytes);
  }
  void read(uint64_t offset, void *data, uint64_t bytes) override {
    std::memcpy(data, arena + offset, bytes);
  }

  uint64_t measureHighWaterMark() override {
    uint64_t end = arenaSize;
    while (end > 0 && arena[end - 1] == kCanary)
      --end;
    return end;
  }

  void run(const Plan &plan, const Instruction &inst, const double *params,
           int64_t step) override;

  void runOptimizer(const Plan &plan,
                    const std::vector<const Instruction *> &group,
                    const std::vector<const double *> &params,
                    int64_t step) override {
    CpuKernels kernels{*blas};
    auto inArena = [&](uint32_t id) { return address(plan, id); };
    runAdamWGroup(kernels, plan, group, params, inArena, step,
                  int(plan::shardIndex(comm.rank(), plan.shardSize)),
                  optimizerTensors);
  }

  void start(const Plan &plan, const std::vector<const Instruction *> &group,
             uint32_t stream) override {
    // A bucket runs back to back on its stream's thread: one hand-off.
    std::vector<CollectiveStreams::Job> jobs;
    std::vector<uint32_t> tokens;
    for (const Instruction *inst : group) {
      jobs.push_back(collective(plan, *inst));
      tokens.push_back(plan::collectiveParams(inst->params.data()).tokenId());
    }
    // The executor's flight-recorder records, one per member, go with
    // the job to the thread that runs it.
    auto job = [jobs = std::move(jobs),
                ids = RecordScope::remaining()](Communicator &c) {
      for (size_t k = 0; k < jobs.size(); ++k) {
        RecordScope scope(std::vector<uint64_t>{k < ids.size() ? ids[k] : 0});
        jobs[k](c);
      }
    };
    // A bucket runs over one group (the loader checks each member's axis
    // against its kernel, and a bucket has one kernel).
    plan::CommAxis axis = axisOf(*group.front());
    if (streams)
      return streams->start(stream, axis, std::move(tokens), std::move(job));
    // In place: the wait reports when it ran, for traces and profiles.
    Span span{steadyNanos(), 0};
    job(groupComm(axis));
    span.endNanos = steadyNanos();
    for (uint32_t token : tokens)
      ranInPlace[token] = span;
  }
  Span wait(uint32_t token) override {
    if (streams)
      return streams->wait(token);
    Span span = ranInPlace[token];
    ranInPlace.erase(token);
    return span;
  }
  std::string collectiveMode() const override { return mode; }

private:
  /// The group a collective runs over: its plan parameter.
  static plan::CommAxis axisOf(const Instruction &inst) {
    if (inst.kernel->opcode == plan::Opcode::AllReduceSum)
      return plan::CommAxis(uint32_t(inst.params[plan::kAllReduceSumAxis]));
    return plan::collectiveParams(inst.params.data()).commAxis();
  }
  /// The main thread's communicator of `axis`'s group: `comm` itself
  /// without a replicate axis.
  Communicator &groupComm(plan::CommAxis axis) {
    auto &group = mainGroups[uint32_t(axis)];
    return group ? *group : comm;
  }
  /// Hybrid sharding: the groups of the main thread (both axes) and of
  /// each stream (the one its collectives run over), split from their
  /// communicators in one order on every rank.
  bool splitGroups(const Plan &plan, std::string &error);

  /// The all-gather, reduce-scatter or all-reduce `inst` as a job for a
  /// communicator, in its buffers' element types (an all-reduce's f32
  /// scalar is summed in double). An all-gather converts this rank's
  /// range of the shard into its own slot of the gathered buffer (rounded
  /// to nearest even when that is bf16 and the shard f32), then gathers in
  /// place (Communicator::allGatherFrom): the wire moves the gathered
  /// type, and no staging buffer is needed (the compiler's memory
  /// prediction counts none). The shard is read when the job runs, on the
  /// stream's thread: the loader has checked that nothing writes it
  /// before the wait.
  CollectiveStreams::Job collective(const Plan &plan, const Instruction &inst) {
    if (inst.kernel->opcode == plan::Opcode::AllToAll)
      return exchange(plan, inst);
    unsigned char *in = address(plan, inst.ins[0]);
    unsigned char *out = address(plan, inst.outs[0]);
    if (inst.kernel->opcode == plan::Opcode::AllReduceSum) // f32 scalars
      return [=](Communicator &c) {
        float value;
        std::memcpy(&value, in, sizeof(value));
        value = float(c.allReduceSum(double(value)));
        std::memcpy(out, &value, sizeof(value));
      };
    plan::DType from = plan.buffers[inst.ins[0]].dtype;
    plan::DType to = plan.buffers[inst.outs[0]].dtype;
    if (inst.kernel->opcode == plan::Opcode::AllReduceMean) {
      // The rank's own elements of the shard: every replica of a shard
      // has as many.
      int64_t count = validShardElements(plan, inst);
      return [=](Communicator &c) { c.allReduceMeanInPlace(in, count, from); };
    }
    if (inst.kernel->opcode == plan::Opcode::AllGather) {
      int64_t total = plan.buffers[inst.outs[0]].numElements();
      if (from == to || streams)
        return
            [=](Communicator &c) { c.allGatherFrom(in, from, out, to, total); };
      // In place on the main thread: the conversion into this rank's slot
      // over the OpenMP team (at one rank it is the whole gather).
      return [=](Communicator &c) {
        plan::ShardRange mine = plan::shardRange(total, c.rank(), c.size());
        castElements(out + mine.begin * plan::dtypeSize(to), to, in, from,
                     mine.end - mine.begin);
        c.allGather(out, total, to);
      };
    }
    // Both sides have the kernel's element type (the loader checks it).
    int64_t total = plan.buffers[inst.ins[0]].numElements();
    if (axisOf(inst) != plan::CommAxis::ExpertShard)
      return
          [=](Communicator &c) { c.reduceScatterMean(in, out, total, from); };
    // An expert-parallel unit's gradient: the sum over its S / G ranks,
    // divided by S (each rank's already sums G ranks' tokens): their mean
    // scaled by 1 / G.
    float scale = 1.0f / float(plan.expertSize);
    return [=](Communicator &c) {
      c.reduceScatterMean(in, out, total, from);
      plan::ShardRange mine = plan::shardRange(total, c.rank(), c.size());
      scaleShard(out, from, mine.end - mine.begin, scale);
    };
  }

  /// Of the shard all_reduce_mean `inst` averages, the elements this rank
  /// owns (its unit's shardRange; the loader checked the unit exists).
  int64_t validShardElements(const Plan &plan, const Instruction &inst) const {
    for (uint32_t u = 0; u < plan.units.size(); ++u)
      if (plan.units[u].name == inst.unit) {
        plan::ShardRange range = plan.shardOf(u, comm.rank());
        return range.end - range.begin;
      }
    return 0;
  }

  unsigned char *address(const Plan &plan, uint32_t id) {
    return arena + plan.buffers[id].offset;
  }

  /// A cast: element by element, rounding to nearest even into bf16.
  void castKernel(const Plan &plan, const Instruction &inst) {
    const BufferDesc &from = plan.buffers[inst.ins[0]];
    const BufferDesc &to = plan.buffers[inst.outs[0]];
    castElements(address(plan, inst.outs[0]), to.dtype,
                 address(plan, inst.ins[0]), from.dtype, to.numElements());
  }

  /// A bf16 kernel runs as the f32 one on widened copies of its bf16
  /// operands (exact), its bf16 results rounded back to nearest even: the
  /// numbers a CUDA kernel that loads bf16, computes in float and rounds
  /// its stores gets. Returns false for a kernel that is not compute.
  bool runWidened(CpuKernels &kernels, const Plan &plan,
                  const Instruction &inst, const double *params, int64_t step);

  /// all_to_all_counts (expert parallelism), synchronously.
  void allToAllCounts(const Plan &plan, const Instruction &inst);
  /// The rows' all_to_all as a job for an expert group's communicator.
  CollectiveStreams::Job exchange(const Plan &plan, const Instruction &inst);
  /// The expert group's G and L, from `inst`'s counts (`countsAt`), checked
  /// against the group's size.
  std::pair<int64_t, int64_t>
  expertCounts(const Plan &plan, const Instruction &inst, uint32_t countsAt);
  [[noreturn]] void fail(const std::string &message);

  /// The widened copies' space, sized once for the plan's widest kernel
  /// that widens with this run's GEMM library; the compiler's figure for
  /// it (every bf16 GEMM widened), and how many bf16 GEMMs the library
  /// takes instead.
  std::vector<float> widened;
  uint64_t plannedWidening = 0;
  size_t bf16Gemms = 0;
  /// runOptimizer's list of tensors, kept from step to step.
  std::vector<AdamWTensor> optimizerTensors;

  std::unique_ptr<cpu::Blas> blas;
  int threads;
  Communicator &comm;
  unsigned char *arena = nullptr;
  uint64_t arenaSize = 0;
  std::unique_ptr<CollectiveStreams> streams;
  std::array<std::unique_ptr<Communicator>, plan::kNumCommAxes> mainGroups;
  std::map<uint32_t, Span> ranInPlace; ///< without streams: token -> when
  std::string mode;
};

/// The float space the widest bf16 kernel of `plan` needs widened (or,
/// run directly on bf16, as scratch), with `blas` taking the bf16 GEMMs
/// it has a bf16 GEMM for (none: every one widened, the compiler's figure,
/// RuntimeOverhead.cpp's cpuWideningBytes).
static uint64_t wideningBytes(const Plan &plan, const cpu::Blas *blas) {
  uint64_t most = 0;
  for (const Instruction &inst : plan.program) {
    const plan::Opcode opcode = inst.kernel->opcode;
    if (inst.elementType != plan::DType::BF16 || !isComputeKernel(opcode) ||
        (blas && cpu::takesBF16Linear(*blas, plan, inst)))
      continue;
    uint64_t bytes = 0;
    if (plan::cpuRunsDirectOnBF16(opcode))
      bytes = plan::cpuWideningBytes(cpu::bf16DirectScratchFloats(plan, inst));
    else
      forEachWidened(plan, inst, [&](uint32_t id, bool) {
        bytes += plan::cpuWideningBytes(plan.buffers[id].numElements());
      });
    most = std::max(most, bytes);
  }
  return most;
}

void CpuBackend::run(const Plan &plan, const Instruction &inst,
                     const double *params, int64_t step) {
  using plan::Opcode;
  CpuKernels kernels{*blas};
  Opcode opcode = inst.kernel->opcode;
  if (opcode == Opcode::Cast) {
    castKernel(plan, inst);
    return;
  }
  if (opcode == Opcode::Copy) { // bytes, whatever the element type
    std::memmove(address(plan, inst.outs[0]), address(plan, inst.ins[0]),
                 plan.buffers[inst.outs[0]].size);
    return;
  }
  // Collectives and waits move their buffers as they are.
  // A bf16 linear kernel on the library's bf16 GEMM where it has one, an
  // add or an embedding directly on its bf16 operands (BF16Kernels.h);
  // every other bf16 kernel on widened copies.
  auto inArenaBytes = [&](uint32_t id) { return address(plan, id); };
  if (inst.elementType == plan::DType::BF16 &&
      (runBF16Linear(*blas, plan, inst, inArenaBytes) ||
       cpu::runBF16Direct(plan, inst, inArenaBytes, widened.data(),
                          widened.size())))
    return;
  if (inst.elementType == plan::DType::BF16 && isComputeKernel(opcode) &&
      runWidened(kernels, plan, inst, params, step))
    return;
  auto inArena = [&](uint32_t id) { return address(plan, id); };
  if (runCompute<float>(kernels, plan, inst, inArena, params, step,
                        int(plan::shardIndex(comm.rank(), plan.shardSize)),
                        int(plan.shardSize)))
    return;
  if (opcode == Opcode::AllToAllCounts)
    return allToAllCounts(plan, inst);
  if (opcode == Opcode::AllToAll) // in place: on the main thread's group
    return exchange(plan, inst)(groupComm(plan::CommAxis::Expert));
  if (inst.kernel->opcode != plan::Opcode::Wait) // the executor calls wait()
    collective(plan, inst)(groupComm(axisOf(inst)));
}

/// Stops the step on every rank: what a corrupt or overflowing count
/// does (never a truncation).
void CpuBackend::fail(const std::string &message) {
  std::fprintf(stderr, "fsdp-run: rank %d: error: %s\n", comm.rank(),
               message.c_str());
  std::fflush(stderr);
  comm.abort(1);
}

std::pair<int64_t, int64_t> CpuBackend::expertCounts(const Plan &plan,
                                                     const Instruction &inst,
                                                     uint32_t countsAt) {
  const std::vector<int64_t> &shape = plan.buffers[inst.ins[countsAt]].shape;
  int64_t G = shape[0], L = shape[1];
  int size = groupComm(plan::CommAxis::Expert).size();
  if (size != G)
    fail("kernel #" + std::to_string(&inst - plan.program.data()) + " (" +
         std::string(inst.kernel->name) + "): counts for " + std::to_string(G) +
         " ranks on an expert group of " + std::to_string(size));
  return {G, L};
}

/// all_to_all_counts, synchronously on the expert group (the loader
/// checked axis 3; the group has G ranks), through int64.
void CpuBackend::allToAllCounts(const Plan &plan, const Instruction &inst) {
  auto [G, L] = expertCounts(plan, inst, 0);
  auto *mine = reinterpret_cast<const int32_t *>(address(plan, inst.ins[0]));
  auto *recv = reinterpret_cast<int32_t *>(address(plan, inst.outs[0]));
  std::vector<int64_t> send(mine, mine + G * L), got(size_t(G * L));
  groupComm(plan::CommAxis::Expert).allToAllCounts(send.data(), got.data(), L);
  std::copy(got.begin(), got.end(), recv);
}

/// The rows' all_to_all: its counts are read and checked here, where the
/// program reaches it (a started one's thread then moves the rows alone),
/// in the buffers' element type.
CollectiveStreams::Job CpuBackend::exchange(const Plan &plan,
                                            const Instruction &inst) {
  auto [G, L] = expertCounts(plan, inst, 1);
  const BufferDesc &input = plan.buffers[inst.ins[0]];
  const BufferDesc &result = plan.buffers[inst.outs[0]];
  auto rows = std::make_shared<AllToAllRows>();
  std::string why;
  if (!allToAllRows(
          reinterpret_cast<const int32_t *>(address(plan, inst.ins[1])),
          reinterpret_cast<const int32_t *>(address(plan, inst.ins[2])), G, L,
          input.shape[0], result.shape[0], size_t(&inst - plan.program.data()),
          *rows, why))
    fail(why);
  uint64_t rowBytes = uint64_t(result.shape[1]) * plan::dtypeSize(result.dtype);
  int me = groupComm(plan::CommAxis::Expert).rank();
  allToAllMoved += allToAllWireBytes(*rows, me, rowBytes);
  unsigned char *in = address(plan, inst.ins[0]);
  unsigned char *out = address(plan, inst.outs[0]);
  int64_t width = result.shape[1];
  plan::DType dtype = result.dtype;
  uint64_t size = result.size;
  return [=](Communicator &group) {
    group.allToAllV(in, rows->send.data(), out, rows->recv.data(), width,
                    dtype);
    // Rows past those received are zero, as the kernel table says.
    uint64_t filled = uint64_t(rows->received) * rowBytes;
    std::memset(out + filled, 0, size - filled);
  };
}

bool CpuBackend::splitGroups(const Plan &plan, std::string &error) {
  std::vector<plan::CommAxis> axes = meshAxes(plan);
  int rank = comm.rank();
  auto split = [&](Communicator &from,
                   plan::CommAxis axis) -> std::unique_ptr<Communicator> {
    MeshGroup g = meshGroup(axis, rank, int(plan.shardSize),
                            int(plan.expertSize), comm.size());
    std::string why;
    auto group = from.split(g.color, rank, g.name, why);
    if (!group)
      error = "cannot split the " +
              std::string(plan::kCommAxisNames[uint32_t(axis)]) +
              " groups: " + why;
    return group;
  };
  for (plan::CommAxis axis : axes)
    if (!(mainGroups[uint32_t(axis)] = split(comm, axis)))
      return false;
  if (!streams)
    return true;
  // Each stream's groups: the replica stream's replica group, the expert
  // stream's expert group (started all-to-alls), the others' shard and
  // expert shard groups.
  for (uint32_t s = 1; s < plan::kNumStreams; ++s)
    for (plan::CommAxis axis : axes) {
      bool replica = axis == plan::CommAxis::Replicate;
      bool expert = axis == plan::CommAxis::Expert;
      if (expert != (s == plan::kExpertStream) ||
          (!expert && replica != (s == plan::kReplicaStream)))
        continue;
      auto group = split(streams->communicator(s), axis);
      if (!group)
        return false;
      streams->setGroup(s, axis, std::move(group));
    }
  return true;
}

bool CpuBackend::prepare(const Plan &plan, std::string &error) {
  if (!splitGroups(plan, error))
    return false;
  bf16Gemms = cpu::prepareBF16Linears(*blas, plan);
  plannedWidening = wideningBytes(plan, nullptr);
  uint64_t bytes = wideningBytes(plan, blas.get());
  if (bytes / 4 > widened.max_size()) {
    error = "cannot allocate the " + std::to_string(bytes) +
            "-byte buffer the bf16 kernels are widened into";
    return false;
  }
  widened.assign(bytes / 4, 0.0f); // touched now: resident from setup
  return true;
}

Backend::HostBeyondPlan CpuBackend::hostBeyondPlan() const {
  HostBeyondPlan beyond;
  beyond.heap = int64_t(widened.size() * sizeof(float) + blas->heapBytes()) -
                int64_t(plannedWidening);
  beyond.mapped = blas->mappedBytes();
  beyond.widens = true;
  beyond.wideningAll = plannedWidening;
  beyond.widening = widened.size() * sizeof(float);
  if (!beyond.heap && !beyond.mapped)
    return beyond;
  auto mib = [](uint64_t b) {
    char text[32];
    std::snprintf(text, sizeof(text), "%.1f MiB", double(b) / (1 << 20));
    return std::string(text);
  };
  beyond.reason = "bf16 widening buffer " +
                  mib(widened.size() * sizeof(float)) + " (the compiler's " +
                  mib(plannedWidening) + ": " + std::to_string(bf16Gemms) +
                  " bf16 GEMMs run unwidened on the library's bf16 GEMM), "
                  "its scratchpad " +
                  mib(blas->heapBytes()) + " and code " + mib(beyond.mapped);
  return beyond;
}

bool CpuBackend::runWidened(CpuKernels &kernels, const Plan &plan,
                            const Instruction &inst, const double *params,
                            int64_t step) {
  if (widened.empty()) // a caller that skipped prepare(): take it now
    widened.resize(std::max<uint64_t>(wideningBytes(plan, blas.get()), 4) / 4);
  struct Copy {
    uint32_t id;
    float *at;
    bool isResult;
  };
  std::array<Copy, kMaxOperands> copies; // no allocation per kernel
  size_t count = 0;
  uint64_t used = 0;
  forEachWidened(plan, inst, [&](uint32_t id, bool isResult) {
    float *copy = widened.data() + used / 4;
    used += plan::cpuWideningBytes(plan.buffers[id].numElements());
    // Results too: a kernel that accumulates into its result reads it.
    cpu::widenBF16Team(copy,
                       reinterpret_cast<const uint16_t *>(address(plan, id)),
                       plan.buffers[id].numElements());
    copies[count++] = {id, copy, isResult};
  });
  auto resolve = [&](uint32_t id) -> unsigned char * {
    for (size_t k = 0; k < count; ++k)
      if (copies[k].id == id)
        return reinterpret_cast<unsigned char *>(copies[k].at);
    return address(plan, id);
  };
  if (!runCompute<float>(kernels, plan, inst, resolve, params, step,
                         int(plan::shardIndex(comm.rank(), plan.shardSize)),
                         int(plan.shardSize)))
    return false;
  for (size_t k = 0; k < count; ++k)
    if (copies[k].isResult)
      cpu::roundToBF16Team(
          reinterpret_cast<uint16_t *>(address(plan, copies[k].id)),
          copies[k].at, plan.buffers[copies[k].id].numElements());
  return true;
}
} // namespace

std::unique_ptr<Backend> createCpuBackend(const CpuBackendOptions &options,
                                          std::string &error) {
  int threads = options.threads > 0 ? options.threads : omp_get_num_procs();
  omp_set_num_threads(threads);
  std::unique_ptr<cpu::Blas> blas =
      cpu::Blas::open(options.blas, threads, error);
  if (!blas)
    return nullptr;
  if (!options.comm) {
    error = "the CPU backend needs a communicator";
    return nullptr;
  }
  if (options.collectiveThreads != "auto" &&
      options.collectiveThreads != "on" && options.collectiveThreads != "off") {
    error = "--collective-threads expects on, off or auto, got '" +
            options.collectiveThreads + "'";
    return nullptr;
  }
  return std::make_unique<CpuBackend>(std::move(blas), threads, *options.comm,
                                      options.collectiveThreads);
}

} // namespace fsdp::rt
