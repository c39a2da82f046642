//===- Backend.h - what executes a plan's kernels ----------------*- C++
//-*-===//
//
// A backend owns the arena (allocated once, laid out by the compiler) and
// runs one kernel at a time on it. The CPU backend is the reference; the
// CUDA backend implements the same interface.
//
//===----------------------------------------------------------------------===//

#ifndef FSDP_RUNTIME_BACKEND_H
#define FSDP_RUNTIME_BACKEND_H

#include "fsdp/runtime/Plan.h"

#include <cstdint>
#include <memory>
#include <string>

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
  virtual void write(uint64_t offset, const void *data, uint64_t bytes) = 0;
  virtual void read(uint64_t offset, void *data, uint64_t bytes) = 0;
  /// Runs one kernel; `step` is the 1-based step number (AdamW's bias
  /// correction). `params` overrides the instruction's parameters.
  virtual void run(const Plan &plan, const Instruction &inst,
                   const double *params, int64_t step) = 0;
  /// Waits for all kernels issued so far.
  virtual void synchronize() {}
  /// One past the highest arena byte that differs from the canary.
  virtual uint64_t measureHighWaterMark() = 0;
};

class Communicator;

struct CpuBackendOptions {
  int threads = 0;               ///< 0: all cores
  std::string blas = "openblas"; ///< or "blis"
  Communicator *comm = nullptr;  ///< the ranks' collectives (required)
};

/// The CPU backend; on failure (no BLAS library) returns null with `error`.
std::unique_ptr<Backend> createCpuBackend(const CpuBackendOptions &options,
                                          std::string &error);

} // namespace fsdp::rt

#endif // FSDP_RUNTIME_BACKEND_H
