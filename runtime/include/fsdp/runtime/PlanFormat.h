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
/// are the fsdp dialect's op names.
enum class Opcode : uint32_t {
  Embedding,
  EmbeddingBackward,
  LayerNorm,
  LayerNormBackward,
  Linear,
  LinearGradInput,
  LinearGradWeight,
  BiasGrad,
  Add,
  Gelu,
  GeluBackward,
  Relu,
  ReluBackward,
  Attention,
  AttentionBackward,
  AttentionBlocked,
  AttentionBackwardBlocked,
  CrossEntropy,
  CrossEntropyBackward,
  AdamW,
  Fill,
  AllGather,
  ReduceScatter,
  AdamWShard,
  Copy,
  // Llama's ops (plan version 8).
  RmsNorm,
  RmsNormBackward,
  SwiGlu,
  SwiGluBackward,
  Rope,
  RopeBackward,
  TokenEmbeddingBackward,
  Cast,
  Wait,
  // Gradient clipping by global norm (plan version 9).
  GradSqSum,
  AllReduceSum,
  ClipCoefficient,
  // Hybrid sharding's replica all-reduce (plan version 12).
  AllReduceMean, // the last: kNumOpcodes counts from it
};
inline constexpr size_t kNumOpcodes = size_t(Opcode::AllReduceMean) + 1;

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

/// A kernel: its name, its operands (with their element-type rules and
/// roles; the counts follow from them), and the named numeric parameters it
/// takes, stored in this order in the plan.
struct KernelInfo {
  Opcode opcode;
  std::string_view name;
  uint32_t minInputs, maxInputs, outputs;
  std::array<std::string_view, kMaxKernelParams> params; ///< empty ends it
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
constexpr KernelInfo
kernel(Opcode opcode, std::string_view name,
       std::array<OperandInfo, kMaxKernelInputs> ins,
       std::array<OperandInfo, kMaxKernelOutputs> outs,
       std::array<std::string_view, kMaxKernelParams> params = {}) {
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

inline constexpr std::array<KernelInfo, kNumOpcodes> kKernels = [] {
  using namespace table;
  using O = Opcode;
  constexpr std::array<std::string_view, kMaxKernelParams> adamw = {
      "lr", "beta1", "beta2", "eps", "weight_decay"};
  return std::array<KernelInfo, kNumOpcodes>{{
      // Without wpe: the token embedding alone (Llama's).
      kernel(O::Embedding, "embedding",
             {tokenIds("tokens"), floats("wte"), optionalFloats("wpe")},
             {result("result")}),
      kernel(O::EmbeddingBackward, "embedding_backward",
             {floats("grad"), tokenIds("tokens")},
             {result("wte_grad"), result("wpe_grad")}),
      kernel(O::LayerNorm, "layer_norm",
             {floats("input"), floats("weight"), floats("bias")},
             {result("result"), statResult("mean"), statResult("rstd")},
             {"epsilon"}),
      kernel(
          O::LayerNormBackward, "layer_norm_backward",
          {floats("grad"), floats("input"), floats("weight"), stat("mean"),
           stat("rstd")},
          {result("input_grad"), result("weight_grad"), result("bias_grad")}),
      kernel(O::Linear, "linear",
             {floats("input"), floats("weight"), optionalFloats("bias")},
             {result("result")}),
      kernel(O::LinearGradInput, "linear_grad_input",
             {floats("grad"), floats("weight")}, {result("result")}),
      kernel(O::LinearGradWeight, "linear_grad_weight",
             {floats("grad"), floats("input")}, {result("result")}),
      kernel(O::BiasGrad, "bias_grad", {floats("grad")}, {result("result")}),
      kernel(O::Add, "add", {floats("lhs"), floats("rhs")}, {result("result")}),
      kernel(O::Gelu, "gelu", {floats("input")}, {result("result")}),
      kernel(O::GeluBackward, "gelu_backward",
             {floats("grad"), floats("input")}, {result("result")}),
      kernel(O::Relu, "relu", {floats("input")}, {result("result")}),
      kernel(O::ReluBackward, "relu_backward",
             {floats("grad"), floats("input")}, {result("result")}),
      kernel(O::Attention, "attention", {floats("qkv")},
             {result("result"), result("probs")}, {"heads", "kv_heads"}),
      kernel(O::AttentionBackward, "attention_backward",
             {floats("grad"), floats("qkv"), floats("probs")},
             {result("result"), scratch("dprobs")}, {"heads", "kv_heads"}),
      // Without the T x T matrix: one log-sum-exp per row instead.
      kernel(O::AttentionBlocked, "attention_blocked", {floats("qkv")},
             {result("result"), statResult("lse")}, {"heads", "kv_heads"}),
      kernel(O::AttentionBackwardBlocked, "attention_backward_blocked",
             {floats("grad"), floats("qkv"), stat("lse"), floats("output")},
             {result("result")}, {"heads", "kv_heads"}),
      // The mean loss, and per-row losses that a GPU reduces with many
      // blocks in a fixed order.
      kernel(O::CrossEntropy, "cross_entropy",
             {floats("logits"), tokenIds("targets")},
             {statResult("loss"), statScratch("row_losses")}),
      kernel(O::CrossEntropyBackward, "cross_entropy_backward",
             {stat("grad"), floats("logits"), tokenIds("targets")},
             {result("result")}),
      kernel(O::AdamW, "adamw", {stat("grad")},
             {updated("param"), updated("m"), updated("v")}, adamw),
      kernel(O::Fill, "fill", {}, {result("result")}, {"value"}),
      // The unit's local shard into its full flat parameter; a narrower
      // gathered type (mixed precision) rounds the shard into its own slot
      // first, which then moves in that type.
      kernel(O::AllGather, "all_gather", {anyFloats("shard")},
             {result("gathered")}, {"stream", "token", "group", "axis"}),
      // A full flat gradient into the local shard of its mean.
      kernel(O::ReduceScatter, "reduce_scatter", {floats("grad")},
             {result("shard")}, {"stream", "token", "group", "axis"}),
      // With `scale` (a scalar: gradient clipping's coefficient), AdamW on
      // grad x scale.
      kernel(O::AdamWShard, "adamw_shard",
             {stat("grad"), optionalStat("scale")},
             {updated("param"), updated("m"), updated("v")}, adamw),
      kernel(O::Copy, "copy", {floats("source")}, {result("result")}),
      // Llama's ops. RMSNorm saves one f32 rstd per row; rope rotates the
      // q and k heads of a fused qkv in place of attention's input (its
      // backward is the inverse rotation, with the same parameters).
      kernel(O::RmsNorm, "rms_norm", {floats("input"), floats("weight")},
             {result("result"), statResult("rstd")}, {"epsilon"}),
      kernel(O::RmsNormBackward, "rms_norm_backward",
             {floats("grad"), floats("input"), floats("weight"), stat("rstd")},
             {result("input_grad"), result("weight_grad")}),
      kernel(O::SwiGlu, "swiglu", {floats("gate"), floats("up")},
             {result("result")}),
      kernel(O::SwiGluBackward, "swiglu_backward",
             {floats("grad"), floats("gate"), floats("up")},
             {result("gate_grad"), result("up_grad")}),
      kernel(O::Rope, "rope", {floats("qkv")}, {result("result")},
             {"heads", "kv_heads", "theta"}),
      kernel(O::RopeBackward, "rope_backward", {floats("grad")},
             {result("result")}, {"heads", "kv_heads", "theta"}),
      kernel(O::TokenEmbeddingBackward, "token_embedding_backward",
             {floats("grad"), tokenIds("tokens")}, {result("wte_grad")}),
      // Element-wise conversion, rounding to nearest even when narrower.
      kernel(O::Cast, "cast", {anyFloats("source")}, {anyResult("result")}),
      // The started collective's input and output: read, so that their
      // lifetimes reach the wait.
      kernel(O::Wait, "wait", {anyFloats("source"), anyFloats("result")}, {},
             {"token"}),
      // Gradient clipping. grad_sq_sum: the sum of squares (in double) of
      // this rank's elements of a unit's gradient shard (of the unit of
      // `flat_size` elements; a shorter shard's last element is not one),
      // plus `acc`; the GPU's blocks leave their partial sums in
      // `partials`. all_reduce_sum: the sum over ranks, synchronous (it
      // runs where it stands, on the compute stream). clip_coefficient:
      // min(1, max_norm / (sqrt(sum_sq) + kClipEpsilon)).
      kernel(O::GradSqSum, "grad_sq_sum", {floats("grad"), optionalStat("acc")},
             {statResult("sum"), statScratch("partials")}, {"flat_size"}),
      kernel(O::AllReduceSum, "all_reduce_sum", {stat("value")},
             {statResult("sum")}, {"axis"}),
      kernel(O::ClipCoefficient, "clip_coefficient", {stat("sum_sq")},
             {statResult("coefficient")}, {"max_norm"}),
      // Hybrid sharding: a gradient shard (a unit's, as reduce_scatter
      // leaves it) averaged in place over the replica group; `result` is
      // the `shard` buffer itself.
      kernel(O::AllReduceMean, "all_reduce_mean", {floats("shard")},
             {result("result")}, {"stream", "token", "group", "axis"}),
  }};
}();

/// Whether the table is what its readers assume: entry k has opcode k, the
/// names are unique, operands and parameters are contiguous (optional
/// inputs last), inputs are read and outputs written, and only inputs hold
/// token ids.
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
                                 out.rule == ElementRule::TokenIds)))
        return false;
    }
    for (size_t i = 1; i < kMaxKernelParams; ++i)
      if (info.params[i - 1].empty() && !info.params[i].empty())
        return false;
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
  while (n < info.params.size() && !info.params[n].empty())
    ++n;
  return n;
}

/// Where kernel `opcode` stores its parameter `name`; numParams when it
/// takes none of that name.
constexpr size_t paramIndex(Opcode opcode, std::string_view name) {
  const KernelInfo &info = kernelInfo(opcode);
  size_t i = 0;
  while (i < numParams(info) && info.params[i] != name)
    ++i;
  return i;
}

/// Whether kernels a and b take the same parameters.
constexpr bool sameParams(Opcode a, Opcode b) {
  if (numParams(kernelInfo(a)) != numParams(kernelInfo(b)))
    return false;
  for (size_t i = 0; i < numParams(kernelInfo(a)); ++i)
    if (paramIndex(b, kernelInfo(a).params[i]) != i)
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
