//===- emu_streams.h - the emulated device's queues, for emu.cpp and NCCL -*-
// C++ -*-===//
//
// The internal interface of emu_streams.cpp: enqueue an operation on a
// stream (run at once on the legacy default stream, nullptr), with the
// device bytes it reads and writes for the race checker, and raise the
// device's sticky error.
//
//===----------------------------------------------------------------------===//
#ifndef CUEMU_EMU_STREAMS_H
#define CUEMU_EMU_STREAMS_H

#include "emu_runtime.h"

#include <functional>
#include <string>
#include <vector>

namespace emu {

struct Access {
  const void *p;
  size_t bytes;
  bool write;
};

/// Runs `work` on `stream` after everything enqueued there before (now, on
/// the calling thread, for the legacy default stream nullptr), after the
/// race checker has seen `accesses` (named `what`). Returns the sticky
/// error (and enqueues nothing) once the device has faulted.
cudaError_t enqueue(cudaStream_t stream, const std::string &what,
                    const std::vector<Access> &accesses,
                    std::function<void()> work);

/// The device faults: every later runtime call returns `code`, and
/// cudaGetErrorString(code) says `message` (the first fault wins).
void fault(cudaError_t code, const std::string &message);
/// The fault so far, or cudaSuccess.
cudaError_t stickyError();

/// Whether the device problems emu::note reports (deadlocks, bad shuffles)
/// fault the device (the backend module) or are only counted (the kernel
/// tests, which count them). cudaSetDevice turns it on.
extern bool gProblemsFault;

/// Blocks until `stream` has run everything enqueued on it so far.
void drain(cudaStream_t stream);

/// The stream a cuBLAS handle's calls run on (cublasSetStream; the legacy
/// default stream for a null handle, as the kernel tests pass).
cudaStream_t blasStream(cublasHandle_t handle);

} // namespace emu

#endif
