//===- HeapMeterOff.cpp - no heap counter (sanitizer builds) --------------===//
//
// AddressSanitizer replaces the malloc family itself, so HeapCounter.cpp
// cannot be linked next to it; fsdp-run then reports the heap as not
// counted.
//
//===----------------------------------------------------------------------===//

#include "fsdp/runtime/support/HeapMeter.h"

namespace fsdp::rt::heap {
bool counting() { return false; }
uint64_t liveBytes() { return 0; }
uint64_t peakBytes() { return 0; }
void resetPeak() {}
} // namespace fsdp::rt::heap
