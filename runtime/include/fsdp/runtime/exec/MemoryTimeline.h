//===- MemoryTimeline.h - live arena bytes at each kernel -------*- C++ -*-===//
//
// What the arena holds while each kernel of the step program runs, by
// buffer kind, found from the plan alone the way the compiler's memory
// planner found it (--fsdp-plan-memory): persistent kinds (inputs,
// parameter shards, AdamW moments) throughout, every other buffer from the
// first to the last kernel that touches it or a view of it, the loss to
// the end. The measured trace draws it as counter tracks at the kernels'
// measured start times, so its maximum is the plan's peak by construction
// and the time axis is the run's.
//
//===----------------------------------------------------------------------===//

#ifndef FSDP_RUNTIME_MEMORYTIMELINE_H
#define FSDP_RUNTIME_MEMORYTIMELINE_H

#include "fsdp/runtime/plan/Plan.h"

#include <array>
#include <cstdint>
#include <vector>

namespace fsdp::rt {

/// Live arena bytes by buffer kind (plan::BufferKind order).
using LiveBytes = plan::LiveBytesByKind<uint64_t>;

/// The live bytes while each instruction of `plan.program` runs.
std::vector<LiveBytes> liveBytesByInstruction(const Plan &plan);

} // namespace fsdp::rt

#endif // FSDP_RUNTIME_MEMORYTIMELINE_H
