//===- CudaBackend.cpp - the CUDA backend: cuBLAS, our kernels, NCCL ------===//
//
// One device per rank (its local rank unless --device says otherwise). The
// arena is one cudaMalloc laid out by the compiler. Kernels run in program
// order on one compute stream; the plan's streams 1 and 2 are CUDA streams
// of their own, each with its own NCCL communicator (so gathers and
// reduce-scatters never serialise behind each other's communicator).
// Nothing in a step synchronises the host: a started collective waits for
// the compute before it (an event), its wait is an event the compute
// stream waits for. The host waits once per step, in synchronize(), which
// also checks NCCL's asynchronous errors and the collective timeout, and
// names the collective that did not finish. Kernel timing (--profile,
// --trace) and the memory each setup stage took: Device.h.
//
// Mixed precision: a kernel runs in its instruction's element type (our
// kernels' bf16 instantiation, cuBLAS's GemmEx); casts are our cast
// kernel; an all-gather from an f32 shard into a bf16 result first rounds
// the shard into its own slot of the result, on the collective's stream,
// and then gathers in place.
//
//===----------------------------------------------------------------------===//

#include "fsdp/runtime/comm/Communicator.h"
#include "fsdp/runtime/exec/Backend.h"
#include "fsdp/runtime/support/PeakFlops.h"

#include "CudaAllToAll.h"
#include "Device.h"
#include "DeviceAccess.h"
#include "Module.h"
#include "Nccl.h"
#include "fsdp/runtime/exec/KernelDispatch.h"
#include "fsdp/runtime/exec/MeshGroup.h"
#include "kernels/Kernels.h"

#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <thread>
#include <vector>

namespace fsdp::rt {
namespace {
constexpr unsigned char kCanary = 0xA5;
/// Seconds past the collective timeout before synchronize() ends the job
/// itself: the watchdog's dump and report take up to 5 s (FlightRecorder.cpp).
constexpr double kWatchdogGrace = 10.0;
// The kernels' header does not see the plan format's.
static_assert(cuda::kGradSqSumBlocks == plan::kGradSqSumBlocks &&
                  2 * cuda::kGradSqSumBlocks == plan::kGradSqSumScratch &&
                  cuda::kClipEpsilon == plan::kClipEpsilon,
              "the CUDA kernels' gradient clipping constants are the plan's");

using cuda::cudaText;

/// A started collective, until the step's synchronize().
struct InFlight {
  uint32_t token;
  size_t instruction;
  int64_t step;
  bool reported = false; ///< synchronize() told its caller it finished
};

class CudaBackend : public Backend {
public:
  CudaBackend(const CudaBackendOptions &options, int device)
      : comm(*options.comm), device(device), tf32(options.tf32),
        timeout(options.collectiveTimeout) {}
  ~CudaBackend() override;

  bool initialize(std::string &error);

  std::string description() const override { return text; }
  bool allocateArena(uint64_t bytes, std::string &error) override;
  /// Hybrid sharding: one NCCL communicator per group, each bootstrapped
  /// over MPI within its group (the host communicator split by mesh axis):
  /// streams 1 and 2 (and the compute stream's collectives) over the shard
  /// group, stream 3 over the replica group.
  bool prepare(const Plan &plan, std::string &error) override;
  void write(uint64_t offset, const void *data, uint64_t bytes) override;
  void read(uint64_t offset, void *data, uint64_t bytes) override;
  void run(const Plan &plan, const Instruction &inst, const double *params,
           int64_t step) override;
  void runOptimizer(const Plan &plan,
                    const std::vector<const Instruction *> &group,
                    const std::vector<const double *> &params,
                    int64_t step) override;
  void start(const Plan &plan, const std::vector<const Instruction *> &group,
             uint32_t stream) override;
  Span wait(uint32_t token) override;
  std::string collectiveMode() const override {
    return "on CUDA streams (NCCL " + cuda::Nccl::version() + ")";
  }
  /// NCCL runs the plan's collectives on the device; the executor records
  /// them for the flight recorder.
  bool hostCollectives() const override { return false; }
  void
  synchronize(const std::function<void(uint32_t)> &finished = nullptr) override;
  uint64_t measureHighWaterMark() override;
  /// Asynchronous: run() times its kernels with events (Device.h).
  bool timesKernelsOnDevice() const override { return true; }
  void setKernelTiming(bool on) override { timer.on = on; }
  void
  takeKernelTimes(const std::function<void(const KernelTime &)> &add) override {
    check(timer.take(add), "cudaEventElapsedTime (kernel timing)");
  }
  DeviceMemory deviceMemory() const override { return meter.memory(); }
  double peakFlops(bool bf16) const override {
    return knownPeakFlops(deviceName, bf16, tf32);
  }

private:
  /// Our kernels and cuBLAS under the names runCompute calls, all on the
  /// compute stream.
  struct Kernels {
    CudaBackend &backend;
    cuda::Context ctx;
#define FSDP_KERNEL(name)                                                      \
  template <typename... Args> void name(Args... args) {                        \
    cuda::name(ctx, args...);                                                  \
  }
    FSDP_RUNTIME_OTHER_KERNELS(FSDP_KERNEL)
    FSDP_RUNTIME_GEMM_KERNELS(FSDP_KERNEL)
    FSDP_KERNEL(crossEntropyForward)
    FSDP_KERNEL(gradSqSum)
    FSDP_KERNEL(moeSelectionBiasUpdate)
    FSDP_KERNEL(adamwTensors)
#undef FSDP_KERNEL
    void copy(void *out, const void *in, uint64_t bytes) {
      backend.check(
          cudaMemcpyAsync(out, in, bytes, cudaMemcpyDeviceToDevice, ctx.stream),
          "cudaMemcpyAsync (copy kernel)");
    }
  };

  unsigned char *address(const Plan &plan, uint32_t id) {
    return arena + plan.buffers[id].offset;
  }
  /// runOptimizer's list of tensors, kept from step to step.
  std::vector<AdamWTensor> optimizerTensors;
  /// Ends the job on every rank with `message`.
  [[noreturn]] void fail(const std::string &message);
  void check(cudaError_t code, const char *what) {
    if (code != cudaSuccess)
      fail(std::string(what) + ": " + cudaText(code));
  }
  /// Fails on the first error a kernel launch or cuBLAS call recorded.
  void checkKernels(const Instruction &inst) {
    std::string message;
    if (cuda::takeError(message))
      fail("kernel " + std::string(inst.kernel->name) + ": " + message);
  }
  void collective(const Plan &plan, const Instruction &inst, cuda::Nccl &nccl,
                  cudaStream_t stream);
  bool scaleExpertShard(const Plan &plan, const Instruction &inst,
                        cuda::Nccl &nccl, cudaStream_t stream);
  /// Tells the emulator's race checker the buffers `inst` reads and writes
  /// on `stream` (DeviceAccess.h); nothing on a GPU.
  void declareBuffers(const Plan &plan, const Instruction &inst,
                      cudaStream_t stream);
  /// runCompute in the instruction's element type.
  bool runComputeIn(const Plan &plan, const Instruction &inst,
                    const double *params, int64_t step) {
    Kernels kernels{*this, {compute, blas, tf32}};
    auto inArena = [&](uint32_t id) { return address(plan, id); };
    if (inst.elementType == plan::DType::BF16)
      return runCompute<__nv_bfloat16>(
          kernels, plan, inst, inArena, params, step,
          int(plan::shardIndex(comm.rank(), plan.shardSize)),
          int(plan.shardSize));
    return runCompute<float>(kernels, plan, inst, inArena, params, step,
                             int(plan::shardIndex(comm.rank(), plan.shardSize)),
                             int(plan.shardSize));
  }
  /// An all-gather into another element type: its shard converted (into
  /// bf16: rounded) into this rank's slot of the result, on `stream`,
  /// before the in-place gather. Whether it was one.
  bool castIntoSlot(const Plan &plan, const Instruction &inst,
                    cudaStream_t stream);
  void castKernel(const Plan &plan, const Instruction &inst);
  cudaEvent_t event(std::map<uint32_t, cudaEvent_t> &events, uint32_t key);

  Communicator &comm;
  int device;
  bool tf32;
  double timeout;
  std::string text;
  std::string deviceName; ///< CUDA's name for the device
  cudaStream_t compute = nullptr;
  cudaStream_t streams[plan::kNumStreams] = {};
  std::unique_ptr<cuda::Nccl> nccl[plan::kNumStreams];
  /// The communicator of collective `inst` on `stream`: the stream's own,
  /// or for the compute stream's collectives stream 1's (the shard group)
  /// or, for a replica all-reduce, stream 3's (the replica group).
  cuda::Nccl &ncclFor(const Instruction &inst, uint32_t stream) {
    // An expert-parallel unit's gathers and reduce-scatters (axis 2).
    if (inst.kernel->opcode != plan::Opcode::AllReduceSum &&
        plan::collectiveParams(inst.params.data()).commAxis() ==
            plan::CommAxis::ExpertShard)
      return *expertShard[stream != 0 ? stream : plan::kGatherStream];
    if (stream != 0)
      return *nccl[stream];
    bool replica = inst.kernel->opcode == plan::Opcode::AllReduceMean;
    return *nccl[replica ? plan::kReplicaStream : plan::kGatherStream];
  }
  /// Expert parallelism (prepare): the expert group on the host (the
  /// all-to-alls' counts) and in NCCL (their rows), and the expert shard
  /// group of the gather and scatter streams.
  std::unique_ptr<Communicator> expertHost;
  std::unique_ptr<cuda::Nccl> expertNccl, expertShard[plan::kReplicaStream];
  bool splitExperts(const Plan &plan, std::string &error);
  /// all_to_all_counts or all_to_all `inst` on `stream` (CudaAllToAll.h).
  void exchange(const Plan &plan, const Instruction &inst, cudaStream_t stream);
  cublasHandle_t blas = nullptr;
  unsigned char *arena = nullptr;
  uint64_t arenaSize = 0;
  cuda::MemoryMeter meter; ///< device memory by setup stage, peak
  cuda::KernelTimer timer; ///< run()'s timing events
  const Plan *currentPlan = nullptr;
  int64_t currentStep = 0;
  std::map<uint32_t, cudaEvent_t> done, ready;
  std::vector<InFlight> inFlight;
};

bool CudaBackend::initialize(std::string &error) {
  auto cudaOk = [&](cudaError_t code, const char *what) {
    if (code == cudaSuccess)
      return true;
    error = std::string(what) + ": " + cudaText(code);
    return false;
  };
  if (!cudaOk(cudaSetDevice(device), "cudaSetDevice") ||
      !cudaOk(cudaFree(nullptr), "cudaFree (the context)"))
    return false;
  meter.stage("context");
  cudaDeviceProp prop;
  if (!cudaOk(cudaGetDeviceProperties(&prop, device),
              "cudaGetDeviceProperties"))
    return false;
  if (!cudaOk(cudaStreamCreateWithFlags(&compute, cudaStreamNonBlocking),
              "cudaStreamCreate"))
    return false;
  streams[0] = compute;
  for (uint32_t s = 1; s < plan::kNumStreams; ++s)
    if (!cudaOk(cudaStreamCreateWithFlags(&streams[s], cudaStreamNonBlocking),
                "cudaStreamCreate"))
      return false;
  meter.stage("streams");
  cublasStatus_t status = cublasCreate(&blas);
  if (status != CUBLAS_STATUS_SUCCESS) {
    error = std::string("cublasCreate: ") + cuda::cublasStatusName(status);
    return false;
  }
  cublasSetStream(blas, compute);
  cublasSetMathMode(blas,
                    tf32 ? CUBLAS_TF32_TENSOR_OP_MATH : CUBLAS_PEDANTIC_MATH);
  meter.stage("cuBLAS handle");
  // Connect every channel now, at setup, not lazily inside the first
  // collective of a step (where a late peer would block the host outside
  // the timeout, and the connection buffers would be allocated while the
  // step runs); keep two communicators' kernels in issue order on one GPU.
  // The environment still decides where it says otherwise.
  setenv("NCCL_RUNTIME_CONNECT", "0", /*overwrite=*/0);
  setenv("NCCL_LAUNCH_ORDER_IMPLICIT", "1", /*overwrite=*/0);
  int runtimeVersion = 0, driverVersion = 0, blasVersion = 0;
  cudaRuntimeGetVersion(&runtimeVersion);
  cudaDriverGetVersion(&driverVersion);
  cublasGetVersion(blas, &blasVersion);
  deviceName = prop.name;
  char line[512];
  std::snprintf(line, sizeof(line),
                "cuda: device %d, %s (sm_%d%d, %d SMs, %.1f GiB); GEMM cuBLAS "
                "%d (%s); CUDA runtime %d, driver %d",
                device, prop.name, prop.major, prop.minor,
                prop.multiProcessorCount,
                double(prop.totalGlobalMem) / (1ull << 30), blasVersion,
                tf32 ? "TF32 tensor cores" : "pedantic fp32", runtimeVersion,
                driverVersion);
  text = line;
  return true;
}

CudaBackend::~CudaBackend() {
  if (compute)
    cudaStreamSynchronize(compute);
  for (auto *events : {&done, &ready})
    for (auto &[key, e] : *events)
      cudaEventDestroy(e);
  for (auto &n : nccl)
    n.reset();
  if (blas)
    cublasDestroy(blas);
  for (uint32_t s = 1; s < plan::kNumStreams; ++s)
    if (streams[s])
      cudaStreamDestroy(streams[s]);
  if (compute)
    cudaStreamDestroy(compute);
  if (arena)
    cudaFree(arena);
}

/// The expert and expert shard groups (MeshGroup.h), split from the world
/// in one order on every rank.
bool CudaBackend::splitExperts(const Plan &plan, std::string &error) {
  int rank = comm.rank(), S = int(plan.shardSize), G = int(plan.expertSize);
  std::string why;
  MeshGroup e = meshGroup(plan::CommAxis::Expert, rank, S, G, comm.size());
  MeshGroup x = meshGroup(plan::CommAxis::ExpertShard, rank, S, G, comm.size());
  expertHost = comm.split(e.color, rank, e.name, why);
  auto shardHost =
      expertHost ? comm.split(x.color, rank, x.name, why) : nullptr;
  if (!shardHost) {
    error = "cannot split the expert groups: " + why;
    return false;
  }
  if (!(expertNccl = meter.nccl(*expertHost, "expert group", error)))
    return false;
  for (uint32_t s = plan::kGatherStream; s < plan::kReplicaStream; ++s)
    if (!(expertShard[s] = meter.nccl(*shardHost, "expert shard group", error)))
      return false;
  return true;
}

bool CudaBackend::prepare(const Plan &plan, std::string &error) {
  if (plan.expertSize > 1 && !splitExperts(plan, error))
    return false;
  // Stream 0's collectives (plans without a schedule) share stream 1's
  // communicator: they run on the compute stream, never concurrently.
  // Stream 3 (replica all-reduces) gets its own only under hybrid
  // sharding, whose shard group's take streams 1 and 2 (below): the
  // world's are made only when they are used.
  if (plan.replicas() == 1) {
    for (uint32_t s = 1; s < plan::kReplicaStream; ++s)
      if (!nccl[s] && !(nccl[s] = meter.nccl(comm, "world", error)))
        return false;
    return true;
  }
  int rank = comm.rank(), shards = int(plan.shardSize);
  std::string why;
  auto shardHost = comm.split(
      rank / shards, rank, "shard group " + std::to_string(rank / shards), why);
  auto replicaHost =
      shardHost
          ? comm.split(rank % shards, rank,
                       "replica group " + std::to_string(rank % shards), why)
          : nullptr;
  if (!replicaHost) {
    error = "cannot split the mesh's groups: " + why;
    return false;
  }
  // The shard group's communicators on streams 1 and 2, in one order on
  // every rank.
  for (uint32_t s = 1; s <= plan::kReplicaStream; ++s) {
    bool replica = s == plan::kReplicaStream;
    if (!(nccl[s] =
              meter.nccl(replica ? *replicaHost : *shardHost,
                         replica ? "replica group" : "shard group", error)))
      return false;
  }
  return true;
}

void CudaBackend::fail(const std::string &message) {
  std::fprintf(stderr, "fsdp-run: rank %d: error: %s\n", comm.rank(),
               message.c_str());
  std::fflush(stderr);
  for (auto &n : nccl)
    if (n)
      n->abort();
  for (auto *n : {&expertNccl, &expertShard[1], &expertShard[2]})
    if (*n)
      (*n)->abort();
  comm.abort(1);
  std::abort(); // not reached: abort() ends the job
}

bool CudaBackend::allocateArena(uint64_t bytes, std::string &error) {
  size_t freeBytes = 0, totalBytes = 0;
  cudaMemGetInfo(&freeBytes, &totalBytes);
  // cuBLAS's workspace follows the arena in the same allocation, so that
  // the library allocates nothing of its own and the compiler's figure for
  // it is exact (plan::kCublasWorkspaceBytes).
  uint64_t workspaceAt = (bytes + 255) / 256 * 256;
  cudaError_t code = cudaMalloc(reinterpret_cast<void **>(&arena),
                                workspaceAt + plan::kCublasWorkspaceBytes);
  if (code != cudaSuccess) {
    error = "cannot allocate the " + std::to_string(bytes) +
            "-byte arena and cuBLAS's " +
            std::to_string(plan::kCublasWorkspaceBytes) +
            "-byte workspace on device " + std::to_string(device) + " (" +
            std::to_string(freeBytes) + " bytes free): " + cudaText(code);
    arena = nullptr;
    return false;
  }
  arenaSize = bytes;
  cublasStatus_t set = cublasSetWorkspace(blas, arena + workspaceAt,
                                          plan::kCublasWorkspaceBytes);
  if (set != CUBLAS_STATUS_SUCCESS) {
    error = std::string("cublasSetWorkspace: ") + cuda::cublasStatusName(set);
    return false;
  }
  // On the compute stream, and finished before anything is written: a
  // fill still running on another stream would overwrite the parameters.
  code = cudaMemsetAsync(arena, kCanary, std::max<uint64_t>(bytes, 1), compute);
  if (code == cudaSuccess)
    code = cudaStreamSynchronize(compute);
  if (code != cudaSuccess) {
    error = "cudaMemset of the arena: " + cudaText(code);
    return false;
  }
  meter.stage("arena and cuBLAS workspace");
  return true;
}

void CudaBackend::write(uint64_t offset, const void *data, uint64_t bytes) {
  check(cudaMemcpyAsync(arena + offset, data, bytes, cudaMemcpyHostToDevice,
                        compute),
        "cudaMemcpyAsync (to the device)");
  // The caller may reuse `data` at once.
  check(cudaStreamSynchronize(compute), "cudaStreamSynchronize");
}

void CudaBackend::read(uint64_t offset, void *data, uint64_t bytes) {
  synchronize();
  check(cudaMemcpy(data, arena + offset, bytes, cudaMemcpyDeviceToHost),
        "cudaMemcpy (to the host)");
}

cudaEvent_t CudaBackend::event(std::map<uint32_t, cudaEvent_t> &events,
                               uint32_t key) {
  auto [it, inserted] = events.try_emplace(key, nullptr);
  if (inserted)
    check(cudaEventCreateWithFlags(&it->second, cudaEventDisableTiming),
          "cudaEventCreate");
  return it->second;
}

bool CudaBackend::castIntoSlot(const Plan &plan, const Instruction &inst,
                               cudaStream_t stream) {
  const BufferDesc &shard = plan.buffers[inst.ins[0]];
  const BufferDesc &full = plan.buffers[inst.outs[0]];
  if (inst.kernel->opcode != plan::Opcode::AllGather ||
      shard.dtype == full.dtype)
    return false;
  // The shard buffer holds maxShardSize elements; this rank's count of
  // them are its range. (Mixed precision gathers f32 into bf16; the other
  // way is as well defined.)
  // (Of its unit's ranks: S / G for an expert-parallel unit.)
  plan::ShardRange range = plan.shardOf(uint32_t(shard.unit), comm.rank());
  const cuda::Context ctx{stream, blas};
  unsigned char *to = address(plan, inst.outs[0]);
  const unsigned char *from = address(plan, inst.ins[0]);
  const size_t toBytes = plan::dtypeSize(full.dtype);
  cuda::declareAccess(stream, from,
                      size_t(range.end - range.begin) *
                          plan::dtypeSize(shard.dtype),
                      /*write=*/false, "the rounding of a shard into its slot");
  cuda::declareAccess(stream, to + size_t(range.begin) * toBytes,
                      size_t(range.end - range.begin) * toBytes,
                      /*write=*/true, "the rounding of a shard into its slot");
  if (full.dtype == plan::DType::BF16)
    cuda::cast(ctx, reinterpret_cast<__nv_bfloat16 *>(to) + range.begin,
               reinterpret_cast<const float *>(from), range.end - range.begin);
  else
    cuda::cast(ctx, reinterpret_cast<float *>(to) + range.begin,
               reinterpret_cast<const __nv_bfloat16 *>(from),
               range.end - range.begin);
  // Named here: a started gather's launch error would otherwise surface at
  // the next compute kernel, under its name.
  checkKernels(inst);
  return true;
}

void CudaBackend::collective(const Plan &plan, const Instruction &inst,
                             cuda::Nccl &nccl, cudaStream_t stream) {
  std::string error;
  const BufferDesc &in = plan.buffers[inst.ins[0]];
  const BufferDesc &out = plan.buffers[inst.outs[0]];
  void *to = address(plan, inst.outs[0]);
  bool ok;
  if (inst.kernel->opcode == plan::Opcode::AllReduceMean) // in place
    ok = nccl.allReduceMean(
        to, out.dtype,
        [&] {
          int32_t u = unitNamed(plan, inst.unit);
          return u < 0 ? int64_t(0)
                       : plan::maxShardSize(plan.units[u].flatSize,
                                            plan.unitShards(uint32_t(u)));
        }(),
        stream, error);
  else if (inst.kernel->opcode == plan::Opcode::AllReduceSum) // f32 scalars
    ok = nccl.allReduceSum(
        reinterpret_cast<const float *>(address(plan, inst.ins[0])),
        static_cast<float *>(to), stream, error);
  else if (inst.kernel->opcode == plan::Opcode::ReduceScatter)
    ok = nccl.reduceScatterMean(address(plan, inst.ins[0]), to, in.dtype,
                                in.numElements(), stream, error);
  else if (in.dtype != out.dtype) // castIntoSlot put the shard in place
    ok = nccl.allGatherInPlace(to, out.dtype, out.numElements(), stream, error);
  else
    ok = nccl.allGather(address(plan, inst.ins[0]), to, out.dtype,
                        out.numElements(), stream, error);
  if (!ok)
    fail(std::string(inst.kernel->name) +
         (inst.unit.empty() ? "" : " of unit '" + inst.unit + "'") + ": " +
         error);
}

/// An expert-parallel unit's reduce-scatter divides its sum by S, not by
/// its S / G ranks (each rank's expert gradient already sums G ranks'
/// tokens): NCCL's mean, scaled by 1 / G on this rank's range.
bool CudaBackend::scaleExpertShard(const Plan &plan, const Instruction &inst,
                                   cuda::Nccl &nccl, cudaStream_t stream) {
  if (inst.kernel->opcode != plan::Opcode::ReduceScatter ||
      plan::collectiveParams(inst.params.data()).commAxis() !=
          plan::CommAxis::ExpertShard)
    return true;
  const BufferDesc &in = plan.buffers[inst.ins[0]];
  plan::ShardRange mine =
      plan::shardRange(in.numElements(), nccl.rankId(), nccl.worldSize());
  const cuda::Context ctx{stream, blas};
  float scale = 1.0f / float(plan.expertSize);
  void *to = address(plan, inst.outs[0]);
  if (in.dtype == plan::DType::BF16)
    cuda::scale(ctx, static_cast<__nv_bfloat16 *>(to), mine.end - mine.begin,
                scale);
  else
    cuda::scale(ctx, static_cast<float *>(to), mine.end - mine.begin, scale);
  return true;
}

void CudaBackend::declareBuffers(const Plan &plan, const Instruction &inst,
                                 cudaStream_t stream) {
  if constexpr (!cuda::kEmulated)
    return;
  std::string what = std::string(inst.kernel->name) +
                     (inst.unit.empty() ? "" : " of unit '" + inst.unit + "'") +
                     " (kernel #" +
                     std::to_string(&inst - plan.program.data()) + ")";
  for (uint32_t id : inst.ins)
    cuda::declareAccess(stream, address(plan, id), plan.buffers[id].size,
                        /*write=*/false, what.c_str());
  for (uint32_t id : inst.outs)
    cuda::declareAccess(stream, address(plan, id), plan.buffers[id].size,
                        /*write=*/true, what.c_str());
}

void CudaBackend::castKernel(const Plan &plan, const Instruction &inst) {
  const BufferDesc &from = plan.buffers[inst.ins[0]];
  const BufferDesc &to = plan.buffers[inst.outs[0]];
  void *out = address(plan, inst.outs[0]);
  const void *in = address(plan, inst.ins[0]);
  const cuda::Context ctx{compute, blas};
  if (from.dtype == to.dtype)
    check(cudaMemcpyAsync(out, in, to.size, cudaMemcpyDeviceToDevice, compute),
          "cudaMemcpyAsync (cast kernel)");
  else if (to.dtype == plan::DType::BF16)
    cuda::cast(ctx, static_cast<__nv_bfloat16 *>(out),
               static_cast<const float *>(in), to.numElements());
  else
    cuda::cast(ctx, static_cast<float *>(out),
               static_cast<const __nv_bfloat16 *>(in), to.numElements());
}

void CudaBackend::start(const Plan &plan,
                        const std::vector<const Instruction *> &group,
                        uint32_t stream) {
  // The collectives read what compute wrote before them: the comm stream
  // waits for everything issued on the compute stream so far.
  cudaEvent_t before = event(ready, stream);
  check(cudaEventRecord(before, compute), "cudaEventRecord");
  check(cudaStreamWaitEvent(streams[stream], before, 0), "cudaStreamWaitEvent");
  // Mixed-precision gathers round their shards into place first, so that
  // the group is NCCL calls alone.
  for (const Instruction *inst : group)
    castIntoSlot(plan, *inst, streams[stream]);
  // A bucket is one NCCL group: one fused launch.
  if (group.size() > 1 && ncclGroupStart() != ncclSuccess)
    fail("ncclGroupStart failed");
  // An all-to-all (never bucketed) reads its counts now, on its stream.
  for (const Instruction *inst : group)
    if (inst->kernel->opcode == plan::Opcode::AllToAll)
      exchange(plan, *inst, streams[stream]);
    else
      collective(plan, *inst, ncclFor(*inst, stream), streams[stream]);
  if (group.size() > 1 && ncclGroupEnd() != ncclSuccess)
    fail("ncclGroupEnd failed for a bucket of " + std::to_string(group.size()) +
         " collectives");
  // After the group: a kernel launched inside one would run before it.
  for (const Instruction *inst : group)
    if (inst->kernel->opcode != plan::Opcode::AllToAll)
      scaleExpertShard(plan, *inst, ncclFor(*inst, stream), streams[stream]);
  currentPlan = &plan;
  for (const Instruction *inst : group) {
    uint32_t token = plan::collectiveParams(inst->params.data()).tokenId();
    check(cudaEventRecord(event(done, token), streams[stream]),
          "cudaEventRecord");
    inFlight.push_back(
        {token, size_t(inst - plan.program.data()), currentStep});
  }
}

/// An all-to-all on `stream` (the compute stream in place, stream 4
/// started): its counts come to the host first (a synchronisation of
/// `stream`, which a started one's waits for the compute before it).
void CudaBackend::exchange(const Plan &plan, const Instruction &inst,
                           cudaStream_t stream) {
  std::string error;
  if (!expertHost ||
      !cuda::runAllToAll(plan, inst, arena, *expertHost, *expertNccl, stream,
                         allToAllMoved, error))
    fail(expertHost ? error : "an all-to-all without expert groups");
}

Backend::Span CudaBackend::wait(uint32_t token) {
  check(cudaStreamWaitEvent(compute, event(done, token), 0),
        "cudaStreamWaitEvent");
  return {}; // the device decides when; the host does not wait here
}

void CudaBackend::synchronize(const std::function<void(uint32_t)> &finished) {
  using Clock = std::chrono::steady_clock;
  auto begin = Clock::now();
  auto stuck = [&]() -> std::string {
    for (const InFlight &f : inFlight)
      if (cudaEventQuery(done[f.token]) == cudaErrorNotReady) {
        const Instruction &inst = currentPlan->program[f.instruction];
        return std::string(inst.kernel->name) +
               (inst.unit.empty() ? "" : " of unit '" + inst.unit + "'") +
               " started at step " + std::to_string(f.step) +
               " or the next (kernel #" + std::to_string(f.instruction) + ")";
      }
    return "a collective";
  };
  // Tells the caller of each collective whose done event has completed.
  auto report = [&] {
    if (!finished)
      return;
    for (InFlight &f : inFlight)
      if (!f.reported && cudaEventQuery(done[f.token]) == cudaSuccess) {
        f.reported = true;
        finished(f.token);
      }
  };
  for (int spins = 0;; ++spins) {
    report();
    cudaError_t state = cudaStreamQuery(compute);
    if (state == cudaSuccess)
      break;
    if (state != cudaErrorNotReady)
      fail("the step failed on the device: " + cudaText(state));
    for (auto &n : nccl)
      if (n && n->asyncError() != ncclSuccess &&
          n->asyncError() != ncclInProgress)
        fail("NCCL error in " + stuck() + ": " +
             ncclGetErrorString(n->asyncError()));
    // The flight recorder's watchdog sees the same collective unfinished
    // (Session keeps a device collective's record open until report()
    // says it finished) and ends the job first, naming the rank that lags;
    // this is the backstop where it cannot (one rank, no watchdog).
    double waited = std::chrono::duration<double>(Clock::now() - begin).count();
    if (timeout > 0 && waited > timeout + kWatchdogGrace) {
      char seconds[32];
      std::snprintf(seconds, sizeof(seconds), "%.1f", timeout);
      fail("collective timeout: " + stuck() + " did not finish within " +
           seconds +
           " s (nor within the watchdog's grace after it); "
           "another rank failed, stalled or runs a different plan");
    }
    // Spin briefly (a step's tail is short), then yield the core.
    if (spins > 1000)
      std::this_thread::sleep_for(std::chrono::microseconds(50));
  }
  report();
  inFlight.clear();
  meter.sample(/*setup=*/false, /*stepRan=*/currentPlan != nullptr);
}

uint64_t CudaBackend::measureHighWaterMark() {
  synchronize();
  uint64_t end = 0;
  check(cuda::lastTouchedByte(arena, arenaSize, kCanary, end),
        "cudaMemcpy (to the host)");
  return end;
}

void CudaBackend::run(const Plan &plan, const Instruction &inst,
                      const double *params, int64_t step) {
  if (timer.on) // the device stamps the events when it reaches them
    check(timer.begin(compute), "cudaEventRecord (kernel timing)");
  currentPlan = &plan;
  currentStep = step;
  const plan::Opcode opcode = inst.kernel->opcode;
  if (opcode != plan::Opcode::Wait)
    declareBuffers(plan, inst, compute);
  if (opcode == plan::Opcode::Cast) {
    castKernel(plan, inst);
  } else if (opcode == plan::Opcode::Copy) { // bytes, whatever the type
    check(cudaMemcpyAsync(address(plan, inst.outs[0]),
                          address(plan, inst.ins[0]),
                          plan.buffers[inst.outs[0]].size,
                          cudaMemcpyDeviceToDevice, compute),
          "cudaMemcpyAsync (copy kernel)");
  } else if (opcode == plan::Opcode::AllToAllCounts ||
             opcode == plan::Opcode::AllToAll) {
    exchange(plan, inst, compute); // in place, on the expert group
  } else if (!runComputeIn(plan, inst, params, step) &&
             opcode != plan::Opcode::Wait) { // the executor calls wait()
    // A collective the plan runs in place: on the compute stream.
    castIntoSlot(plan, inst, compute);
    collective(plan, inst, ncclFor(inst, 0), compute);
    scaleExpertShard(plan, inst, ncclFor(inst, 0), compute);
  }
  checkKernels(inst);
  if (timer.on)
    check(timer.end(compute, uint32_t(opcode)), "cudaEventRecord (timing)");
}

void CudaBackend::runOptimizer(const Plan &plan,
                               const std::vector<const Instruction *> &group,
                               const std::vector<const double *> &params,
                               int64_t step) {
  // One timed event for the group: the executor counts it as one.
  if (timer.on)
    check(timer.begin(compute), "cudaEventRecord (kernel timing)");
  currentPlan = &plan;
  currentStep = step;
  for (const Instruction *inst : group)
    declareBuffers(plan, *inst, compute);
  Kernels kernels{*this, {compute, blas, tf32}};
  auto inArena = [&](uint32_t id) { return address(plan, id); };
  runAdamWGroup(kernels, plan, group, params, inArena, step,
                int(plan::shardIndex(comm.rank(), plan.shardSize)),
                optimizerTensors);
  checkKernels(*group.front());
  if (timer.on)
    check(timer.end(compute, uint32_t(group.front()->kernel->opcode)),
          "cudaEventRecord (timing)");
}

Backend *createBackend(const CudaBackendOptions &options, std::string &error) {
  if (!options.comm) {
    error = "the CUDA backend needs a communicator";
    return nullptr;
  }
  // Every rank reaches NCCL's collective setup, also one without a GPU,
  // so that a missing device on one rank ends the job instead of hanging
  // the others in the bootstrap: the error is agreed on first.
  int count = 0;
  cudaError_t code = cudaGetDeviceCount(&count);
  // One process per GPU: the rank's index on its node picks it (on a
  // node whose launcher narrowed CUDA_VISIBLE_DEVICES to one GPU a rank,
  // count is 1 and every rank takes its only device).
  int local =
      options.localRank >= 0 ? options.localRank : options.comm->localRank();
  int device =
      options.device >= 0 ? options.device : (count > 0 ? local % count : 0);
  bool usable = code == cudaSuccess && count > 0 && device < count;
  if (!usable)
    error = code != cudaSuccess
                ? "no usable CUDA device (" + cudaText(code) + ")"
            : count == 0 ? std::string("no CUDA device")
                         : "device " + std::to_string(device) +
                               " does not exist (this node has " +
                               std::to_string(count) + ")";
  if (options.comm->allReduceMax(usable ? 0 : 1) != 0) {
    if (usable)
      error = "another rank has no usable CUDA device";
    return nullptr;
  }
  auto backend = std::make_unique<CudaBackend>(options, device);
  if (!backend->initialize(error))
    return nullptr;
  return backend.release();
}
} // namespace

} // namespace fsdp::rt

// The module's one entry point (Module.h). The functions behind it are in
// the anonymous namespace, not fsdp::rt::createCudaBackend: the executable
// exports its loader under that name, and a reference here would bind to it.
extern "C" const fsdp::rt::cuda::ModuleTable *fsdpCudaModule() {
  using namespace fsdp::rt;
  static const cuda::ModuleTable table = {cuda::kModuleVersion,
                                          sizeof(cuda::ModuleTable),
                                          sizeof(CudaBackendOptions),
                                          sizeof(Backend),
                                          createBackend,
                                          cuda::listDevices};
  return &table;
}
