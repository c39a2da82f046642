//===- ScheduleAllToAll.h - the started exchanges ---------------*- C++ -*-===//
//
// The part of --fsdp-schedule that starts expert parallelism's row
// all-to-alls on their stream and gives them compute to overlap.
//
//===----------------------------------------------------------------------===//

#ifndef FSDP_LIB_TRANSFORMS_SCHEDULEALLTOALL_H
#define FSDP_LIB_TRANSFORMS_SCHEDULEALLTOALL_H

#include "mlir/IR/Block.h"

#include <cstdint>

namespace mlir::fsdp {

/// Every fsdp.all_to_all of the step's `block` becomes an
/// fsdp.all_to_all_start on `stream`, waited for right before the first op
/// that reads what it received.
void startAllToAlls(Block &block, int64_t stream);

/// Gives each started all-to-all the compute that does not depend on it:
/// the region that made its rows is split so that what the exchange does
/// not need runs after the start, and the region that reads what it
/// received so that what does not read it runs before the wait.
void overlapAllToAlls(Block &block);

} // namespace mlir::fsdp

#endif // FSDP_LIB_TRANSFORMS_SCHEDULEALLTOALL_H
