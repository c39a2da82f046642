//===- HeapMeter.h - the process's heap, counted ----------------*- C++ -*-===//
//
// What a rank allocates outside the arena the compiler plans: fsdp-run
// compares the heap's high-water mark during training with the arena's, so
// that "every byte predicted" is measured, not assumed. The counter is the
// malloc family itself (runtime/src/support/HeapCounter.cpp, linked into
// fsdp-run only): every malloc, calloc, realloc, aligned allocation and free of
// the process, ours, MPI's and the C++ library's, passes through it, counted by
// malloc_usable_size, with atomics. Memory a library maps itself (the BLAS's
// per-thread buffers are mmap'ed by OpenBLAS) is not heap; see docs/memory.md
// for what each figure includes.
//
//===----------------------------------------------------------------------===//

#ifndef FSDP_RUNTIME_HEAPMETER_H
#define FSDP_RUNTIME_HEAPMETER_H

#include <cstdint>

namespace fsdp::rt::heap {

/// True when this process's allocations are counted. A sanitizer build
/// replaces malloc itself, so there the counter is not linked and every
/// figure below is 0.
bool counting();
/// Bytes allocated and not yet freed.
uint64_t liveBytes();
/// The most bytes live at once since the last resetPeak().
uint64_t peakBytes();
/// Starts a new high-water mark at the bytes live now (after setup).
void resetPeak();

} // namespace fsdp::rt::heap

#endif // FSDP_RUNTIME_HEAPMETER_H
