//===- RuntimeOverhead.cpp - what a rank holds outside the arena ----------===//
//
// Host lines come from the step's own sizes (the runtime's batch buffers
// are the step's inputs; a token plan also reads one window of the data
// file per batch). Library lines come from their documented defaults or
// from measurements on this project's machines (docs/memory.md); those
// are estimates and say so.
//
//===----------------------------------------------------------------------===//

#include "fsdp/Dialect/FSDP/Analysis/RuntimeOverhead.h"

#include "fsdp/runtime/PlanFormat.h"

using namespace mlir;
using namespace mlir::fsdp;

namespace {
constexpr int64_t kMiB = int64_t(1) << 20;

/// Measured with `fsdp-run --heap-breakdown` (docs/memory.md): Open MPI's
/// MPI_Init and the flight recorder (3.35 MB at 2 ranks), the C++
/// runtime's exception pool (72 KiB), the backend's thread pools (21 KB).
/// The CUDA libraries are not in it: fsdp-run loads that backend only for
/// CUDA runs.
constexpr int64_t kCpuStartupHeap = 3'500'000;
/// The plan's tables in the runtime (buffers, operands, parameters), per
/// op of the sharded step: 81 KB for 353 ops, 156 KB for 677, both 230 B
/// (docs/memory.md); rounded up.
constexpr int64_t kPlanBytesPerOp = 240;
/// NCCL: NCCL_BUFFSIZE's default of 4 MiB per buffer; the channels a
/// communicator uses on one node, as an estimate (NCCL picks them at run
/// time, and NCCL_BUFFSIZE in the job's environment changes the size).
constexpr int64_t kNcclBuffSize = 4 * kMiB, kNcclChannels = 4;
/// The CUDA context and our kernels' modules on the device: an estimate
/// until the GPU check measures it (docs/cuda.md).
constexpr int64_t kCudaContext = 500 * kMiB;

/// The step's inputs' bytes per rank, and whether it is a token plan (B x
/// T ids and targets), with its B x T.
struct StepInputSizes {
  int64_t bytes = 0, rows = 0, seq = 0;
  bool tokens = false;
};

StepInputSizes stepInputs(func::FuncOp step) {
  StepInputSizes in;
  for (BlockArgument arg : step.getBody().front().getArguments()) {
    auto type = llvm::dyn_cast<RankedTensorType>(arg.getType());
    if (!type)
      continue; // the step number
    in.bytes += getSizeInBytes(type);
    if (arg.getArgNumber() == 0 && type.getRank() == 2) {
      in.tokens = type.getElementType().isInteger(32);
      in.rows = type.getDimSize(0);
      in.seq = type.getDimSize(1);
    } else if (arg.getArgNumber() == 0 && type.getRank() >= 1) {
      in.rows = type.getDimSize(0);
    }
  }
  return in;
}

/// The ops of the step the plan's tables grow with: all but constants,
/// terminators and the regions' wrappers.
int64_t countOps(func::FuncOp step) {
  int64_t ops = 0;
  step.walk([&](Operation *op) {
    if (!op->hasTrait<OpTrait::IsTerminator>() &&
        !llvm::isa<arith::ConstantOp, func::FuncOp, ComputeOp>(op))
      ++ops;
  });
  return ops;
}

/// What the runtime allocates on the host for any backend.
void addHostLines(ModuleOp module, func::FuncOp step, RuntimeOverhead &o) {
  StepInputSizes in = stepInputs(step);
  // Features plans keep one more B-row buffer of ids (unused by them).
  int64_t buffers = in.bytes + (in.tokens ? 0 : 4 * in.rows);
  o.lines.push_back({"batch buffers", buffers, false,
                     "the step's inputs, once more on the host"});
  if (in.tokens) {
    int64_t window = (in.rows * getNumRanks(module) * in.seq + 1) * 2;
    o.lines.push_back({"data window", window, false,
                       "one global batch of uint16 ids and its last target "
                       "(bytes data: half)"});
  }
  int64_t ops = countOps(step);
  o.lines.push_back({"plan tables", ops * kPlanBytesPerOp, true,
                     std::to_string(kPlanBytesPerOp) + " B x " +
                         std::to_string(ops) + " ops of the step, measured"});
}
} // namespace

ArrayRef<StringRef> mlir::fsdp::getOverheadBackends() {
  static const StringRef backends[] = {"cpu", "cuda"};
  return backends;
}

RuntimeOverhead mlir::fsdp::estimateRuntimeOverhead(ModuleOp module,
                                                    func::FuncOp step,
                                                    StringRef backend) {
  RuntimeOverhead o;
  o.backend = backend.str();
  if (backend == "cpu") {
    // The arena is host memory: the host lines count against it.
    o.lines.push_back({"MPI and the C++ runtime", kCpuStartupHeap, true,
                       "measured at start-up (fsdp-run --heap-breakdown)"});
    addHostLines(module, step, o);
    return o;
  }
  // The arena is device memory: only what the libraries put there counts.
  // Each stream's NCCL communicator (gathers, scatters) keeps, per ring
  // channel, a buffer for what its predecessor sends and one for what it
  // sends its successor.
  int64_t comms = 2;
  o.lines.push_back({"CUDA context", kCudaContext, true,
                     "context and kernel modules, to be measured on a GPU"});
  // The backend gives cuBLAS this workspace itself, after the arena in the
  // same allocation (NVIDIA's recommended size for Hopper).
  o.lines.push_back({"cuBLAS workspace",
                     int64_t(::fsdp::plan::kCublasWorkspaceBytes), false,
                     "set by the backend, after the arena"});
  if (getShardSize(module) > 1)
    o.lines.push_back({"NCCL buffers",
                       comms * kNcclChannels * 2 * kNcclBuffSize, true,
                       std::to_string(comms) + " communicators x " +
                           std::to_string(kNcclChannels) +
                           " channels x 2 x NCCL_BUFFSIZE (4 MiB unless set)"});
  return o;
}
