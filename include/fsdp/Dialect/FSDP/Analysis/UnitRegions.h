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
#include "llvm/ADT/SmallPtrSet.h"

#include <optional>
#include <utility>

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

/// Inlines one fsdp.compute where it stands, recording its ops' tag.
void inlineComputeRegion(ComputeOp compute, UnitTagMap &tags);

/// Splits `region` (of a sharded step: its parameters are views of a
/// gathered input) into two regions of its unit and phase where it
/// stands: the ops of its body in `late` (which must hold every user of
/// its members among the body's ops) go to the second, the rest to the
/// first, and `between` (ops of the enclosing block, in order) moves
/// between the two. A view goes to each part that reads it. Returns the
/// two regions, or nothing (and changes nothing) when either part would
/// compute no float tensor (views, constants and index bookkeeping are not
/// worth a region of their own).
std::optional<std::pair<ComputeOp, ComputeOp>>
splitComputeRegion(ComputeOp region,
                   const llvm::SmallPtrSetImpl<Operation *> &late,
                   ArrayRef<Operation *> between);

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
