//===- EmuDeviceTest.cpp - the emulated device and NCCL, checked on their own
//===//
//
// The emulator under the CUDA backend (emu_streams.cpp, emu_races.cpp,
// emu_nccl.cpp) checked without the backend, one scenario per argument:
//
//   fsdp-cuda-emu-device-test streams   ordered streams and events, memory
//   fsdp-cuda-emu-device-test race-raw  a read not ordered after a write
//   fsdp-cuda-emu-device-test race-war  a write while another stream reads
//   fsdp-cuda-emu-device-test bounds    a memset past its allocation
//   fsdp-cuda-emu-device-test nccl      (under mpirun -np 3) the collectives,
//                                       their ring order in bf16, send/recv
//   fsdp-cuda-emu-device-test disagree  (under mpirun) ranks passing
//                                       different counts
//
// Prints "ok: SCENARIO" and exits 0 when the emulator behaves, else names
// what differs and exits 1; the fault scenarios print the emulator's report
// (for FileCheck) and exit 0 when the device faulted as it must.
//
//===----------------------------------------------------------------------===//
#include "emu_runtime.h"
#include "nccl.h"

#include <mpi.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

namespace {
int failures = 0;

void expect(bool ok, const std::string &what) {
  if (!ok) {
    std::fprintf(stderr, "FAIL: %s\n", what.c_str());
    ++failures;
  }
}

float bf16(float x) { return __bfloat162float(__float2bfloat16_rn(x)); }

/// Timing events (cudaEventElapsedTime, the backend's --profile): stamped
/// when the stream runs them; events without timing, or never recorded,
/// are refused as CUDA refuses them.
void timing() {
  const size_t bytes = size_t(64) << 20;
  void *a = nullptr;
  expect(cudaMalloc(&a, bytes) == cudaSuccess, "cudaMalloc");
  cudaStream_t s;
  cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
  cudaEvent_t begin, end, untimed;
  cudaEventCreate(&begin);
  cudaEventCreate(&end);
  cudaEventCreateWithFlags(&untimed, cudaEventDisableTiming);
  float ms = -1.0f;
  expect(cudaEventElapsedTime(&ms, begin, end) ==
             cudaErrorInvalidResourceHandle,
         "events never recorded have no time");
  cudaEventRecord(begin, s);
  cudaMemsetAsync(a, 1, bytes, s);
  cudaEventRecord(end, s);
  cudaEventRecord(untimed, s);
  cudaError_t early = cudaEventElapsedTime(&ms, begin, end);
  expect(early == cudaSuccess || early == cudaErrorNotReady,
         "a timing event not yet reached is not ready");
  expect(cudaStreamSynchronize(s) == cudaSuccess, "no fault");
  expect(cudaEventElapsedTime(&ms, begin, end) == cudaSuccess && ms > 0.0f,
         "the memset between two timing events took time");
  expect(cudaEventElapsedTime(&ms, begin, untimed) ==
             cudaErrorInvalidResourceHandle,
         "an event created with cudaEventDisableTiming has no time");
  for (cudaEvent_t e : {begin, end, untimed})
    cudaEventDestroy(e);
  cudaStreamDestroy(s);
  cudaFree(a);
}

/// Two streams, an event between them: the copy on the second sees the
/// first's memset; memory accounting follows cudaMalloc and cudaFree;
/// then timing events.
void streams() {
  size_t free0 = 0, total = 0;
  cudaMemGetInfo(&free0, &total);
  void *a = nullptr, *b = nullptr;
  expect(cudaMalloc(&a, 4096) == cudaSuccess, "cudaMalloc");
  expect(cudaMalloc(&b, 4096) == cudaSuccess, "cudaMalloc");
  size_t free1 = 0;
  cudaMemGetInfo(&free1, &total);
  expect(free0 - free1 == 8192, "cudaMemGetInfo counts the allocations");
  cudaStream_t s1, s2;
  cudaStreamCreateWithFlags(&s1, cudaStreamNonBlocking);
  cudaStreamCreateWithFlags(&s2, cudaStreamNonBlocking);
  cudaEvent_t e;
  cudaEventCreateWithFlags(&e, cudaEventDisableTiming);
  cudaMemsetAsync(a, 7, 4096, s1);
  cudaEventRecord(e, s1);
  cudaStreamWaitEvent(s2, e, 0);
  cudaMemcpyAsync(b, a, 4096, cudaMemcpyDeviceToDevice, s2);
  expect(cudaStreamSynchronize(s2) == cudaSuccess, "no fault");
  std::vector<unsigned char> host(4096);
  cudaMemcpy(host.data(), b, 4096, cudaMemcpyDeviceToHost);
  expect(host[0] == 7 && host[4095] == 7, "the copy saw the memset");
  expect(cudaEventQuery(e) == cudaSuccess, "the event completed");
  void *huge = nullptr;
  expect(cudaMalloc(&huge, total) == cudaErrorMemoryAllocation,
         "an allocation over the device's size fails");
  cudaFree(a);
  cudaFree(b);
  size_t free2 = 0;
  cudaMemGetInfo(&free2, &total);
  expect(free2 == free0, "cudaFree returns the memory");
  timing();
}

/// Each fault scenario: the device must fault with the sticky error.
void fault(const char *scenario) {
  void *a = nullptr;
  cudaMalloc(&a, 4096);
  cudaStream_t s1, s2;
  cudaStreamCreateWithFlags(&s1, cudaStreamNonBlocking);
  cudaStreamCreateWithFlags(&s2, cudaStreamNonBlocking);
  std::vector<unsigned char> host(4096);
  std::string name = scenario;
  if (name == "race-raw") { // written on s1, read on s2 with no wait
    cudaMemsetAsync(a, 1, 4096, s1);
    cudaMemcpyAsync(host.data(), a, 4096, cudaMemcpyDeviceToHost, s2);
  } else if (name == "race-war") { // read on s1, overwritten on s2
    cudaMemcpyAsync(host.data(), a, 4096, cudaMemcpyDeviceToHost, s1);
    cudaMemsetAsync(static_cast<char *>(a) + 1024, 0, 16, s2);
  } else { // bounds
    cudaMemsetAsync(a, 0, 4097, s1);
  }
  cudaDeviceSynchronize();
  cudaError_t e = cudaStreamQuery(s1);
  expect(e != cudaSuccess, std::string(scenario) + ": the device faulted");
  std::printf("%s: %s: %s\n", scenario, cudaGetErrorName(e),
              cudaGetErrorString(e));
}

/// One rank's communicator, stream and device buffer.
struct Setup {
  int rank, size;
  ncclComm_t comm;
  cudaStream_t s;
  float *f;         ///< the buffer as floats
  __nv_bfloat16 *h; ///< the same as bf16
};

/// Sums and averages, and NCCL's ring order in bf16.
void ncclReductions(const Setup &c) {
  const int rank = c.rank, size = c.size;
  ncclComm_t comm = c.comm;
  cudaStream_t s = c.s;
  float *f = c.f;
  __nv_bfloat16 *h = c.h;
  // All-reduce (sum, f32): every rank the same sum.
  std::vector<float> x(6);
  for (int i = 0; i < 6; ++i)
    x[size_t(i)] = float(rank + 1) * float(i + 1);
  cudaMemcpy(f, x.data(), 24, cudaMemcpyHostToDevice);
  ncclAllReduce(f, f + 16, 6, ncclFloat32, ncclSum, comm, s);
  cudaStreamSynchronize(s);
  std::vector<float> y(6);
  cudaMemcpy(y.data(), f + 16, 24, cudaMemcpyDeviceToHost);
  for (int i = 0; i < 6; ++i)
    expect(y[size_t(i)] == float(size * (size + 1) / 2 * (i + 1)),
           "all-reduce sum element " + std::to_string(i));

  // Reduce-scatter in bf16: rank r contributes x_r to every chunk, with
  // x_0 = 1, x_1 = x_2 = 2^-8. The chunk of rank r is summed around the
  // ring from r+1 to r, each hop rounded to bf16: rank 0's is
  // (2^-8 + 2^-8) + 1 = 1 + 2^-7; rank 1's (2^-8 + 1) + 2^-8, whose first
  // hop rounds to 1 (a tie, to even), so 1; rank 2's likewise 1.
  const float mine = rank == 0 ? 1.0f : std::ldexp(1.0f, -8);
  std::vector<__nv_bfloat16> in(3, __float2bfloat16_rn(mine));
  cudaMemcpy(h, in.data(), 6, cudaMemcpyHostToDevice);
  ncclReduceScatter(h, h + 64, 1, ncclBfloat16, ncclSum, comm, s);
  cudaStreamSynchronize(s);
  __nv_bfloat16 got;
  cudaMemcpy(&got, h + 64, 2, cudaMemcpyDeviceToHost);
  const float want = rank == 0 ? 1.0f + std::ldexp(1.0f, -7) : 1.0f;
  expect(__bfloat162float(got) == want,
         "bf16 reduce-scatter in ring order: rank " + std::to_string(rank) +
             " got " + std::to_string(__bfloat162float(got)) + ", want " +
             std::to_string(want));

  // ncclAvg pre-multiplies (f32): (r+1)/3 summed.
  float v = float(rank + 1);
  cudaMemcpy(f, &v, 4, cudaMemcpyHostToDevice);
  ncclAllReduce(f, f, 1, ncclFloat32, ncclAvg, comm, s);
  cudaStreamSynchronize(s);
  cudaMemcpy(&v, f, 4, cudaMemcpyDeviceToHost);
  float third = 1.0f / 3.0f;
  float ring0 = (2 * third + 3 * third) + 1 * third; // chunk 0 ends at rank 0
  expect(v == ring0, "all-reduce avg pre-multiplied");
}

/// Gathers, grouped broadcasts, and send/recv around the ring.
void ncclMovement(const Setup &c) {
  const int rank = c.rank, size = c.size;
  ncclComm_t comm = c.comm;
  cudaStream_t s = c.s;
  float *f = c.f;

  // All-gather in place, then a group of broadcasts (uneven layout).
  float slot = float(10 + rank);
  cudaMemcpy(f + rank, &slot, 4, cudaMemcpyHostToDevice);
  ncclAllGather(f + rank, f, 1, ncclFloat32, comm, s);
  ncclGroupStart();
  for (int r = 0; r < size; ++r)
    ncclBroadcast(r == rank ? f + r : nullptr, f + 8 + r, 1, ncclFloat32, r,
                  comm, s);
  ncclGroupEnd();
  cudaStreamSynchronize(s);
  std::vector<float> all(11);
  cudaMemcpy(all.data(), f, 44, cudaMemcpyDeviceToHost);
  for (int r = 0; r < size; ++r) {
    expect(all[size_t(r)] == float(10 + r), "in-place all-gather");
    expect(all[size_t(8 + r)] == float(10 + r), "grouped broadcasts");
  }

  // Send/recv in a group: each rank to the next around the ring.
  float out = float(100 + rank), back = -1;
  cudaMemcpy(f, &out, 4, cudaMemcpyHostToDevice);
  ncclGroupStart();
  ncclSend(f, 1, ncclFloat32, (rank + 1) % size, comm, s);
  ncclRecv(f + 1, 1, ncclFloat32, (rank + size - 1) % size, comm, s);
  ncclGroupEnd();
  cudaStreamSynchronize(s);
  cudaMemcpy(&back, f + 1, 4, cudaMemcpyDeviceToHost);
  expect(back == float(100 + (rank + size - 1) % size), "send/recv ring");
}

/// A communicator over the job's ranks, a stream and 64 KiB of device
/// memory.
Setup setUp(int rank, int size) {
  ncclUniqueId id;
  if (rank == 0)
    ncclGetUniqueId(&id);
  MPI_Bcast(&id, sizeof(id), MPI_BYTE, 0, MPI_COMM_WORLD);
  ncclComm_t comm;
  expect(ncclCommInitRank(&comm, size, id, rank) == ncclSuccess,
         "ncclCommInitRank");
  cudaStream_t s;
  cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
  void *d = nullptr;
  cudaMalloc(&d, 1 << 16);
  return {rank,
          size,
          comm,
          s,
          static_cast<float *>(d),
          static_cast<__nv_bfloat16 *>(d)};
}

/// The collectives at 3 ranks, their results and NCCL's ring order.
void nccl(int rank, int size) {
  const Setup setup = setUp(rank, size);
  ncclComm_t comm = setup.comm;
  cudaStream_t s = setup.s;
  ncclReductions(setup);
  ncclMovement(setup);
  ncclResult_t state;
  ncclCommGetAsyncError(comm, &state);
  expect(state == ncclSuccess, "no asynchronous error");
  expect(cudaStreamQuery(s) == cudaSuccess, "no fault");
  ncclCommDestroy(comm);
}

/// Rank 1 passes another count: every rank's device faults, naming it.
void disagree(int rank, int size) {
  const Setup setup = setUp(rank, size);
  cudaStream_t s = setup.s;
  ncclAllGather(setup.f, setup.f + 64, rank == 1 ? 3 : 4, ncclFloat32,
                setup.comm, s);
  cudaStreamSynchronize(s);
  cudaError_t e = cudaStreamQuery(s);
  expect(e != cudaSuccess, "a disagreement faults the device");
  if (rank == 0)
    std::printf("disagree: %s\n", cudaGetErrorString(e));
}
} // namespace

int main(int argc, char **argv) {
  std::string scenario = argc > 1 ? argv[1] : "";
  if (scenario == "streams")
    streams();
  else if (scenario == "race-raw" || scenario == "race-war" ||
           scenario == "bounds")
    fault(argv[1]);
  else if (scenario == "nccl" || scenario == "disagree") {
    int provided = 0, rank = 0, size = 1;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (scenario == "nccl")
      nccl(rank, size);
    else
      disagree(rank, size);
    MPI_Finalize();
  } else {
    std::fprintf(stderr,
                 "usage: %s streams|race-raw|race-war|bounds|nccl|"
                 "disagree\n",
                 argv[0]);
    return 2;
  }
  if (failures)
    return 1;
  std::printf("ok: %s\n", scenario.c_str());
  return 0;
}
