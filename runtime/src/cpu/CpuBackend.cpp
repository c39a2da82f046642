//===- CpuBackend.cpp - the CPU backend: our kernels plus a CBLAS ---------===//

#include "fsdp/runtime/Backend.h"
#include "fsdp/runtime/Communicator.h"
#include "fsdp/runtime/FlightRecorder.h"

#include "Blas.h"
#include "CollectiveStreams.h"
#include "KernelDispatch.h"
#include "Kernels.h"

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <map>
#include <omp.h>
#include <unistd.h>

namespace fsdp::rt {
namespace {
constexpr unsigned char kCanary = 0xA5;

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
    if (streams)
      return streams->start(stream, std::move(tokens), std::move(job));
    // In place: the wait reports when it ran, for traces and profiles.
    Span span{steadyNanos(), 0};
    job(comm);
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
  /// The all-gather or reduce-scatter `inst` as a job for a communicator.
  CollectiveStreams::Job collective(const Plan &plan, const Instruction &inst) {
    float *in = f32(plan, inst.ins[0]);
    float *out = f32(plan, inst.outs[0]);
    if (inst.kernel->opcode == plan::Opcode::AllGather) {
      int64_t total = plan.buffers[inst.outs[0]].numElements();
      return [=](Communicator &c) { c.allGather(in, out, total); };
    }
    int64_t total = plan.buffers[inst.ins[0]].numElements();
    return [=](Communicator &c) { c.reduceScatterMean(in, out, total); };
  }

  float *f32(const Plan &plan, uint32_t id) {
    return reinterpret_cast<float *>(arena + plan.buffers[id].offset);
  }

  std::unique_ptr<cpu::Blas> blas;
  int threads;
  Communicator &comm;
  unsigned char *arena = nullptr;
  uint64_t arenaSize = 0;
  std::unique_ptr<CollectiveStreams> streams;
  std::map<uint32_t, Span> ranInPlace; ///< without streams: token -> when
  std::string mode;
};

void CpuBackend::run(const Plan &plan, const Instruction &inst,
                     const double *params, int64_t step) {
  CpuKernels kernels{*blas};
  if (runCompute(kernels, plan, inst, arena, params, step, comm.rank(),
                 comm.size()))
    return;
  if (inst.kernel->opcode != plan::Opcode::Wait) // the executor calls wait()
    collective(plan, inst)(comm);
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
