//===- Device.h - the CUDA device listed and measured -----------*- C++ -*-===//
//
// What the CUDA backend asks of its device besides kernels and
// collectives: the devices' list (--list-devices), the arena's high-water
// mark, the memory in use after each stage of setup
// (Backend::DeviceMemory), and kernel times from timing events
// (Backend::takeKernelTimes: fsdp-run --profile, --trace).
//
//===----------------------------------------------------------------------===//

#ifndef FSDP_RUNTIME_CUDA_DEVICE_H
#define FSDP_RUNTIME_CUDA_DEVICE_H

#include "Nccl.h"
#include "fsdp/runtime/exec/Backend.h"

#include <cuda_runtime_api.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace fsdp::rt {
class Communicator;
namespace cuda {

/// "cudaErrorName: what it means".
inline std::string cudaText(cudaError_t code) {
  return std::string(cudaGetErrorName(code)) + ": " + cudaGetErrorString(code);
}

/// The CUDA devices this process sees, one line each, or why there are
/// none (listCudaDevices, Backend.h).
std::string listDevices();

/// One past the last byte of the `size` bytes at device address `bytes`
/// that is not `canary` (0: all are), into `end`: the arena's measured
/// high-water mark, read back from the end a chunk at a time.
cudaError_t lastTouchedByte(const unsigned char *bytes, uint64_t size,
                            unsigned char canary, uint64_t &end);

/// The device's memory in use: its total less its free bytes (our
/// allocations, the libraries' and anything else on the device).
class MemoryMeter {
public:
  /// Samples it as the figure after setup (`setup`) or after a step (the
  /// peak); the first sample after a step ran (`stepRan`) is also the
  /// "first step" stage.
  void sample(bool setup, bool stepRan = false);
  /// Samples it as the memory in use after setup stage `name` (and so far
  /// the figure after setup).
  void stage(std::string name);
  /// A new NCCL communicator over `host` (null with `error`), a stage of
  /// its own: "NCCL #n (`what`, k ranks)"; a one-rank group's is local
  /// (Nccl.h) and no stage.
  std::unique_ptr<Nccl> nccl(Communicator &host, const char *what,
                             std::string &error);
  const Backend::DeviceMemory &memory() const { return measured; }

private:
  Backend::DeviceMemory measured;
  int communicators = 0;
  bool firstStep = false;
};

/// Kernel timing on the device: a pair of timing events (created without
/// cudaEventDisableTiming) around each kernel on its stream, from a pool
/// that take() frees for reuse, so that a warm step creates none.
class KernelTimer {
public:
  ~KernelTimer();
  bool on = false; ///< Backend::setKernelTiming
  /// Records the event before a kernel on `stream`.
  cudaError_t begin(cudaStream_t stream);
  /// Records the event after it and keeps the pair, a kernel of kind
  /// `opcode`.
  cudaError_t end(cudaStream_t stream, uint32_t opcode);
  /// Backend::takeKernelTimes: each pair kept since the last take, in
  /// order; after the stream's synchronisation.
  cudaError_t take(const std::function<void(const Backend::KernelTime &)> &add);

private:
  cudaError_t next(cudaEvent_t &event);
  struct Timed {
    uint32_t opcode;
    cudaEvent_t begin, end;
  };
  std::vector<cudaEvent_t> pool;
  size_t used = 0;
  cudaEvent_t opened = nullptr; ///< begin()'s, until end()
  std::vector<Timed> timed;
};

} // namespace cuda
} // namespace fsdp::rt

#endif // FSDP_RUNTIME_CUDA_DEVICE_H
