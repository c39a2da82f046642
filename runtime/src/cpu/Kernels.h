//===- Kernels.h - the CPU backend's kernels --------------------*- C++ -*-===//
//
// One function per kernel of the plan, fp32, row-major, contiguous unless a
// stride is given. Every output is overwritten (never accumulated into):
// the compiler's autodiff sums gradients with explicit `add` kernels. GEMMs
// go through Blas; everything else is our own code, parallelised with
// OpenMP over the outer dimension. Shapes follow the fsdp dialect's ops
// (docs/generated/FSDPDialect.md); N below is the number of rows (the
// product of all leading dimensions).
//
//===----------------------------------------------------------------------===//

#ifndef FSDP_RUNTIME_CPU_KERNELS_H
#define FSDP_RUNTIME_CPU_KERNELS_H

#include "fsdp/runtime/exec/AdamWTensors.h"

#include <cstddef>
#include <cstdint>

/// Each kernel is compiled three times, for x86-64-v4 (AVX-512),
/// x86-64-v3 (AVX2, FMA) and baseline x86-64, and the dynamic loader picks
/// one for the CPU it runs on (GCC's target_clones, an ifunc): a binary
/// runs on any x86-64 it is copied to and still uses the wide vectors
/// where they exist. Helpers inlined into a kernel follow its target;
/// OpenMP's outlined bodies are cloned with it.
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define FSDP_CPU_KERNEL                                                        \
  __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#else
#define FSDP_CPU_KERNEL
#endif

namespace fsdp::rt::cpu {

class Blas;

/// The kernels the plan's instructions run, declared from the kernel table
/// (each kernel's `call` in include/fsdp/Dialect/FSDP/IR/FSDPKernels.td:
/// a Float operand is float here, a GEMM takes the Blas first). What each
/// computes is documented at its definition (Embedding.cpp, LayerNorm.cpp,
/// Linear.cpp, Elementwise.cpp, Attention.cpp, BlockedAttention.cpp,
/// CrossEntropy.cpp, GradClip.cpp); a definition that differs from its
/// declaration leaves the declared function undefined, and the link fails.
#define FSDP_KERNEL_CPU_DECLS
#include "fsdp/runtime/KernelDecls.inc"

/// Where the heads of attention live in a row of qkv (B x T x (C + 2 KV
/// hs)): query head h at h * hs, the k and v of its kv head (h / group) at
/// kOffset(h) and vOffset(h); rows are ld apart.
struct QkvLayout {
  int64_t hs, ld, group, C, KV;
  QkvLayout(int64_t C, int64_t NH, int64_t KV)
      : hs(C / NH), ld(C + 2 * KV * (C / NH)), group(NH / KV), C(C), KV(KV) {}
  int64_t kOffset(int64_t h) const { return C + h / group * hs; }
  int64_t vOffset(int64_t h) const { return kOffset(h) + KV * hs; }
};

/// The first key query row i sees under a sliding window of W keys (query
/// i sees keys i - W < j <= i; W = 0, or W > i, means from key 0).
inline int64_t windowStart(int64_t i, int64_t W) {
  return W > 0 && i >= W ? i - W + 1 : 0;
}

/// Rows of keys per block in the blocked attention kernels: the k and v
/// rows of a block (2 x 64 x hs floats) stay in cache while every query
/// row of a block uses them.
constexpr int64_t kAttentionBlock = 64;

// The kernels bound or run by hand.

/// *loss = mean over N rows of -log softmax(logits[row])[targets[row]].
void crossEntropyForward(float *loss, const float *logits,
                         const int32_t *targets, int64_t N, int64_t V);

/// AdamW (decoupled weight decay), step t >= 1:
///   m = b1 m + (1 - b1) g;  v = b2 v + (1 - b2) g^2
///   mhat = m / (1 - b1^t);  vhat = v / (1 - b2^t)
///   p -= lr (mhat / (sqrt(vhat) + eps) + wd p)
/// with g = grad[i] * *gradScale where gradScale is given (gradient
/// clipping's coefficient), grad[i] otherwise (the same operations with a
/// scale of 1: x * 1 is x, bit for bit). Where `copy` is given (a unit's
/// shard copy), copy[i] = the updated param[i] rounded to bf16, as it is
/// written: what rounding the shard afterwards gives, without the pass.
void adamw(float *param, float *m, float *v, const float *grad, int64_t n,
           float lr, float beta1, float beta2, float eps, float weightDecay,
           int64_t step, const float *gradScale = nullptr,
           uint16_t *copy = nullptr);
/// The same update from a bf16 gradient, widened as it is read (exactly:
/// the bits of adamw on the widened gradient).
void adamw(float *param, float *m, float *v, const uint16_t *grad, int64_t n,
           float lr, float beta1, float beta2, float eps, float weightDecay,
           int64_t step, const float *gradScale = nullptr,
           uint16_t *copy = nullptr);

/// The update of adamw on each tensor of `tensors` (its gradient f32 or
/// bf16, its own hyperparameters, scale and copy), all in one parallel
/// pass: the executor's multi-tensor AdamW (AdamWTensors.h). The same
/// bits as adamw on each tensor alone.
void adamwTensors(const AdamWTensor *tensors, size_t count, int64_t step);

/// A mixture of experts' selection bias after a step (docs/moe.md): each
/// element moves by `rate` against the sign of its rank-averaged load
/// signal, none where it is 0 (moe::selectionBiasStep); rounded into
/// `copy` too where it is given (the unit's shard copy).
void moeSelectionBiasUpdate(float *bias, const float *signal, int64_t n,
                            double rate, uint16_t *copy = nullptr);

/// Gradient clipping's sum of squares: *out = acc + sum over i < n of
/// grad[i]^2 (acc = *acc, or 0 without one), in double, rounded to f32
/// once. The order is fixed by n alone (kGradSqSumParts parts, each
/// summed in 8 lanes, then the parts in order), not by the thread count.
inline constexpr int64_t kGradSqSumParts = 64;
void gradSqSum(float *out, const float *grad, const float *acc, int64_t n);

} // namespace fsdp::rt::cpu

#endif // FSDP_RUNTIME_CPU_KERNELS_H
