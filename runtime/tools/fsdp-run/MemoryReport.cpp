//===- MemoryReport.cpp - measured memory next to the prediction ----------===//

#include "MemoryReport.h"

#include "fsdp/runtime/comm/Communicator.h"
#include "fsdp/runtime/comm/FlightRecorder.h"
#include "fsdp/runtime/plan/Plan.h"
#include "fsdp/runtime/support/HeapMeter.h"

#include <cstdio>

namespace fsdprun {
namespace {
/// The heap live after each setup phase (--heap-breakdown): a fixed table,
/// so that keeping it allocates nothing.
struct HeapMarks {
  static constexpr int kMax = 8;
  const char *phase[kMax] = {};
  uint64_t live[kMax] = {};
  int count = 0;
  void mark(const char *name) {
    if (count < kMax) {
      phase[count] = name;
      live[count++] = heap::liveBytes();
    }
  }
};
HeapMarks gHeapMarks;

/// Rank 0's device memory after each setup stage (DeviceMemory::stages):
/// the first stage's in use, each later one's growth.
void printDeviceStages(const Backend::DeviceMemory &d) {
  if (d.stages.empty())
    return;
  std::string line;
  char text[64];
  for (size_t i = 0; i < d.stages.size(); ++i) {
    const Backend::DeviceMemory::Stage &stage = d.stages[i];
    double mib = double(stage.used) / (1 << 20);
    if (i > 0)
      mib -= double(d.stages[i - 1].used) / (1 << 20);
    std::snprintf(text, sizeof(text), i ? " %+.1f MiB" : " %.1f MiB", mib);
    line += (i ? ", " : "") + stage.name + text;
  }
  std::printf("summary: device memory by setup stage (rank 0, the device's "
              "total less its free bytes): %s; %.1f MiB in all\n",
              line.c_str(), double(d.stages.back().used) / (1 << 20));
}

/// On a device: its memory in use next to the compiler's prediction, the
/// arena plus the libraries' share outside it.
void printDevice(const Plan &plan, const HeapFigures &h, int ranks) {
  const Backend::DeviceMemory &d = h.device;
  if (!d.measured) {
    std::printf("summary: outside the arena per rank on the device: %s "
                "predicted by the compiler (device memory not measured)\n",
                bytes(plan.outsideArenaCuda).c_str());
    return;
  }
  std::printf("summary: device memory per rank (max over %d ranks, the "
              "device's total less its free bytes): %s after setup, %s at "
              "most after a step, of %s\n",
              ranks, bytes(d.afterSetup).c_str(), bytes(d.peak).c_str(),
              bytes(d.total).c_str());
  printDeviceStages(d);
  std::printf("summary: predicted by the compiler: arena %s + outside it %s "
              "= %s\n",
              bytes(plan.arenaSize).c_str(),
              bytes(plan.outsideArenaCuda).c_str(),
              bytes(plan.arenaSize + plan.outsideArenaCuda).c_str());
}

/// The heap line of the summary: how far the process's heap rose above
/// the arena the compiler planned (docs/memory.md explains the rest).
/// The resident set: everything the process holds in memory, mapped or
/// allocated, code included.
/// On the CPU, the compiler's prediction of it at this run's threads.
void printResident(const Plan &plan, const Options &o, const HeapFigures &h,
                   int ranks) {
  if (!h.rss.measured)
    return;
  std::printf(
      "summary: resident memory per rank (max over %d ranks): %s "
      "after setup, peak %s %s (the arena, the heap, the BLAS's "
      "mapped buffers, stacks and code)\n",
      ranks, bytes(h.rssAfterSetup.now).c_str(), bytes(h.rss.peak).c_str(),
      h.rssPeakRestarted ? "while training" : "since the process started");
  if (o.backend == "cpu")
    std::printf("summary: resident memory predicted %s: %s at "
                "%d BLAS threads (an estimate: the arena, the heap beyond "
                "it, %s of code and stacks, %s of BLAS panels per thread)\n",
                h.beyondPlan.reason.empty() ? "by the compiler" : "at setup",
                bytes(h.predictedResident(plan, runThreads(o))).c_str(),
                runThreads(o), bytes(plan.outsideArenaCpuMapped).c_str(),
                bytes(plan.blasBytesPerThread).c_str());
}

} // namespace

std::string bytes(uint64_t b) {
  char text[64];
  std::snprintf(text, sizeof(text), "%llu bytes (%.1f MiB)",
                (unsigned long long)b, double(b) / (1 << 20));
  return text;
}

void markHeap(const char *phase) { gHeapMarks.mark(phase); }

void printHeapBreakdown() {
  uint64_t before = 0;
  for (int i = 0; i < gHeapMarks.count; ++i) {
    uint64_t live = gHeapMarks.live[i];
    std::printf("heap: %-34s +%12lld bytes, %12llu live\n", gHeapMarks.phase[i],
                (long long)(live - before), (unsigned long long)live);
    before = live;
  }
}

HeapFigures setupHeapFigures() {
  HeapFigures figures;
  figures.rssAfterSetup = residentMemory();
  figures.rssPeakRestarted = resetResidentPeak();
  figures.afterSetup = heap::liveBytes();
  heap::resetPeak();
  return figures;
}

HeapFigures measureHeap(Communicator &comm, const Backend &backend,
                        const HeapFigures &setup) {
  RecordScope scope(CollectiveLabel{0, -1, "heap all-reduce"});
  HeapFigures heap = setup;
  // The heap's peak first: reading /proc allocates (a FILE).
  uint64_t heapPeak = heap::peakBytes();
  heap.rss = residentMemory();
  heap.rssAfterSetup.now = comm.allReduceMax(heap.rssAfterSetup.now);
  heap.rss.peak = comm.allReduceMax(heap.rss.peak);
  heap.counted = heap::counting();
  heap.afterSetup = comm.allReduceMax(heap.afterSetup);
  heap.peak = comm.allReduceMax(heapPeak);
  heap.device = backend.deviceMemory();
  heap.beyondPlan = backend.hostBeyondPlan();
  heap.device.afterSetup = comm.allReduceMax(heap.device.afterSetup);
  heap.device.peak = comm.allReduceMax(heap.device.peak);
  return heap;
}

void printHeap(const Plan &plan, const Options &o, const HeapFigures &h,
               int ranks) {
  printResident(plan, o, h, ranks);
  if (!h.counted) {
    std::printf("summary: heap not counted (this build replaces malloc: "
                "sanitizers)\n");
    return;
  }
  uint64_t above = h.peak > plan.arenaSize ? h.peak - plan.arenaSize : 0;
  std::printf("summary: heap per rank (max over %d ranks): %s after setup, "
              "peak %s while training, %s above the arena (%.2f%% of it)\n",
              ranks, bytes(h.afterSetup).c_str(), bytes(h.peak).c_str(),
              bytes(above).c_str(),
              plan.arenaSize ? 100.0 * double(above) / double(plan.arenaSize)
                             : 0.0);
  // The compiler's prediction of the same (the memory report's "outside
  // the arena" lines); on CUDA the arena and that share are device memory.
  if (o.backend == "cpu" && !h.beyondPlan.reason.empty())
    std::printf("summary: outside the arena per rank: %s measured, %s "
                "predicted at setup (the compiler's %s; %s)\n",
                bytes(above).c_str(), bytes(h.outsideArenaCpu(plan)).c_str(),
                bytes(plan.outsideArenaCpu).c_str(),
                h.beyondPlan.reason.c_str());
  else if (o.backend == "cpu")
    std::printf("summary: outside the arena per rank: %s measured, %s "
                "predicted by the compiler\n",
                bytes(above).c_str(), bytes(plan.outsideArenaCpu).c_str());
  else
    printDevice(plan, h, ranks);
}

uint64_t memoryInUse(const Backend &backend) {
  Backend::DeviceMemory device = backend.deviceMemory();
  return device.measured ? device.peak : residentBytesNow();
}

} // namespace fsdprun
