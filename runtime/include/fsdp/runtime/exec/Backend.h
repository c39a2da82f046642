//===- Backend.h - what executes a plan's kernels ---------------*- C++ -*-===//
//
// A backend owns the arena (allocated once, laid out by the compiler) and
// runs one kernel at a time on it. The CPU backend is the reference; the
// CUDA backend implements the same interface.
//
//===----------------------------------------------------------------------===//

#ifndef FSDP_RUNTIME_BACKEND_H
#define FSDP_RUNTIME_BACKEND_H

#include "fsdp/runtime/plan/Plan.h"
#include "fsdp/runtime/support/SteadyClock.h"

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <variant>
#include <vector>

namespace fsdp::rt {

class Backend {
public:
  virtual ~Backend() = default;
  /// "cpu: 2 threads, openblas (...; core SkylakeX)": names the GEMM
  /// library and the kernel it runs.
  virtual std::string description() const = 0;
  /// Allocates the arena, once, and fills it with a canary pattern so that
  /// measureHighWaterMark can tell which bytes kernels have touched.
  virtual bool allocateArena(uint64_t bytes, std::string &error) = 0;
  /// Takes, at setup, what `plan`'s kernels need beyond the arena (the
  /// CPU's widening buffer for bf16 kernels), so that a step allocates
  /// nothing.
  virtual bool prepare(const Plan &plan, std::string &error) { return true; }
  virtual void write(uint64_t offset, const void *data, uint64_t bytes) = 0;
  virtual void read(uint64_t offset, void *data, uint64_t bytes) = 0;
  /// Runs one kernel; `step` is the 1-based step number (AdamW's bias
  /// correction). `params` overrides the instruction's parameters.
  virtual void run(const Plan &plan, const Instruction &inst,
                   const double *params, int64_t step) = 0;
  /// Runs `group`, a step's adjacent AdamW instructions (adamw_shard: one
  /// per unit), as one multi-tensor AdamW where the backend has one
  /// (AdamWTensors.h): one parallel pass on the CPU, one launch per list
  /// of tensors on the GPU, instead of one per parameter segment.
  /// `params[i]` overrides member i's parameters. The default runs them
  /// one by one.
  virtual void runOptimizer(const Plan &plan,
                            const std::vector<const Instruction *> &group,
                            const std::vector<const double *> &params,
                            int64_t step) {
    for (size_t i = 0; i < group.size(); ++i)
      run(plan, *group[i], params[i], step);
  }
  /// Starts the collectives `group` (all_gathers or reduce_scatters: one,
  /// or a bucket to issue as one fused collective) on plan stream `stream`
  /// (>= 1), each under the token in its parameters, and returns without
  /// waiting for them where the backend can overlap them with compute (the
  /// CPU: a thread per stream; the GPU: a CUDA stream per plan stream). The
  /// default runs them here.
  virtual void start(const Plan &plan,
                     const std::vector<const Instruction *> &group,
                     uint32_t stream) {
    for (const Instruction *inst : group)
      run(plan, *inst, inst->params.data(), 0);
  }
  /// When a started collective ran, in steady-clock nanoseconds; zeros
  /// where the backend cannot tell.
  struct Span {
    int64_t startNanos = 0, endNanos = 0;
  };
  /// Makes the kernels after this call wait for collective `token` (the
  /// CPU blocks until it has finished; the GPU orders the compute stream
  /// after it).
  virtual Span wait(uint32_t token) { return {}; }
  /// How started collectives run: "a thread per stream", "synchronously
  /// (MPI without thread support)", "CUDA streams".
  virtual std::string collectiveMode() const { return "synchronously"; }
  /// True when collectives run through the host Communicator (the CPU's
  /// MPI), which records them in the flight recorder itself; false where
  /// they are enqueued on a device (NCCL): the executor records those.
  virtual bool hostCollectives() const { return true; }
  /// Waits for all kernels issued so far. `finished`, where given, is told
  /// the token of each collective started (start()) since the last call as
  /// the device finishes it, before this returns: the executor closes the
  /// collective's flight-recorder record then, not when the host merely
  /// enqueued the wait for it.
  virtual void
  synchronize(const std::function<void(uint32_t token)> &finished = nullptr) {}
  /// One past the highest arena byte that differs from the canary.
  virtual uint64_t measureHighWaterMark() = 0;

  /// Kernel timing on the device. A backend whose kernels run
  /// asynchronously (CUDA: run() returns once the kernel is enqueued) says
  /// so here, and the executor then takes a kernel's time from the device
  /// instead of the host's clock around run().
  virtual bool timesKernelsOnDevice() const { return false; }
  /// Starts (or stops) timing every later run() on the device (CUDA: a
  /// pair of timing events around it on the compute stream). Off by
  /// default: the events cost a little, so only a profile or a trace turns
  /// it on.
  virtual void setKernelTiming(bool on) {}
  /// One kernel the device timed: its opcode, when it started (seconds
  /// after the first kernel timed since the last take started) and how
  /// long it ran.
  struct KernelTime {
    uint32_t opcode = 0;
    double start = 0.0, seconds = 0.0;
  };
  /// Tells `add` the time of every run() timed since the last call, in the
  /// order they were run, and forgets them. Call it after synchronize().
  virtual void
  takeKernelTimes(const std::function<void(const KernelTime &)> &add) {}

  /// Device memory in use (the device's total less its free bytes: our
  /// arena, the libraries' share and anything else on the device), once
  /// setup is done and the most seen when a step had finished; `measured`
  /// is false where there is no device (the CPU).
  struct DeviceMemory {
    bool measured = false;
    uint64_t afterSetup = 0, peak = 0, total = 0;
    /// The memory in use after each stage of setup, in order (the first
    /// is the CUDA context with whatever else the device held; the later
    /// ones' growth is what each took), and after the first step.
    struct Stage {
      std::string name;
      uint64_t used = 0;
    };
    std::vector<Stage> stages;
  };
  virtual DeviceMemory deviceMemory() const { return {}; }
  /// What this backend holds on the host outside the arena beyond (or,
  /// negative, short of) the compiler's figures, known once prepare() is
  /// done: on the CPU, the widening buffer sized for the kernels that
  /// widen with this run's GEMM library (the compiler sizes it for every
  /// bf16 GEMM widened), that library's scratchpad (heap) and its code
  /// and generated kernels (mapped, resident only).
  struct HostBeyondPlan {
    int64_t heap = 0;
    uint64_t mapped = 0;
    std::string reason; ///< empty when both are 0
    /// The CPU's bf16 widening buffer: its bytes with every bf16 GEMM
    /// widened (the compiler's "bf16 widening" figure, by the rules
    /// PlanFormat.h shares with it) and as this run sized it.
    bool widens = false;
    uint64_t wideningAll = 0, widening = 0;
  };
  virtual HostBeyondPlan hostBeyondPlan() const { return {}; }
  /// The device's dense peak FLOP/s for the plan's GEMMs (bf16 or f32, as
  /// the backend runs them), 0 when unknown (PeakFlops.h).
  virtual double peakFlops(bool bf16) const { return 0.0; }
  /// Bytes this rank's all_to_alls have moved to and from other ranks so
  /// far (expert parallelism; AllToAll.h's allToAllWireBytes): the run
  /// summary's per-step figure is its growth over the timed steps.
  uint64_t allToAllBytes() const { return allToAllMoved; }

protected:
  uint64_t allToAllMoved = 0;
};

class Communicator;

/// The CPU backend's options (--backend cpu).
struct CpuBackendOptions {
  static constexpr const char *kName = "cpu";
  int threads = 0;               ///< 0: all cores
  std::string blas = "openblas"; ///< or "blis"
  Communicator *comm = nullptr;  ///< the ranks' collectives (required)
  /// Started collectives on a thread per stream: "on", "off" (in place, on
  /// the compute thread), or "auto": on only where every rank of the node
  /// has a core to spare for them (ranks x (threads + 1) <= cores), since
  /// MPI's shared-memory collectives are work for the CPU cores themselves
  /// (docs/overlap.md measures both). Agreed over all ranks.
  std::string collectiveThreads = "auto";
};

/// The CPU backend; on failure (no BLAS library) returns null with `error`.
std::unique_ptr<Backend> createCpuBackend(const CpuBackendOptions &options,
                                          std::string &error);

/// The CUDA backend's options (--backend cuda).
struct CudaBackendOptions {
  static constexpr const char *kName = "cuda";
  int device = -1; ///< -1: the node-local rank's, mod devices
  /// The rank's index on its node (nodeLocalRank, NodeRank.h: mpirun's or
  /// srun's variable, else MPI's shared-memory split); -1: comm's.
  int localRank = -1;
  bool tf32 = true;             ///< cuBLAS TF32 tensor-op math for GEMMs
  Communicator *comm = nullptr; ///< the ranks' host communicator (required):
                                ///< bootstraps NCCL, reduces the loss
  /// A collective unfinished this long (seconds; 0: never) when the host
  /// waits for the step aborts the NCCL communicators and ends the job.
  double collectiveTimeout = 300.0;
};

/// The CUDA backend (cuBLAS, our kernels, NCCL). Returns null with `error`
/// when this build has no CUDA or the machine no usable GPU. Every rank
/// must call it (NCCL's setup is collective).
std::unique_ptr<Backend> createCudaBackend(const CudaBackendOptions &options,
                                           std::string &error);

/// The CUDA devices this process sees, one line each, or why there are
/// none (also in a build without CUDA).
std::string listCudaDevices();

/// The options of one backend: which alternative it holds says which
/// backend runs, and that backend sees only its own options. A new backend
/// adds its options type (with its kName) here and its create function to
/// Backends.cpp's overloads.
using BackendOptions = std::variant<CpuBackendOptions, CudaBackendOptions>;

/// The backends this build registers, by name ("cpu", "cuda"): the
/// alternatives of BackendOptions, in its order.
const std::vector<std::string> &backendNames();
bool isBackend(const std::string &name);
/// Backend `name`'s options as its type defaults them; false when no
/// backend has that name.
bool defaultBackendOptions(const std::string &name, BackendOptions &options);
/// The name of the backend `options` are for.
const char *backendName(const BackendOptions &options);
/// The backend `options` are for, given them; null with `error` when it
/// cannot start.
std::unique_ptr<Backend> createBackend(const BackendOptions &options,
                                       std::string &error);

} // namespace fsdp::rt

#endif // FSDP_RUNTIME_BACKEND_H
