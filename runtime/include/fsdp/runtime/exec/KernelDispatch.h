//===- KernelDispatch.h - one decoding of the compute kernels ---*- C++ -*-===//
//
// Both backends run the same kernel set with the same argument lists (see
// cpu/Kernels.h): only the functions differ (cpu:: with a CBLAS, cuda::
// with a stream and a cuBLAS handle). This decodes a compute instruction's
// operands and dimensions from the plan once, for both, and calls the
// member function of the same name on the backend's kernel set `k`.
// Collectives and waits are the backends' own business.
//
//===----------------------------------------------------------------------===//

#ifndef FSDP_RUNTIME_KERNELDISPATCH_H
#define FSDP_RUNTIME_KERNELDISPATCH_H

#include "fsdp/runtime/plan/Plan.h"

#include <cstdint>
#include <cstdlib>
#include <string_view>

/// The kernels runCompute calls by name, for a backend to bind with an
/// X-macro: the GEMM-based ones (which the CPU runs with its CBLAS), and
/// the rest. crossEntropyForward and gradSqSum (which take a scratch only
/// the GPU uses) and copy are bound by hand; casts are the backends' own.
/// (FSDP_RUNTIME_GEMM_KERNELS, FSDP_RUNTIME_OTHER_KERNELS: generated from
/// the kernels' `dispatch` in FSDPKernels.td.)
#define FSDP_KERNEL_DISPATCH
#include "fsdp/runtime/KernelTable.inc"

namespace fsdp::rt {

/// Whether `opcode` computes on its Float operands in their element type:
/// every kernel but casts, collectives and waits, and copies (bytes,
/// whatever the type: runCompute copies them, but a backend may first).
/// What the CPU runs on widened copies for a bf16 instruction.
constexpr bool isComputeKernel(plan::Opcode opcode) {
  using plan::Opcode;
  return opcode != Opcode::Cast && opcode != Opcode::Copy &&
         opcode != Opcode::AllGather && opcode != Opcode::ReduceScatter &&
         opcode != Opcode::AllReduceSum && opcode != Opcode::AllReduceMean &&
         opcode != Opcode::Wait;
}

/// Runs compute instruction `inst` through `k`; returns false, doing
/// nothing, for casts, collectives and waits (the backends' own). `T` is
/// the element type its Float operands are passed as (float, or the
/// backend's bf16 type for a bf16 instruction); its F32 operands
/// (statistics, the loss, AdamW's state) are always float. `address(id)`
/// is where buffer `id` lies for the kernel: the arena, or where the
/// backend widened it. `params` overrides the instruction's parameters;
/// `step` is AdamW's step; `rank` of `worldSize` picks a sharded AdamW's
/// parameter segments and a grad_sq_sum's elements of its shard.
template <typename T, typename Kernels, typename Address>
bool runCompute(Kernels &k, const Plan &plan, const Instruction &inst,
                Address address, const double *params, int64_t step, int rank,
                int worldSize) {
  using plan::Opcode;
  auto in = [&](size_t i) -> const BufferDesc & {
    return plan.buffers[inst.ins[i]];
  };
  auto out = [&](size_t i) -> const BufferDesc & {
    return plan.buffers[inst.outs[i]];
  };
  // Float operands (the kernel's element type), F32 ones, token ids.
  auto I = [&](size_t i) {
    return reinterpret_cast<T *>(address(inst.ins[i]));
  };
  auto O = [&](size_t i) {
    return reinterpret_cast<T *>(address(inst.outs[i]));
  };
  auto SI = [&](size_t i) {
    return reinterpret_cast<float *>(address(inst.ins[i]));
  };
  auto SO = [&](size_t i) {
    return reinterpret_cast<float *>(address(inst.outs[i]));
  };
  auto ids = [&](size_t i) {
    return reinterpret_cast<const int32_t *>(address(inst.ins[i]));
  };
  auto last = [](const BufferDesc &b) {
    return b.shape.empty() ? int64_t(1) : b.shape.back();
  };
  auto rows = [&](const BufferDesc &b, int64_t width) {
    return b.numElements() / width;
  };
  // Parameters by the kernel table's names, never by position.
  // (A name the table does not list is a bug here, caught by the kernel
  // tests: paramIndex returns the count, past the loaded parameters.)
  auto param = [&](std::string_view name) {
    size_t index = plan::paramIndex(inst.kernel->opcode, name);
    if (index >= inst.params.size())
      std::abort();
    return params[index];
  };
  // A sharded AdamW's optional second input scales its gradient
  // (gradient clipping's coefficient, a scalar where the kernel runs).
  const float *scale =
      inst.kernel->opcode == Opcode::AdamWShard && inst.ins.size() == 2
          ? SI(1)
          : nullptr;
  auto adamw = [&](float *p, float *m, float *v, const float *g, int64_t n,
                   bool decay) {
    k.adamw(p, m, v, g, n, float(param("lr")), float(param("beta1")),
            float(param("beta2")), float(param("eps")),
            decay ? float(param("weight_decay")) : 0.0f, step, scale);
  };
  switch (inst.kernel->opcode) {
  case Opcode::Embedding: // no position table: the token embedding alone
    k.embeddingForward(O(0), ids(0), I(1),
                       inst.ins.size() == 3 ? I(2) : static_cast<T *>(nullptr),
                       in(0).shape[0], in(0).shape[1], in(1).shape[1]);
    return true;
  case Opcode::TokenEmbeddingBackward:
    k.embeddingBackward(O(0), static_cast<T *>(nullptr), I(0), ids(1),
                        in(1).shape[0], in(1).shape[1], out(0).shape[1],
                        out(0).shape[0], int64_t(0));
    return true;
  case Opcode::EmbeddingBackward:
    k.embeddingBackward(O(0), O(1), I(0), ids(1), in(1).shape[0],
                        in(1).shape[1], out(0).shape[1], out(0).shape[0],
                        out(1).shape[0]);
    return true;
  case Opcode::LayerNorm:
    k.layerNormForward(O(0), SO(1), SO(2), I(0), I(1), I(2),
                       rows(in(0), last(in(0))), last(in(0)),
                       float(param("epsilon")));
    return true;
  case Opcode::LayerNormBackward:
    k.layerNormBackward(O(0), O(1), O(2), I(0), I(1), I(2), SI(3), SI(4),
                        rows(in(1), last(in(1))), last(in(1)));
    return true;
  case Opcode::Linear: {
    int64_t OC = in(1).shape[0], IC = in(1).shape[1];
    k.linearForward(O(0), I(0), I(1), inst.ins.size() == 3 ? I(2) : nullptr,
                    rows(in(0), IC), IC, OC);
    return true;
  }
  case Opcode::LinearGradInput: {
    int64_t OC = in(1).shape[0], IC = in(1).shape[1];
    k.linearGradInput(O(0), I(0), I(1), rows(in(0), OC), IC, OC);
    return true;
  }
  case Opcode::LinearGradWeight: {
    int64_t OC = out(0).shape[0], IC = out(0).shape[1];
    k.linearGradWeight(O(0), I(0), I(1), rows(in(0), OC), IC, OC);
    return true;
  }
  case Opcode::BiasGrad:
    k.biasGrad(O(0), I(0), rows(in(0), last(in(0))), last(in(0)));
    return true;
  case Opcode::Add:
    k.add(O(0), I(0), I(1), out(0).numElements());
    return true;
  case Opcode::Gelu:
    k.geluForward(O(0), I(0), out(0).numElements());
    return true;
  case Opcode::GeluBackward:
    k.geluBackward(O(0), I(0), I(1), out(0).numElements());
    return true;
  case Opcode::Relu:
    k.reluForward(O(0), I(0), out(0).numElements());
    return true;
  case Opcode::ReluBackward:
    k.reluBackward(O(0), I(0), I(1), out(0).numElements());
    return true;
  // C is the output's (the gradient's) width: qkv is narrower than 3C with
  // fewer kv heads.
  case Opcode::Attention: {
    const auto &s = in(0).shape; // B x T x (C + 2 kv_heads hs)
    k.attentionForward(O(0), O(1), I(0), s[0], s[1], out(0).shape[2],
                       int64_t(param("heads")), int64_t(param("kv_heads")));
    return true;
  }
  case Opcode::AttentionBackward: {
    const auto &s = in(1).shape;
    k.attentionBackward(O(0), O(1), I(0), I(1), I(2), s[0], s[1],
                        in(0).shape[2], int64_t(param("heads")),
                        int64_t(param("kv_heads")));
    return true;
  }
  case Opcode::AttentionBlocked: {
    const auto &s = in(0).shape;
    k.blockedAttentionForward(O(0), SO(1), I(0), s[0], s[1], out(0).shape[2],
                              int64_t(param("heads")),
                              int64_t(param("kv_heads")));
    return true;
  }
  case Opcode::AttentionBackwardBlocked: {
    const auto &s = in(1).shape; // dqkv, dout, qkv, out, lse
    k.blockedAttentionBackward(O(0), I(0), I(1), I(3), SI(2), s[0], s[1],
                               in(0).shape[2], int64_t(param("heads")),
                               int64_t(param("kv_heads")));
    return true;
  }
  case Opcode::CrossEntropy:
    k.crossEntropyForward(SO(0), I(0), ids(1), rows(in(0), last(in(0))),
                          last(in(0)), SO(1));
    return true;
  case Opcode::CrossEntropyBackward:
    k.crossEntropyBackward(O(0), SI(0), I(1), ids(2), rows(in(1), last(in(1))),
                           last(in(1)));
    return true;
  case Opcode::AdamW:
    adamw(SO(0), SO(1), SO(2), SI(0), out(0).numElements(), /*decay=*/true);
    return true;
  case Opcode::AdamWShard:
    // Segment by parameter: a no_weight_decay parameter gets no decay,
    // also where its range straddles two ranks; a shorter shard's padding
    // is left alone.
    forEachShardSegment(
        plan, uint32_t(out(0).unit), rank, worldSize,
        [&](const ParamDesc &param, int64_t at, int64_t, int64_t count) {
          adamw(SO(0) + at, SO(1) + at, SO(2) + at, SI(0) + at, count,
                !param.noWeightDecay);
        });
    return true;
  case Opcode::Fill:
    k.fill(O(0), out(0).numElements(), float(param("value")));
    return true;
  case Opcode::Copy:
    k.copy(O(0), I(0), uint64_t(out(0).numElements()) * sizeof(T));
    return true;
  case Opcode::RmsNorm:
    k.rmsNormForward(O(0), SO(1), I(0), I(1), rows(in(0), last(in(0))),
                     last(in(0)), float(param("epsilon")));
    return true;
  case Opcode::RmsNormBackward:
    k.rmsNormBackward(O(0), O(1), I(0), I(1), I(2), SI(3),
                      rows(in(1), last(in(1))), last(in(1)));
    return true;
  case Opcode::SwiGlu:
    k.swigluForward(O(0), I(0), I(1), out(0).numElements());
    return true;
  case Opcode::SwiGluBackward:
    k.swigluBackward(O(0), O(1), I(0), I(1), I(2), out(0).numElements());
    return true;
  case Opcode::Rope:
  case Opcode::RopeBackward: {
    const auto &s = in(0).shape; // B x T x (heads + 2 kv_heads) hs
    int64_t heads = int64_t(param("heads")), kv = int64_t(param("kv_heads"));
    int64_t hs = s[2] / (heads + 2 * kv);
    float theta = float(param("theta"));
    if (inst.kernel->opcode == Opcode::Rope)
      k.ropeForward(O(0), I(0), s[0], s[1], heads, kv, hs, theta);
    else
      k.ropeBackward(O(0), I(0), s[0], s[1], heads, kv, hs, theta);
    return true;
  }
  case Opcode::GradSqSum: {
    // This rank's elements of the shard; a shorter shard's last is padding.
    plan::ShardRange range =
        plan::shardRange(int64_t(param("flat_size")), rank, worldSize);
    k.gradSqSum(SO(0), I(0), inst.ins.size() == 2 ? SI(1) : nullptr,
                range.end - range.begin, SO(1));
    return true;
  }
  case Opcode::ClipCoefficient:
    k.clipCoefficient(SO(0), SI(0), param("max_norm"));
    return true;
  case Opcode::Cast:
  case Opcode::AllGather:
  case Opcode::ReduceScatter:
  case Opcode::AllReduceSum:
  case Opcode::AllReduceMean:
  case Opcode::Wait:
    return false;
  }
  return false;
}

} // namespace fsdp::rt

#endif // FSDP_RUNTIME_KERNELDISPATCH_H
