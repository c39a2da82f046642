//===- HeapCounter.cpp - the malloc family, counted -----------------------===//
//
// Defines malloc, free, calloc, realloc and the aligned allocators in the
// executable, forwarding to glibc's own (__libc_*), so that every heap
// allocation of the process is counted: bytes live and their high-water
// mark (fsdp/runtime/support/HeapMeter.h). Sizes are malloc_usable_size's, the
// bytes glibc really reserved for the block, so a free subtracts exactly
// what its malloc added. Two relaxed atomics per call: no lock, no
// allocation, no reentry.
//
// Built into fsdp-run only, and not under AddressSanitizer, which replaces
// these functions itself (HeapMeterOff.cpp stands in there).
//
//===----------------------------------------------------------------------===//

#include "fsdp/runtime/support/HeapMeter.h"

#include <atomic>
#include <cerrno>
#include <csignal>
#include <cstddef>
#include <cstdlib>
#include <malloc.h>

extern "C" {
void *__libc_malloc(size_t);
void __libc_free(void *);
void *__libc_calloc(size_t, size_t);
void *__libc_realloc(void *, size_t);
void *__libc_memalign(size_t, size_t);
}

namespace {
std::atomic<uint64_t> gLive{0}, gPeak{0};
/// FSDP_HEAP_TRAP=BYTES: after setup (resetPeak), an allocation of at least
/// BYTES raises SIGTRAP, so that a debugger shows who allocates during
/// training. 0 (unset): never.
std::atomic<uint64_t> gTrapBytes{0};
std::atomic<bool> gTrapArmed{false};

void added(void *p) {
  if (!p)
    return;
  uint64_t size = malloc_usable_size(p);
  if (gTrapArmed.load(std::memory_order_relaxed) &&
      size >= gTrapBytes.load(std::memory_order_relaxed))
    raise(SIGTRAP);
  uint64_t live = gLive.fetch_add(size, std::memory_order_relaxed) + size;
  uint64_t peak = gPeak.load(std::memory_order_relaxed);
  while (live > peak &&
         !gPeak.compare_exchange_weak(peak, live, std::memory_order_relaxed))
    ;
}

void removed(void *p) {
  if (p)
    gLive.fetch_sub(malloc_usable_size(p), std::memory_order_relaxed);
}

bool powerOfTwo(size_t n) { return n && !(n & (n - 1)); }
} // namespace

extern "C" {
void *malloc(size_t size) {
  void *p = __libc_malloc(size);
  added(p);
  return p;
}

void free(void *p) {
  removed(p);
  __libc_free(p);
}

void *calloc(size_t count, size_t size) {
  void *p = __libc_calloc(count, size);
  added(p);
  return p;
}

void *realloc(void *old, size_t size) {
  // glibc's realloc may move or free the block: count the old block out
  // first, and back in if the call fails and leaves it as it was.
  size_t oldSize = old ? malloc_usable_size(old) : 0;
  gLive.fetch_sub(oldSize, std::memory_order_relaxed);
  void *p = __libc_realloc(old, size);
  if (p)
    added(p);
  else if (old && size != 0)
    gLive.fetch_add(oldSize, std::memory_order_relaxed);
  return p;
}

void *memalign(size_t alignment, size_t size) {
  void *p = __libc_memalign(alignment, size);
  added(p);
  return p;
}

void *aligned_alloc(size_t alignment, size_t size) {
  return memalign(alignment, size);
}

int posix_memalign(void **out, size_t alignment, size_t size) {
  if (!powerOfTwo(alignment) || alignment % sizeof(void *) != 0)
    return EINVAL;
  void *p = memalign(alignment, size);
  if (!p && size != 0)
    return ENOMEM;
  *out = p;
  return 0;
}

void *valloc(size_t size) { return memalign(4096, size); }
} // extern "C"

namespace fsdp::rt::heap {
bool counting() { return true; }
uint64_t liveBytes() { return gLive.load(std::memory_order_relaxed); }
uint64_t peakBytes() { return gPeak.load(std::memory_order_relaxed); }
void resetPeak() {
  gPeak.store(liveBytes(), std::memory_order_relaxed);
  if (const char *trap = std::getenv("FSDP_HEAP_TRAP")) {
    gTrapBytes.store(std::strtoull(trap, nullptr, 10));
    gTrapArmed.store(gTrapBytes.load() > 0);
  }
}
} // namespace fsdp::rt::heap
