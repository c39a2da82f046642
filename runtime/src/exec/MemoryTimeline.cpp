//===- MemoryTimeline.cpp - live arena bytes at each kernel ---------------===//
//
// The same sweep as the compiler's planner (lib/Dialect/Runtime/Transforms/
// PlanMemory.cpp, findPeak), over the plan's buffer table: a view's touches
// keep its base alive, and a buffer counts its own bytes, unaligned.
//
//===----------------------------------------------------------------------===//

#include "fsdp/runtime/exec/MemoryTimeline.h"

namespace fsdp::rt {

std::vector<LiveBytes> liveBytesByInstruction(const Plan &plan) {
  size_t end = plan.program.size();
  std::vector<int64_t> first(plan.buffers.size(), -1),
      last(plan.buffers.size(), -1);
  auto touch = [&](uint32_t id, int64_t at) {
    int32_t base = plan.buffers[id].base;
    size_t root = base >= 0 ? size_t(base) : id;
    if (first[root] < 0)
      first[root] = at;
    last[root] = at;
  };
  for (size_t i = 0; i < end; ++i) {
    for (uint32_t id : plan.program[i].ins)
      touch(id, int64_t(i));
    for (uint32_t id : plan.program[i].outs)
      touch(id, int64_t(i));
  }
  // Signed deltas of each kind at each instruction, then running sums.
  std::vector<std::array<int64_t, plan::kNumBufferKinds>> delta(end + 1);
  for (size_t id = 0; id < plan.buffers.size() && end > 0; ++id) {
    const BufferDesc &b = plan.buffers[id];
    if (b.base >= 0)
      continue; // counted in its base
    int64_t from = first[id], to = last[id];
    if (plan::isPersistent(b.kind)) {
      from = 0;
      to = int64_t(end) - 1;
    } else if (id == plan.lossBuffer) {
      to = int64_t(end) - 1; // returned: alive to the end
    }
    if (from < 0)
      continue; // no kernel uses it
    delta[from][uint32_t(b.kind)] += int64_t(b.size);
    delta[to + 1][uint32_t(b.kind)] -= int64_t(b.size);
  }
  std::vector<LiveBytes> live(end);
  std::array<int64_t, plan::kNumBufferKinds> running{};
  for (size_t i = 0; i < end; ++i)
    for (uint32_t k = 0; k < plan::kNumBufferKinds; ++k) {
      running[k] += delta[i][k];
      live[i].byKind[k] = uint64_t(running[k]);
    }
  return live;
}

} // namespace fsdp::rt
