//===- MemoryPicture.h - the arena's live bytes as an SVG -------*- C++ -*-===//
//
// --fsdp-plan-memory="svg=FILE": a standalone SVG of the live bytes of one
// rank along the step program, stacked by buffer kind, with the forward,
// backward and optimizer marked, the unit boundaries, the peak (its value
// in bytes in the text), the arena, and a budget and the runtime's share
// outside the arena when given.
//
//===----------------------------------------------------------------------===//

#ifndef FSDP_LIB_DIALECT_RUNTIME_TRANSFORMS_MEMORYPICTURE_H
#define FSDP_LIB_DIALECT_RUNTIME_TRANSFORMS_MEMORYPICTURE_H

#include "fsdp/runtime/PlanFormat.h"

#include "llvm/Support/raw_ostream.h"

#include <array>
#include <string>
#include <vector>

namespace mlir::fsdprt {

struct MemoryPicture {
  struct Kernel {
    std::string name, unit;
    /// Live bytes while it runs, by plan::BufferKind.
    std::array<int64_t, ::fsdp::plan::kNumBufferKinds> live{};
    int64_t total() const;
  };
  std::vector<Kernel> kernels;
  /// The kernel that computes the loss (the forward's last) and the first
  /// AdamW (the optimizer's first); -1 where there is none.
  int64_t forwardEnd = -1, optimizerBegin = -1;
  int64_t peakKernel = 0, peakBytes = 0, arenaBytes = 0;
  /// A budget to mark (0: none), and the bytes the runtime `runtime` holds
  /// outside the arena, drawn on top of the arena's (0: none).
  int64_t budget = 0, outside = 0;
  std::string runtime;
};

/// Writes `picture` as SVG to `os`.
void renderMemoryPicture(const MemoryPicture &picture, llvm::raw_ostream &os);

} // namespace mlir::fsdprt

#endif // FSDP_LIB_DIALECT_RUNTIME_TRANSFORMS_MEMORYPICTURE_H
