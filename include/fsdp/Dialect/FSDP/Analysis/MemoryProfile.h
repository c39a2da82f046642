//===- MemoryProfile.h - live memory of a sharded step ----------*- C++ -*-===//
//
// The analysis behind --fsdp-memory-report and the schedule's memory
// budget: per rank, the steady state (shards) and, at every op of the
// step in program order, the live bytes of gathered parameters, full-size
// gradients and activations. Reads only types.
//
//===----------------------------------------------------------------------===//

#ifndef FSDP_DIALECT_FSDP_ANALYSIS_MEMORYPROFILE_H
#define FSDP_DIALECT_FSDP_ANALYSIS_MEMORYPROFILE_H

#include "fsdp/Dialect/FSDP/IR/FSDP.h"

#include <array>
#include <string>

namespace mlir::fsdp {

enum MemoryClass { Gathered, FullGrad, Activation, NumMemoryClasses };

/// Live bytes at one program point, by class.
struct MemoryPoint {
  std::array<int64_t, NumMemoryClasses> bytes{};
  int64_t total() const { return bytes[0] + bytes[1] + bytes[2]; }
};

struct MemoryProfile {
  int64_t worldSize = 1, params = 0, units = 0, elementBytes = 0;
  /// Bytes per element of the gathered units: elementBytes, or fewer
  /// under mixed precision (2 for bf16 gathers over f32 shards).
  int64_t gatheredBytes = 0;
  int64_t shardBytes = 0, steady = 0, largestUnit = 0, smallestUnit = 0;
  /// The units' shard copies (fsdp.unit's shard_copy, mixed precision at
  /// a shard group of one): part of the steady state, beside 4 shardBytes.
  int64_t copyBytes = 0;
  std::string largestName;
  SmallVector<Operation *> order; ///< ops of the step, pre-order
  SmallVector<MemoryPoint> live;  ///< transient bytes at each op
  int64_t forwardPeak = 0, backwardPeak = 0, overall = 0; ///< op indices
  /// Per-rank bytes at the overall peak: steady state plus transients.
  int64_t peakBytes() const { return steady + live[overall].total(); }
};

/// The profile of a sharded @train_step, or failure (reported at the
/// module's location, prefixed with `passName`) when a total it computes
/// overflows int64: the whole training state over all ranks, or the live
/// bytes at some point. Every single tensor fits (the verifiers check), but
/// their sums need not.
FailureOr<MemoryProfile>
computeMemoryProfile(ModuleOp module, func::FuncOp step, StringRef passName);

} // namespace mlir::fsdp

#endif // FSDP_DIALECT_FSDP_ANALYSIS_MEMORYPROFILE_H
