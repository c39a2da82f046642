//===- UnitRegions.h - forming and dissolving compute regions ---*- C++ -*-===//
//
// Wrap and autodiff both need the same two moves: inline every fsdp.compute
// of a function into one flat block (remembering which unit each op came
// from), and outline maximal runs of ops of one unit and phase back into
// fsdp.compute regions. Keeping them here means the two passes agree on
// what a region is.
//
//===----------------------------------------------------------------------===//

#ifndef FSDP_DIALECT_FSDP_ANALYSIS_UNITREGIONS_H
#define FSDP_DIALECT_FSDP_ANALYSIS_UNITREGIONS_H

#include "fsdp/Dialect/FSDP/IR/FSDP.h"
#include "llvm/ADT/DenseMap.h"

namespace mlir::fsdp {

/// Where an op belongs: a unit (null for ops outside every unit) and a phase.
struct UnitTag {
  StringAttr unit;
  Phase phase = Phase::Forward;
  bool operator==(const UnitTag &other) const {
    return unit == other.unit && phase == other.phase;
  }
};

using UnitTagMap = llvm::DenseMap<Operation *, UnitTag>;

/// Inlines every fsdp.compute in `block` into it, in place, and records the
/// unit and phase of each inlined op in `tags`.
void inlineComputeRegions(Block &block, UnitTagMap &tags);

/// Ops that are cloned into each region that uses them instead of being
/// passed in: parameter loads (so a region reads its own gathered copy) and
/// constants.
bool isRematerializable(Operation *op);

/// Wraps each maximal run of consecutive ops of `block` with the same
/// non-null tag in one fsdp.compute. Rematerializable ops never break a run
/// and are cloned into the regions that use them; values defined before a
/// run become its inputs, values used after it its results.
void outlineComputeRegions(Block &block, const UnitTagMap &tags);

} // namespace mlir::fsdp

#endif // FSDP_DIALECT_FSDP_ANALYSIS_UNITREGIONS_H
