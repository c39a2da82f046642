//===- PlanFormat.h - the plan file format, shared by both ------*- C++ -*-===//
//
// The compiler (fsdp-opt, which writes plans) and the runtime (fsdp-run,
// which reads them) meet here and only here: this header and the shard
// layout it includes (ShardLayout.h) are the fsdp_plan_format CMake target,
// the one thing of the runtime's that the compiler libraries see. Standard
// C++17 only: no compiler extensions, no dependency beyond the standard
// library. docs/plan-format.md describes the layout in prose; the two must
// change together, with kPlanVersion bumped when the file bytes change.
//
//===----------------------------------------------------------------------===//

#ifndef FSDP_RUNTIME_PLANFORMAT_H
#define FSDP_RUNTIME_PLANFORMAT_H

#include "fsdp/runtime/ShardLayout.h"

#include <array>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <optional>
#include <string_view>

namespace fsdp::plan {

inline constexpr char kMagic[8] = {'F', 'S', 'D', 'P', 'P', 'L', 'A', 'N'};
inline constexpr uint32_t kPlanVersion = 13;
/// magic, version, flags, payload size, CRC-32, reserved.
inline constexpr size_t kHeaderSize = 48;
/// Where the header's CRC-32 field lies (the checksum covers the header
/// with this field zeroed, then the payload).
inline constexpr size_t kCrcOffset = 24;
/// The largest arena a plan may ask for (256 TiB, beyond any host's or
/// device's memory): a reader refuses larger ones before allocating.
inline constexpr uint64_t kMaxArenaSize = uint64_t(1) << 48;
/// The workspace the CUDA backend gives cuBLAS (cublasSetWorkspace), in
/// the arena's own allocation right after it: NVIDIA's recommended size
/// for Hopper. The compiler counts it among the bytes outside the arena.
inline constexpr uint64_t kCublasWorkspaceBytes = uint64_t(32) << 20;
/// Buffers start at multiples of this many bytes in the arena.
inline constexpr uint64_t kBufferAlignment = 64;
inline constexpr uint32_t kNone = 0xFFFFFFFFu;

/// What a buffer holds; decides its lifetime (persistent kinds live for the
/// whole run) and its row in the memory report. The fsdprt dialect's
/// BufferKind has the same values and names (RuntimeOps.cpp asserts it).
enum class BufferKind : uint32_t {
  Input = 0,      ///< a step input (token ids, targets), filled by the runtime
  Param = 1,      ///< a parameter (or its local shard)
  Grad = 2,       ///< a parameter gradient (or partial sum of one)
  AdamM = 3,      ///< AdamW first moment
  AdamV = 4,      ///< AdamW second moment
  Activation = 5, ///< anything else a kernel produces
  Scratch = 6,    ///< temporary space of one kernel
  Gathered = 7,   ///< a unit's all-gathered flat parameter
};
inline constexpr uint32_t kNumBufferKinds = uint32_t(BufferKind::Gathered) + 1;

/// Live bytes by buffer kind (BufferKind order), as the compiler's memory
/// planner and the runtime's memory timeline both count them; `Int` is
/// signed where a sweep adds and subtracts lifetimes.
template <typename Int> struct LiveBytesByKind {
  std::array<Int, kNumBufferKinds> byKind{};
  Int total() const {
    Int sum = 0;
    for (Int b : byKind)
      sum += b;
    return sum;
  }
};

inline constexpr std::array<std::string_view, kNumBufferKinds>
    kBufferKindNames = {"input",  "param",      "grad",    "adam_m",
                        "adam_v", "activation", "scratch", "gathered"};

inline bool isPersistent(BufferKind kind) {
  return kind == BufferKind::Input || kind == BufferKind::Param ||
         kind == BufferKind::AdamM || kind == BufferKind::AdamV;
}

/// Element types of buffers and parameters. Which one a kernel operand may
/// have is its ElementRule's business (admits(), below).
enum class DType : uint32_t { F32 = 0, I32 = 1, BF16 = 2 };
inline constexpr uint32_t kNumDTypes = uint32_t(DType::BF16) + 1;
inline constexpr std::array<std::string_view, kNumDTypes> kDTypeNames = {
    "f32", "i32", "bf16"};
constexpr size_t dtypeSize(DType type) {
  switch (type) {
  case DType::F32:
  case DType::I32:
    return 4;
  case DType::BF16:
    return 2;
  }
  return 4; // not a DType: loadPlan refuses it before asking
}

enum class InitKind : uint32_t { Zeros = 0, Ones = 1, Normal = 2 };

/// Kernels, in kKernels order (an opcode is its index there). The names
/// are the fsdp dialect's op names. Generated, with the table, from
/// include/fsdp/Dialect/FSDP/IR/FSDPKernels.td (KernelTable.inc).
enum class Opcode : uint32_t {
#define FSDP_KERNEL_OPCODES
#include "fsdp/runtime/KernelTable.inc"
};
// The generated file defines FSDP_KERNEL_LAST_OPCODE as the last enumerator.
#define FSDP_KERNEL_LAST_OPCODE
#include "fsdp/runtime/KernelTable.inc"
inline constexpr size_t kNumOpcodes =
    size_t(Opcode::FSDP_KERNEL_LAST_OPCODE) + 1;
#undef FSDP_KERNEL_LAST_OPCODE

/// The blocks of a GPU's grad_sq_sum (a fixed count, so that its sum is
/// the same for every device): each leaves one double partial sum in the
/// kernel's scratch, which holds two f32 elements per block.
inline constexpr int64_t kGradSqSumBlocks = 256;
inline constexpr int64_t kGradSqSumScratch = 2 * kGradSqSumBlocks;
/// The epsilon of PyTorch's clip_grad_norm_: the coefficient is
/// min(1, max_norm / (norm + kClipEpsilon)).
inline constexpr double kClipEpsilon = 1e-6;

/// A collective with stream 0 runs where it stands in the program. One with
/// stream s >= 1 is started there on stream s (collectives of one stream
/// run in program order; streams run concurrently with compute and with
/// each other) under token t >= 1, and `wait {token = t}` later in the
/// program is where it must have finished. The wait names the collective's
/// input and output buffers so that their lifetimes reach it. `group = 1`
/// joins a started collective to the one right before it (same kind, same
/// stream): the group is issued as one fused collective.
inline constexpr uint32_t kComputeStream = 0; ///< and synchronous collectives
inline constexpr uint32_t kGatherStream = 1;  ///< started all-gathers
inline constexpr uint32_t kScatterStream = 2; ///< started reduce-scatters
inline constexpr uint32_t kReplicaStream = 3; ///< started replica all-reduces
inline constexpr uint32_t kNumStreams = 4;

/// The group a collective runs over (its `axis` parameter), on a mesh of
/// R replicas of S-way sharding (world size R S, Plan::shardSize = S):
/// the shard group of rank k is the S ranks k - k % S .. k - k % S + S - 1
/// (every rank when R = 1), its replica group the R ranks k % S, S + k % S,
/// ..., (R - 1) S + k % S (itself alone when R = 1). Gathers,
/// reduce-scatters and clipping's all_reduce_sum run over the shard group,
/// all_reduce_mean over the replica group; the runtime's own all-reduces
/// (the loss, agreement, checkpoints) over every rank.
enum class CommAxis : uint32_t { Shard = 0, Replicate = 1 };
inline constexpr uint32_t kNumCommAxes = uint32_t(CommAxis::Replicate) + 1;
inline constexpr std::array<std::string_view, kNumCommAxes> kCommAxisNames = {
    "shard", "replicate"};
/// Rank `rank`'s index in its shard group (the shard it holds), and in its
/// replica group, on a mesh of `shardSize`-way sharding.
constexpr int64_t shardIndex(int64_t rank, int64_t shardSize) {
  return rank % shardSize;
}
constexpr int64_t replicaIndex(int64_t rank, int64_t shardSize) {
  return rank / shardSize;
}
static_assert(shardIndex(5, 3) == 2 && replicaIndex(5, 3) == 1);

/// The element type an operand must have. Mixed precision (bf16 compute
/// over f32 master shards) is a matter of these rules: a kernel's Float
/// operands are its element type, f32 or bf16, one for all of them (the
/// loader checks it, and Instruction::elementType records it), while its
/// statistics, the loss and AdamW's state stay F32.
enum class ElementRule : uint8_t {
  Float,    ///< activations, gathered parameters, gradients: the kernel's
            ///< element type, f32 or bf16
  F32,      ///< f32 always: layer norm's mean and rstd, attention's
            ///< log-sum-exp, the loss and its per-row terms, and the shards
            ///< and moments AdamW updates (master weights)
  AnyFloat, ///< f32 or bf16, apart from the element type: a cast's two
            ///< sides, an all-gather's shard (rounded to the gathered type)
            ///< and a wait's buffers
  TokenIds, ///< token or class ids: i32, held by a step input (no kernel
            ///< writes ids, so only the runtime's checked data fills them)
};
constexpr bool isFloatType(DType type) {
  return type == DType::F32 || type == DType::BF16;
}
constexpr bool admits(ElementRule rule, DType type) {
  switch (rule) {
  case ElementRule::Float:
  case ElementRule::AnyFloat:
    return isFloatType(type);
  case ElementRule::F32:
    return type == DType::F32;
  case ElementRule::TokenIds:
    return type == DType::I32;
  }
  return false;
}

/// The float space a bf16 operand of `elements` elements takes when the
/// CPU backend widens it to f32 around a kernel (each operand 64-byte
/// aligned). The compiler predicts the CPU's heap with it.
constexpr uint64_t cpuWideningBytes(uint64_t elements) {
  return (elements * 4 + kBufferAlignment - 1) / kBufferAlignment *
         kBufferAlignment;
}

/// What a kernel does with an operand.
enum class OperandRole : uint8_t {
  Input,   ///< read
  Result,  ///< written: a result of the fsdp op of the kernel's name
  Scratch, ///< written: space the lowering adds, no fsdp op result
  Updated, ///< read and written in place: a parameter or its moments
};

struct OperandInfo {
  std::string_view name; ///< empty: no operand (ends the list)
  ElementRule rule = ElementRule::Float;
  OperandRole role = OperandRole::Input;
  bool optional = false; ///< an input that may be left out (the last ones)
};

inline constexpr size_t kMaxKernelInputs = 5, kMaxKernelOutputs = 3,
                        kMaxKernelParams = 5;

/// A numeric parameter of a kernel (stored as a double in the plan), and
/// what the compiler stores when the IR leaves it out: the value of the
/// parameter `sameAs` (kv_heads: heads), or `defaultValue` (the op's
/// DefaultValuedAttr; an f32 one is the float widened). `type` is the
/// attribute the compiler builds for it.
enum class ParamType : uint8_t { F32, I64 };
struct ParamInfo {
  std::string_view name; ///< empty: no parameter (ends the list)
  ParamType type = ParamType::F32;
  bool hasDefault = false;
  double defaultValue = 0;
  std::string_view sameAs;
};

/// A kernel: its name, its operands (with their element-type rules and
/// roles; the counts follow from them), and the named numeric parameters it
/// takes, stored in this order in the plan.
struct KernelInfo {
  Opcode opcode;
  std::string_view name;
  uint32_t minInputs, maxInputs, outputs;
  std::array<ParamInfo, kMaxKernelParams> params; ///< unnamed ends it
  std::array<OperandInfo, kMaxKernelInputs> ins;
  std::array<OperandInfo, kMaxKernelOutputs> outs;
};

/// The spelling of the kernel table.
namespace table {
constexpr OperandInfo floats(std::string_view name) {
  return {name, ElementRule::Float, OperandRole::Input, false};
}
constexpr OperandInfo optionalFloats(std::string_view name) {
  return {name, ElementRule::Float, OperandRole::Input, true};
}
constexpr OperandInfo tokenIds(std::string_view name) {
  return {name, ElementRule::TokenIds, OperandRole::Input, false};
}
constexpr OperandInfo result(std::string_view name) {
  return {name, ElementRule::Float, OperandRole::Result, false};
}
constexpr OperandInfo scratch(std::string_view name) {
  return {name, ElementRule::Float, OperandRole::Scratch, false};
}
constexpr OperandInfo updated(std::string_view name) {
  return {name, ElementRule::F32, OperandRole::Updated, false};
}
constexpr OperandInfo stat(std::string_view name) {
  return {name, ElementRule::F32, OperandRole::Input, false};
}
constexpr OperandInfo optionalStat(std::string_view name) {
  return {name, ElementRule::F32, OperandRole::Input, true};
}
constexpr OperandInfo statResult(std::string_view name) {
  return {name, ElementRule::F32, OperandRole::Result, false};
}
constexpr OperandInfo statScratch(std::string_view name) {
  return {name, ElementRule::F32, OperandRole::Scratch, false};
}
constexpr OperandInfo anyFloats(std::string_view name) {
  return {name, ElementRule::AnyFloat, OperandRole::Input, false};
}
constexpr OperandInfo anyResult(std::string_view name) {
  return {name, ElementRule::AnyFloat, OperandRole::Result, false};
}
constexpr ParamInfo f32Param(std::string_view name) {
  return {name, ParamType::F32, false, 0, {}};
}
constexpr ParamInfo f32Param(std::string_view name, double defaultValue) {
  return {name, ParamType::F32, true, defaultValue, {}};
}
constexpr ParamInfo i64Param(std::string_view name) {
  return {name, ParamType::I64, false, 0, {}};
}
constexpr ParamInfo i64Param(std::string_view name, double defaultValue) {
  return {name, ParamType::I64, true, defaultValue, {}};
}
constexpr ParamInfo sameAs(std::string_view name, std::string_view other) {
  return {name, ParamType::I64, false, 0, other};
}
constexpr KernelInfo
kernel(Opcode opcode, std::string_view name,
       std::array<OperandInfo, kMaxKernelInputs> ins,
       std::array<OperandInfo, kMaxKernelOutputs> outs,
       std::array<ParamInfo, kMaxKernelParams> params = {}) {
  KernelInfo info{opcode, name, 0, 0, 0, params, ins, outs};
  for (const OperandInfo &operand : ins)
    if (!operand.name.empty()) {
      ++info.maxInputs;
      info.minInputs += !operand.optional;
    }
  for (const OperandInfo &operand : outs)
    info.outputs += !operand.name.empty();
  return info;
}
} // namespace table

/// The table, generated from FSDPKernels.td (see its comments and
/// docs/plan-format.md for what each kernel does).
inline constexpr std::array<KernelInfo, kNumOpcodes> kKernels = [] {
  using namespace table;
  using O = Opcode;
  return std::array<KernelInfo, kNumOpcodes>{{
#define FSDP_KERNEL_TABLE
#include "fsdp/runtime/KernelTable.inc"
  }};
}();

/// Whether the table is what its readers assume: entry k has opcode k, the
/// names are unique, operands and parameters are contiguous (optional
/// inputs last), inputs are read and outputs written (results before
/// scratch), only inputs hold token ids, and a parameter's default names
/// another parameter of the kernel. (fsdp-tblgen checks the same before
/// writing the table; this keeps a hand edit of KernelTable.inc honest.)
constexpr bool isWellFormed(const std::array<KernelInfo, kNumOpcodes> &t) {
  for (size_t k = 0; k < t.size(); ++k) {
    const KernelInfo &info = t[k];
    if (size_t(info.opcode) != k || info.name.empty())
      return false;
    for (size_t j = 0; j < k; ++j)
      if (t[j].name == info.name)
        return false;
    for (size_t i = 0; i < kMaxKernelInputs; ++i) {
      const OperandInfo &in = info.ins[i];
      if (in.name.empty() != (i >= info.maxInputs) ||
          in.role != OperandRole::Input ||
          (!in.name.empty() && in.optional != (i >= info.minInputs)))
        return false;
    }
    for (size_t i = 0; i < kMaxKernelOutputs; ++i) {
      const OperandInfo &out = info.outs[i];
      if (out.name.empty() != (i >= info.outputs) || out.optional ||
          (!out.name.empty() && (out.role == OperandRole::Input ||
                                 out.rule == ElementRule::TokenIds)) ||
          (i > 0 && info.outs[i - 1].role == OperandRole::Scratch &&
           out.role == OperandRole::Result))
        return false;
    }
    for (size_t i = 0; i < kMaxKernelParams; ++i) {
      const ParamInfo &param = info.params[i];
      if (i > 0 && info.params[i - 1].name.empty() && !param.name.empty())
        return false;
      bool found = param.sameAs.empty();
      for (size_t j = 0; j < kMaxKernelParams && !found; ++j)
        found = j != i && !info.params[j].name.empty() &&
                info.params[j].name == param.sameAs;
      if (!found || (param.hasDefault && !param.sameAs.empty()))
        return false;
    }
  }
  return true;
}
static_assert(isWellFormed(kKernels), "the kernel table is inconsistent");

constexpr const KernelInfo &kernelInfo(Opcode opcode) {
  return kKernels[size_t(opcode)];
}
constexpr std::string_view kernelName(Opcode opcode) {
  return kernelInfo(opcode).name;
}

constexpr const KernelInfo *findKernel(std::string_view name) {
  for (const KernelInfo &info : kKernels)
    if (info.name == name)
      return &info;
  return nullptr;
}

constexpr const KernelInfo *findKernel(uint32_t opcode) {
  return opcode < kKernels.size() ? &kKernels[opcode] : nullptr;
}

constexpr size_t numParams(const KernelInfo &info) {
  size_t n = 0;
  while (n < info.params.size() && !info.params[n].name.empty())
    ++n;
  return n;
}

/// Where kernel `opcode` stores its parameter `name`; numParams when it
/// takes none of that name.
constexpr size_t paramIndex(Opcode opcode, std::string_view name) {
  const KernelInfo &info = kernelInfo(opcode);
  size_t i = 0;
  while (i < numParams(info) && info.params[i].name != name)
    ++i;
  return i;
}

/// Whether kernels a and b take the same parameters.
constexpr bool sameParams(Opcode a, Opcode b) {
  if (numParams(kernelInfo(a)) != numParams(kernelInfo(b)))
    return false;
  for (size_t i = 0; i < numParams(kernelInfo(a)); ++i)
    if (paramIndex(b, kernelInfo(a).params[i].name) != i)
      return false;
  return true;
}

/// The collectives' parameters, by name (all_gather and reduce_scatter
/// store them alike; a wait has the token alone).
inline constexpr size_t kCollectiveStream =
    paramIndex(Opcode::AllGather, "stream");
inline constexpr size_t kCollectiveToken =
    paramIndex(Opcode::AllGather, "token");
inline constexpr size_t kCollectiveGroup =
    paramIndex(Opcode::AllGather, "group");
inline constexpr size_t kCollectiveAxis = paramIndex(Opcode::AllGather, "axis");
inline constexpr size_t kNumCollectiveParams = 4;
/// all_reduce_sum's one parameter, its axis.
inline constexpr size_t kAllReduceSumAxis =
    paramIndex(Opcode::AllReduceSum, "axis");
inline constexpr size_t kWaitToken = paramIndex(Opcode::Wait, "token");
static_assert(numParams(kernelInfo(Opcode::AllGather)) ==
                      kNumCollectiveParams &&
                  kCollectiveStream < kNumCollectiveParams &&
                  kCollectiveToken < kNumCollectiveParams &&
                  kCollectiveGroup < kNumCollectiveParams &&
                  kCollectiveAxis < kNumCollectiveParams &&
                  kWaitToken < numParams(kernelInfo(Opcode::Wait)),
              "collectives name stream, token and group; waits a token");
static_assert(sameParams(Opcode::AllGather, Opcode::ReduceScatter) &&
                  sameParams(Opcode::AllGather, Opcode::AllReduceMean),
              "the three collectives store their parameters alike");
/// AdamW's learning rate (fsdp-run --lr overrides it).
inline constexpr size_t kAdamWLearningRate = paramIndex(Opcode::AdamW, "lr");
static_assert(kAdamWLearningRate < numParams(kernelInfo(Opcode::AdamW)) &&
              sameParams(Opcode::AdamW, Opcode::AdamWShard));

/// An all_gather's, reduce_scatter's or all_reduce_mean's parameters, as
/// stored (doubles). The accessors assume a plan that loaded: the loader
/// has checked that stream < kNumStreams, that token fits 32 bits, that
/// group is 0 or 1 and axis a CommAxis.
struct CollectiveParams {
  double stream = 0, token = 0, group = 0, axis = 0;
  bool started() const { return stream != 0; } ///< not run in place
  bool grouped() const { return group != 0; }  ///< joins the one before
  uint32_t streamId() const { return uint32_t(stream); }
  uint32_t tokenId() const { return uint32_t(token); }
  CommAxis commAxis() const { return CommAxis(uint32_t(axis)); }
};
/// Reads a collective's parameters, in kKernels order, from `params`.
inline CollectiveParams collectiveParams(const double *params) {
  return {params[kCollectiveStream], params[kCollectiveToken],
          params[kCollectiveGroup], params[kCollectiveAxis]};
}
/// The values to store for `p`, in kKernels order.
inline std::array<double, kNumCollectiveParams>
collectiveParamValues(const CollectiveParams &p) {
  std::array<double, kNumCollectiveParams> values{};
  values[kCollectiveStream] = p.stream;
  values[kCollectiveToken] = p.token;
  values[kCollectiveGroup] = p.group;
  values[kCollectiveAxis] = p.axis;
  return values;
}
/// A wait's token, as stored.
inline double waitToken(const double *params) { return params[kWaitToken]; }

/// CRC-32 (IEEE 802.3, reflected, polynomial 0xEDB88320) of `size` bytes,
/// continuing from `previous` (the CRC of the bytes before them) as zlib's
/// crc32 does.
inline uint32_t crc32(const void *data, size_t size, uint32_t previous = 0) {
  static const auto table = [] {
    std::array<uint32_t, 256> t{};
    for (uint32_t i = 0; i < 256; ++i) {
      uint32_t c = i;
      for (int k = 0; k < 8; ++k)
        c = (c & 1) ? 0xEDB88320u ^ (c >> 1) : c >> 1;
      t[i] = c;
    }
    return t;
  }();
  uint32_t crc = previous ^ 0xFFFFFFFFu;
  auto *bytes = static_cast<const unsigned char *>(data);
  for (size_t i = 0; i < size; ++i)
    crc = table[(crc ^ bytes[i]) & 0xFF] ^ (crc >> 8);
  return crc ^ 0xFFFFFFFFu;
}

/// A plan's checksum: the CRC-32 of its kHeaderSize-byte header with the
/// CRC field zeroed, then of its payload. It covers every byte of the file
/// but the field itself (flags and reserved bytes too).
inline uint32_t planChecksum(const char *header, const char *payload,
                             size_t payloadSize) {
  char copy[kHeaderSize];
  std::memcpy(copy, header, kHeaderSize);
  std::memset(copy + kCrcOffset, 0, sizeof(uint32_t));
  return crc32(payload, payloadSize, crc32(copy, kHeaderSize));
}

} // namespace fsdp::plan

#endif // FSDP_RUNTIME_PLANFORMAT_H
