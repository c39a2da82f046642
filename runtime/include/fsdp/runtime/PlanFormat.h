//===- PlanFormat.h - the plan file format, shared by both sides -*- C++
//-*-===//
//
// The compiler (fsdp-opt, which writes plans) and the runtime (fsdp-run,
// which reads them) meet here and only here: this header and the shard
// layout it includes (ShardLayout.h) have no dependency beyond the C++
// standard library, and use no compiler extension. docs/plan-format.md describes the layout
// in prose; the two must change together, with kPlanVersion bumped.
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
inline constexpr uint32_t kPlanVersion = 4;
/// magic, version, flags, payload size, CRC-32, reserved.
inline constexpr size_t kHeaderSize = 48;
/// Where the header's CRC-32 field lies (the checksum covers the header
/// with this field zeroed, then the payload).
inline constexpr size_t kCrcOffset = 24;
/// The largest arena a plan may ask for (256 TiB, beyond any host's or
/// device's memory): a reader refuses larger ones before allocating.
inline constexpr uint64_t kMaxArenaSize = uint64_t(1) << 48;
/// Buffers start at multiples of this many bytes in the arena.
inline constexpr uint64_t kBufferAlignment = 64;
inline constexpr uint32_t kNone = 0xFFFFFFFFu;

/// What a buffer holds; decides its lifetime (persistent kinds live for the
/// whole run) and its row in the memory report.
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
inline constexpr uint32_t kNumBufferKinds = 8;

inline constexpr std::array<std::string_view, kNumBufferKinds>
    kBufferKindNames = {"input",  "param",      "grad",    "adam_m",
                        "adam_v", "activation", "scratch", "gathered"};

inline bool isPersistent(BufferKind kind) {
  return kind == BufferKind::Input || kind == BufferKind::Param ||
         kind == BufferKind::AdamM || kind == BufferKind::AdamV;
}

enum class DType : uint32_t { F32 = 0, I32 = 1, BF16 = 2 };
inline constexpr std::array<std::string_view, 3> kDTypeNames = {"f32", "i32",
                                                                "bf16"};
inline size_t dtypeSize(DType type) { return type == DType::BF16 ? 2 : 4; }

enum class InitKind : uint32_t { Zeros = 0, Ones = 1, Normal = 2 };

/// Kernels, their operand counts, and the named numeric parameters they
/// take (stored in this order in the plan). The names are the fsdp
/// dialect's op names.
enum class Opcode : uint32_t {
  Embedding,
  EmbeddingBackward,
  LayerNorm,
  LayerNormBackward,
  Linear, // 2 inputs, or 3 with a bias
  LinearGradInput,
  LinearGradWeight,
  BiasGrad,
  Add,
  Gelu,
  GeluBackward,
  Relu,
  ReluBackward,
  Attention,
  AttentionBackward, // outs: dqkv, scratch
  CrossEntropy,      // outs: the mean loss, per-row losses (scratch)
  CrossEntropyBackward,
  AdamW, // ins: grad; outs: param, m, v (updated in place)
  Fill,
  AllGather,     // ins: the unit's local shard; outs: the full flat tensor
  ReduceScatter, // ins: the full flat gradient; outs: the local shard (avg)
  AdamWShard,    // ins: grad shard; outs: param, m, v shards
  Copy,
  Wait, // ins: a started collective's input and output; no outs
};

/// A collective with stream 0 runs where it stands in the program. One with
/// stream s >= 1 is started there on stream s (collectives of one stream
/// run in program order; streams run concurrently with compute and with
/// each other) under token t >= 1, and `wait {token = t}` later in the
/// program is where it must have finished. The wait names the collective's
/// input and output buffers so that their lifetimes reach it. `group = 1`
/// joins a started collective to the one right before it (same kind, same
/// stream): the group is issued as one fused collective.
inline constexpr uint32_t kNumStreams = 3; ///< compute, gathers, scatters

struct KernelInfo {
  Opcode opcode;
  std::string_view name;
  uint32_t minInputs, maxInputs, outputs;
  std::array<std::string_view, 5> params; ///< empty names end the list
};

inline constexpr std::array<KernelInfo, 24> kKernels = {{
    {Opcode::Embedding, "embedding", 3, 3, 1, {}},
    {Opcode::EmbeddingBackward, "embedding_backward", 2, 2, 2, {}},
    {Opcode::LayerNorm, "layer_norm", 3, 3, 3, {"epsilon"}},
    {Opcode::LayerNormBackward, "layer_norm_backward", 5, 5, 3, {}},
    {Opcode::Linear, "linear", 2, 3, 1, {}},
    {Opcode::LinearGradInput, "linear_grad_input", 2, 2, 1, {}},
    {Opcode::LinearGradWeight, "linear_grad_weight", 2, 2, 1, {}},
    {Opcode::BiasGrad, "bias_grad", 1, 1, 1, {}},
    {Opcode::Add, "add", 2, 2, 1, {}},
    {Opcode::Gelu, "gelu", 1, 1, 1, {}},
    {Opcode::GeluBackward, "gelu_backward", 2, 2, 1, {}},
    {Opcode::Relu, "relu", 1, 1, 1, {}},
    {Opcode::ReluBackward, "relu_backward", 2, 2, 1, {}},
    {Opcode::Attention, "attention", 1, 1, 2, {"heads"}},
    {Opcode::AttentionBackward, "attention_backward", 3, 3, 2, {"heads"}},
    {Opcode::CrossEntropy, "cross_entropy", 2, 2, 2, {}},
    {Opcode::CrossEntropyBackward, "cross_entropy_backward", 3, 3, 1, {}},
    {Opcode::AdamW,
     "adamw",
     1,
     1,
     3,
     {"lr", "beta1", "beta2", "eps", "weight_decay"}},
    {Opcode::Fill, "fill", 0, 0, 1, {"value"}},
    {Opcode::AllGather, "all_gather", 1, 1, 1, {"stream", "token", "group"}},
    {Opcode::ReduceScatter,
     "reduce_scatter",
     1,
     1,
     1,
     {"stream", "token", "group"}},
    {Opcode::AdamWShard,
     "adamw_shard",
     1,
     1,
     3,
     {"lr", "beta1", "beta2", "eps", "weight_decay"}},
    {Opcode::Copy, "copy", 1, 1, 1, {}},
    {Opcode::Wait, "wait", 2, 2, 0, {"token"}},
}};

inline const KernelInfo *findKernel(std::string_view name) {
  for (const KernelInfo &info : kKernels)
    if (info.name == name)
      return &info;
  return nullptr;
}

inline const KernelInfo *findKernel(uint32_t opcode) {
  return opcode < kKernels.size() ? &kKernels[opcode] : nullptr;
}

inline size_t numParams(const KernelInfo &info) {
  size_t n = 0;
  while (n < info.params.size() && !info.params[n].empty())
    ++n;
  return n;
}

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
