//===- RuntimeOverhead.h - what a rank holds outside the arena --*- C++ -*-===//
//
// The arena is planned to the byte; this is the rest of a rank's memory,
// by backend, as far as the compiler can know it before the job starts:
// what the runtime allocates for itself (the batch buffers, the plan's
// tables) and what the libraries it runs on allocate (Open MPI, the CUDA
// context, cuBLAS's workspace, NCCL's buffers). Each line says whether it
// is exact or an estimate and what it rests on; docs/memory.md gives the
// measurements behind the estimates. The memory report prints it and the
// schedule's memory budget counts it.
//
//===----------------------------------------------------------------------===//

#ifndef FSDP_DIALECT_FSDP_ANALYSIS_RUNTIMEOVERHEAD_H
#define FSDP_DIALECT_FSDP_ANALYSIS_RUNTIMEOVERHEAD_H

#include "fsdp/Dialect/FSDP/IR/FSDP.h"

#include <string>

namespace mlir::fsdp {

/// Where a line's bytes live, which decides what fsdp-run measures them
/// against: the heap (its malloc counter), memory a library maps itself
/// (only the resident set sees it), that per BLAS thread (fsdp-run scales
/// it by its thread count; the compiler counts one), or the device.
enum class OverheadKind { Heap, Mapped, MappedPerThread, Device };

struct OverheadLine {
  std::string what;
  int64_t bytes = 0;
  /// False for what the runtime itself allocates from the plan's sizes.
  bool estimate = true;
  /// What the figure rests on (a formula, a default, a measurement).
  std::string basis;
  OverheadKind kind = OverheadKind::Heap;
};

struct RuntimeOverhead {
  std::string backend;
  SmallVector<OverheadLine> lines;
  /// Every line, at one BLAS thread: what a memory budget counts.
  int64_t total() const {
    int64_t sum = 0;
    for (const OverheadLine &line : lines)
      sum += line.bytes;
    return sum;
  }
  /// The lines of one kind.
  int64_t total(OverheadKind kind) const {
    int64_t sum = 0;
    for (const OverheadLine &line : lines)
      sum += line.kind == kind ? line.bytes : 0;
    return sum;
  }
};

/// The backends an overhead is known for: "cpu" and "cuda".
ArrayRef<StringRef> getOverheadBackends();

/// The memory a rank of the sharded `step` holds outside the arena on
/// `backend` (one of getOverheadBackends()).
RuntimeOverhead estimateRuntimeOverhead(ModuleOp module, func::FuncOp step,
                                        StringRef backend);

/// What a memory budget counts outside the arena for `runtime` (one of
/// getOverheadBackends(), or "none": nothing).
int64_t getBudgetedOverhead(ModuleOp module, func::FuncOp step,
                            StringRef runtime);

} // namespace mlir::fsdp

#endif // FSDP_DIALECT_FSDP_ANALYSIS_RUNTIMEOVERHEAD_H
