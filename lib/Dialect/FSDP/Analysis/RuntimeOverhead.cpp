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

#include "llvm/ADT/SmallPtrSet.h"

#include <algorithm>
#include <cstdlib>

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
/// Measured by the GPU check on an H200 (driver 580, CUDA 13.0, cuBLAS
/// 13.1, NCCL 2.28.3; docs/cuda.md, "Measured on a GPU"), the device's
/// total less its free bytes after each setup stage, the same in every
/// run: the context 526.8 MiB, the streams 2, the modules the first step
/// loads lazily 2 to 4 (4 for gpt2-124m in TF32, whose device peak the
/// third run found 2 MiB over a 531 MiB figure; together rounded up
/// here); cuBLAS's handle 68 MiB;
/// NCCL 1090 MiB for the first communicator and 902 for the second, at one
/// rank (no peers: NCCL's own state, not its channel buffers).
constexpr int64_t kCudaContext = 533 * kMiB;
constexpr int64_t kCublasHandle = 68 * kMiB;
constexpr int64_t kDevicePage = 2 * kMiB;
constexpr int64_t kNcclFirstInit = 188 * kMiB, kNcclPerComm = 902 * kMiB;
/// Resident but neither heap nor arena on a CPU rank: code, stacks and
/// Open MPI's shared-memory segments (12.4 MiB for a small GPT-2 and
/// 14.7 MiB for GPT-2 124M at 2 ranks when first measured; 16.5 MiB for
/// the small GPT-2 after issue 30's runtime grew, with the shared
/// libraries' pages the kernel maps around each touched one: see
/// docs/memory.md), rounded up with room.
constexpr int64_t kCpuCodeAndStacks = 20 * kMiB;
/// OpenBLAS's single-precision GEMM blocking (its Haswell and Zen
/// kernels): a packed panel of the first operand is P x Q floats, one of
/// the second Q x (its width, up to R, which Debian's 128 MiB per-thread
/// buffer makes larger than any of our widths).
constexpr int64_t kBlasP = 768, kBlasQ = 384;
constexpr int64_t kBlasBufferBytes = 128 * kMiB;

/// NCCL's buffer size and the channels counted per communicator: its
/// defaults, or NCCL_BUFFSIZE and NCCL_MIN/MAX_NCHANNELS from the compiler's
/// environment (compile with the job's, docs/memory.md).
struct NcclSettings {
  int64_t buffSize = kNcclBuffSize, channels = kNcclChannels;
  std::string source = "NCCL_BUFFSIZE (4 MiB, NCCL's default)";
};

/// A positive integer environment variable up to `max`, or 0 when unset,
/// not one, or beyond `max` (no product of them overflows).
int64_t positiveEnv(const char *name, int64_t max) {
  const char *text = std::getenv(name);
  int64_t value = 0;
  if (!text || llvm::StringRef(text).getAsInteger(0, value) || value <= 0 ||
      value > max)
    return 0;
  return value;
}

NcclSettings ncclSettings() {
  NcclSettings s;
  if (int64_t size = positiveEnv("NCCL_BUFFSIZE", int64_t(1) << 40)) {
    s.buffSize = size;
    s.source =
        "NCCL_BUFFSIZE (" + std::to_string(size) + " B, from the environment)";
  }
  if (int64_t channels = positiveEnv("NCCL_MIN_NCHANNELS", 1024))
    s.channels = std::max(s.channels, channels);
  if (int64_t channels = positiveEnv("NCCL_MAX_NCHANNELS", 1024))
    s.channels = std::min(s.channels, channels);
  return s;
}

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

/// What one BLAS thread's packing buffer holds resident: OpenBLAS maps
/// kBlasBufferBytes per thread and touches the panels of the largest GEMM.
/// A row-major M x N = (M x K)(K x N) runs column-major as its transpose,
/// so the panels are min(K, Q) x min(N, P) and min(K, Q) x M floats: an
/// upper bound (measured within 1% for GPT-2 124M's largest, its
/// embedding's weight gradient, and above it for square GEMMs).
int64_t blasBytesPerThread(func::FuncOp step) {
  int64_t bytes = 0;
  step.walk([&](Operation *op) {
    if (!llvm::isa<LinearOp, LinearGradInputOp, LinearGradWeightOp>(op))
      return;
    auto result = llvm::cast<RankedTensorType>(op->getResult(0).getType());
    int64_t n = result.getShape().back();
    if (n == 0 || result.getNumElements() == 0)
      return; // no GEMM runs
    int64_t m = result.getNumElements() / n;
    auto k = int64_t(llvm::cast<KernelOpInterface>(op).getFlops() /
                     (2.0 * double(m * n)));
    bytes =
        std::max(bytes, 4 * std::min(k, kBlasQ) * (std::min(n, kBlasP) + m));
  });
  return std::min(bytes, kBlasBufferBytes);
}

/// What a bf16 kernel the CPU runs directly on bf16 takes of the widening
/// buffer (plan::cpuDirectBF16ScratchFloats): embedding_backward's row
/// sums, cross_entropy's row slots.
static int64_t directScratchBytes(Operation *op, ::fsdp::plan::Opcode opcode) {
  namespace plan = ::fsdp::plan;
  auto shape = [&](Value v) {
    return llvm::cast<ShapedType>(v.getType()).getShape();
  };
  uint64_t BT = 0, P = 0, C = 0, V = 0;
  if (opcode == plan::Opcode::CrossEntropy ||
      opcode == plan::Opcode::CrossEntropyBackward) {
    V = shape(op->getOperand(opcode == plan::Opcode::CrossEntropyBackward ? 1
                                                                          : 0))
            .back();
  } else if (opcode == plan::Opcode::EmbeddingBackward ||
             opcode == plan::Opcode::TokenEmbeddingBackward) {
    ArrayRef<int64_t> wte = shape(op->getResult(0));
    V = wte[0], C = wte[1];
    P = op->getNumResults() > 1 ? shape(op->getResult(1))[0] : 0;
    if (C == 0)
      return 0;
    BT = llvm::cast<ShapedType>(op->getOperand(0).getType()).getNumElements() /
         C;
  }
  return int64_t(plan::cpuWideningBytes(
      plan::cpuDirectBF16ScratchFloats(opcode, BT, P, C, V)));
}

/// The float copies the CPU backend runs a bf16 kernel on (its bf16
/// operands widened, CpuBackend::runWidened): one buffer, sized for the
/// step's widest kernel, each distinct operand 64-byte aligned. A splat
/// constant is a fill kernel with one bf16 result. The kernels the CPU runs
/// directly on bf16 take their scratch instead. A bf16 linear whose GEMM
/// the run's library takes on bf16 units (--blas auto or onednn) widens
/// nothing: fsdp-run shrinks the buffer then, and says so.
int64_t cpuWideningBytes(func::FuncOp step) {
  namespace plan = ::fsdp::plan;
  auto isBF16 = [](Type type) {
    return llvm::cast<ShapedType>(type).getElementType().isBF16();
  };
  auto bytes = [](Type type) {
    return int64_t(plan::cpuWideningBytes(
        uint64_t(llvm::cast<ShapedType>(type).getNumElements())));
  };
  int64_t most = 0;
  step.walk([&](Operation *op) {
    int64_t sum = 0;
    if (auto constant = llvm::dyn_cast<arith::ConstantOp>(op)) {
      if (llvm::isa<RankedTensorType>(constant.getType()) &&
          isBF16(constant.getType()))
        sum = bytes(constant.getType());
      most = std::max(most, sum);
      return;
    }
    auto kernel = llvm::dyn_cast<KernelOpInterface>(op);
    if (!kernel)
      return;
    const plan::KernelInfo &info = *plan::findKernel(kernel.getKernelOpcode());
    auto floats = [&](const plan::OperandInfo &rule, Type type) {
      return rule.rule == plan::ElementRule::Float && isBF16(type);
    };
    // A bf16 kernel (its float operands bf16, as the plan's element type
    // says) that the CPU runs directly on bf16 takes its scratch only.
    bool bf16Kernel = false;
    for (auto [i, v] : llvm::enumerate(op->getOperands()))
      bf16Kernel |= floats(info.ins[i], v.getType());
    for (auto [i, v] : llvm::enumerate(op->getResults()))
      bf16Kernel |= floats(info.outs[i], v.getType());
    if (bf16Kernel && plan::cpuRunsDirectOnBF16(info.opcode)) {
      most = std::max(most, directScratchBytes(op, info.opcode));
      return;
    }
    llvm::SmallPtrSet<void *, 8> seen; // an operand read twice: one copy
    for (auto [i, v] : llvm::enumerate(op->getOperands()))
      if (floats(info.ins[i], v.getType()) &&
          seen.insert(v.getAsOpaquePointer()).second)
        sum += bytes(v.getType());
    for (auto [i, v] : llvm::enumerate(op->getResults()))
      if (floats(info.outs[i], v.getType()))
        sum += bytes(v.getType());
    SmallVector<RankedTensorType> scratch;
    kernel.getKernelScratch(scratch);
    for (auto [i, type] : llvm::enumerate(scratch))
      if (floats(info.outs[op->getNumResults() + i], type))
        sum += bytes(type);
    most = std::max(most, sum);
  });
  return most;
}

/// What the runtime allocates on the host for any backend.
void addHostLines(ModuleOp module, func::FuncOp step, RuntimeOverhead &o) {
  StepInputSizes in = stepInputs(step);
  // Features plans keep one more B-row buffer of ids (unused by them).
  int64_t buffers = in.bytes + (in.tokens ? 0 : 4 * in.rows);
  o.lines.push_back({"batch buffers", buffers, false,
                     "the step's inputs, once more on the host"});
  if (in.tokens) {
    // The plan does not know the data's id width: count the widest, the
    // uint32 ids of Llama 3's token files.
    int64_t window = (in.rows * getNumRanks(module) * in.seq + 1) * 4;
    o.lines.push_back({"data window", window, false,
                       "one global batch of uint32 ids and its last target "
                       "(uint16 ids: half, bytes: a quarter)"});
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
    if (int64_t widening = cpuWideningBytes(step))
      o.lines.push_back({"bf16 widening", widening, false,
                         "f32 copies of the widest bf16 kernel's operands"});
    o.lines.push_back({"code and stacks", kCpuCodeAndStacks, true,
                       "resident, not heap: code, stacks, Open MPI's shared "
                       "memory, measured at 2 ranks",
                       OverheadKind::Mapped});
    o.lines.push_back({"BLAS per thread", blasBytesPerThread(step), true,
                       "resident, not heap: OpenBLAS's packed panels of "
                       "the largest GEMM, an upper bound",
                       OverheadKind::MappedPerThread});
    return o;
  }
  // The arena is device memory: only what the libraries put there counts.
  // The backend has an NCCL communicator for gathers and one for
  // reduce-scatters over the shard group, under a mesh with replicas one
  // over the replica group (the replica all-reduces), and under expert
  // parallelism one over the expert group (the all-to-alls) and two over
  // the expert shard group. A group of one rank has none (its collectives
  // are copies, runtime/src/cuda/Nccl.h). Each keeps NCCL's state, and,
  // per ring channel, a buffer for what its predecessor sends and one for
  // what it sends its successor.
  int64_t shards = getShardSize(module);
  MeshAttr mesh = getMesh(module);
  int64_t experts = mesh ? mesh.getExpertSize() : 1;
  int64_t comms = (shards > 1 ? 2 : 0) + (getNumRanks(module) > shards) +
                  (experts > 1 ? 1 + (shards / experts > 1 ? 2 : 0) : 0);
  o.lines.push_back({"CUDA context", kCudaContext, true,
                     "context, streams and our kernels' modules, measured "
                     "on an H200",
                     OverheadKind::Device});
  o.lines.push_back({"cuBLAS handle", kCublasHandle, true,
                     "measured on an H200", OverheadKind::Device});
  // The backend gives cuBLAS this workspace itself, after the arena in the
  // same allocation (NVIDIA's recommended size for Hopper).
  o.lines.push_back(
      {"cuBLAS workspace", int64_t(::fsdp::plan::kCublasWorkspaceBytes), false,
       "set by the backend, after the arena", OverheadKind::Device});
  // The driver hands out device memory in 2 MiB pages: the arena's one
  // cudaMalloc (with the workspace) may take up to that much more (1.6
  // MiB for GPT-2 6 x 256 on the H200, docs/cuda.md's third run).
  o.lines.push_back({"allocation rounding", kDevicePage, true,
                     "the arena's cudaMalloc rounded up to 2 MiB pages, at "
                     "most",
                     OverheadKind::Device});
  if (comms == 0)
    return o; // one rank: no NCCL at all
  o.lines.push_back({"NCCL communicators",
                     kNcclFirstInit + comms * kNcclPerComm, true,
                     std::to_string(comms) +
                         " communicators' own state, measured at one rank on "
                         "an H200 (188 MiB once, 902 MiB each)",
                     OverheadKind::Device});
  NcclSettings nccl = ncclSettings();
  o.lines.push_back(
      {"NCCL buffers", comms * nccl.channels * 2 * nccl.buffSize, true,
       std::to_string(comms) +
           (comms == 1 ? " communicator x " : " communicators x ") +
           std::to_string(nccl.channels) + " channels x 2 x " + nccl.source,
       OverheadKind::Device});
  return o;
}

int64_t mlir::fsdp::getBudgetedOverhead(ModuleOp module, func::FuncOp step,
                                        StringRef runtime) {
  return runtime == "none"
             ? 0
             : estimateRuntimeOverhead(module, step, runtime).total();
}
