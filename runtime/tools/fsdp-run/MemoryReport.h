//===- MemoryReport.h - measured memory next to the prediction --*- C++ -*-===//
//
// The summary's memory lines: the arena's, the heap's, the resident set's
// and the device's figures as measured (max over ranks), each next to
// what the compiler predicted (docs/memory.md), and --heap-breakdown's
// table of the heap each setup phase added.
//
//===----------------------------------------------------------------------===//

#ifndef FSDP_RUN_MEMORYREPORT_H
#define FSDP_RUN_MEMORYREPORT_H

#include "Options.h"

#include "fsdp/runtime/exec/Backend.h"
#include "fsdp/runtime/support/ProcessMemory.h"

#include <cstdint>
#include <string>

namespace fsdp::rt {
class Communicator;
struct Plan;
} // namespace fsdp::rt

namespace fsdprun {

/// "N bytes (X MiB)".
std::string bytes(uint64_t b);

/// Records the heap live after setup phase `phase` (--heap-breakdown);
/// allocates nothing.
void markHeap(const char *phase);

/// Rank 0's setup phases by the heap each added (docs/memory.md).
void printHeapBreakdown();

/// The heap while training, max over ranks: live after setup (the arena
/// included) and the high-water mark since.
struct HeapFigures {
  bool counted = false;
  uint64_t afterSetup = 0, peak = 0;
  /// The backend's device memory, each figure the max over ranks.
  Backend::DeviceMemory device;
  /// The resident set after setup and its peak while training (since the
  /// process started where the peak could not be restarted).
  ResidentMemory rssAfterSetup, rss;
  bool rssPeakRestarted = false;
  /// The host memory outside the arena this run's backend holds beyond
  /// the compiler's figure, and why (Backend::hostBytesBeyondPlan): the
  /// prediction the measured figures are held to is the sum.
  Backend::HostBeyondPlan beyondPlan;
  uint64_t outsideArenaCpu(const Plan &plan) const {
    return uint64_t(int64_t(plan.outsideArenaCpu) + beyondPlan.heap);
  }
  uint64_t predictedResident(const Plan &plan, int threads) const {
    return uint64_t(int64_t(plan.predictedResident(threads)) + beyondPlan.heap +
                    int64_t(beyondPlan.mapped));
  }
};

/// This rank's figures once setup is over; restarts the heap's and the
/// resident set's peaks, so that what they gain later is what a step
/// allocates.
HeapFigures setupHeapFigures();

/// Every rank's heap and device figures reduced to their maxima (a
/// collective); `setup` holds this rank's figures from after setup.
HeapFigures measureHeap(Communicator &comm, const Backend &backend,
                        const HeapFigures &setup);

/// The summary's memory lines after the arena's: resident set, heap and,
/// on a device, its memory, each next to the compiler's prediction.
void printHeap(const Plan &plan, const Options &o, const HeapFigures &h,
               int ranks);

/// The memory a progress line shows: the device's in use where the
/// backend measures it, else this process's resident set.
uint64_t memoryInUse(const Backend &backend);

} // namespace fsdprun

#endif // FSDP_RUN_MEMORYREPORT_H
