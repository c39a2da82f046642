//===- ProcessMemory.h - the process's resident memory ----------*- C++ -*-===//
//
// What the heap counter cannot see: memory a library maps itself (the
// BLAS's per-thread GEMM buffers), thread stacks, the libraries' code.
// Linux reports the resident set and its high-water mark in
// /proc/self/status (VmRSS, VmHWM); writing 5 to /proc/self/clear_refs
// restarts the high-water mark, so that the peak while training can be
// told from the setup's.
//
//===----------------------------------------------------------------------===//

#ifndef FSDP_RUNTIME_PROCESSMEMORY_H
#define FSDP_RUNTIME_PROCESSMEMORY_H

#include <cstdint>

namespace fsdp::rt {

struct ResidentMemory {
  bool measured = false;
  uint64_t now = 0, peak = 0;
};

/// VmRSS and VmHWM of this process, in bytes; measured = false where
/// /proc/self/status cannot be read.
ResidentMemory residentMemory();

/// The resident set now, in bytes, from /proc/self/statm, read without
/// allocating (a progress line may call it inside the training loop); 0
/// where it cannot be read.
uint64_t residentBytesNow();

/// Restarts the resident high-water mark at the current resident size;
/// false where the kernel does not allow it (the peak then counts from
/// the process's start).
bool resetResidentPeak();

} // namespace fsdp::rt

#endif // FSDP_RUNTIME_PROCESSMEMORY_H
