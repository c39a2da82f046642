//===- Kernels.h - the CUDA backend's kernels -------------------*- C++ -*-===//
//
// The same kernels as src/cpu/Kernels.h, with the same semantics, shapes and
// argument order, on the GPU: row-major, every output overwritten (never
// accumulated into). All pointers are device pointers. Nothing here
// synchronises with the host or allocates: every launch, memset and cuBLAS
// call goes on ctx.stream, in order.
//
// Element types. Each kernel is a template over E, the element type of its
// activations, parameters and gradients (the plan's Float operands): float
// or __nv_bfloat16, instantiated for both in the .cu files (callers name
// E, or pass pointers that deduce it; T is the sequence length). A bf16 kernel
// computes what the CPU backend computes for it (its fp32 kernel on widened
// copies, results rounded to nearest even): it loads bf16, computes and
// accumulates in float, and rounds once where it stores. Statistics (layer
// norm's mean and rstd, attention's log-sum-exp), the loss and its per-row
// terms are float always, and so is AdamW (fp32 master weights and moments).
//
// Errors are not reported by return value (a launch error would surface
// only at the next synchronisation anyway): the first launch error, CUDA
// error or non-successful cuBLAS status is recorded process-wide, and the
// backend collects it with takeError() (e.g. after each step or before it
// synchronises).
//
// This header is plain C++ (the backend's .cpp files include it); the
// kernels live in the .cu files next to it.
//
//===----------------------------------------------------------------------===//

#ifndef FSDP_RUNTIME_CUDA_KERNELS_KERNELS_H
#define FSDP_RUNTIME_CUDA_KERNELS_KERNELS_H

#include <cstdint>
#include <string>

#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_runtime_api.h>

namespace fsdp::rt::cuda {

/// Where the kernels run. The caller owns both and has bound `blas` to
/// `stream` (cublasSetStream) and chosen its math mode: CUBLAS_DEFAULT_MATH
/// or CUBLAS_PEDANTIC_MATH for fp32 GEMMs, CUBLAS_TF32_TENSOR_OP_MATH for
/// TF32. The handle must be in host pointer mode (the default).
struct Context {
  cudaStream_t stream;
  cublasHandle_t blas;
};

/// Returns the first error recorded since the last call (launch errors,
/// failed CUDA calls, cuBLAS statuses), as "<kernel>: <reason>", and clears
/// it. False when none. Thread-safe; the record is process-wide.
bool takeError(std::string &message);

/// The name of a cuBLAS status, e.g. "CUBLAS_STATUS_INVALID_VALUE".
const char *cublasStatusName(cublasStatus_t status);

/// The element types every template below is instantiated for, for an
/// X-macro.
#define FSDP_CUDA_ELEMENT_TYPES(X) X(float) X(__nv_bfloat16)

/// out[b,t,:] = wte[tokens[b,t],:] + wpe[t,:]; tokens in [0, V).
template <typename E>
void embeddingForward(const Context &ctx, E *out, const int32_t *tokens,
                      const E *wte, const E *wpe, int64_t B, int64_t T,
                      int64_t C);

/// dwte (V x C) and dwpe (Tmax x C) overwritten with the scatter-add of dout
/// (rows of dwpe past T are zero). Deterministic, without atomics: each row
/// of dwte is summed by one thread block in an order fixed by the tokens.
template <typename E>
void embeddingBackward(const Context &ctx, E *dwte, E *dwpe, const E *dout,
                       const int32_t *tokens, int64_t B, int64_t T, int64_t C,
                       int64_t V, int64_t Tmax);

/// out = (x - mean) * rstd * w + b over rows of C; mean, rstd (N) saved.
template <typename E>
void layerNormForward(const Context &ctx, E *out, float *mean, float *rstd,
                      const E *x, const E *w, const E *b, int64_t N, int64_t C,
                      float eps);

/// Overwrites dx (N x C), dw (C) and db (C); deterministic. dx must not
/// alias the inputs.
template <typename E>
void layerNormBackward(const Context &ctx, E *dx, E *dw, E *db, const E *dout,
                       const E *x, const E *w, const float *mean,
                       const float *rstd, int64_t N, int64_t C);

/// out (N x OC) = x (N x IC) * w^T (w is OC x IC) + bias (OC; may be null).
template <typename E>
void linearForward(const Context &ctx, E *out, const E *x, const E *w,
                   const E *bias, int64_t N, int64_t IC, int64_t OC);

/// dx (N x IC) = dout (N x OC) * w (OC x IC).
template <typename E>
void linearGradInput(const Context &ctx, E *dx, const E *dout, const E *w,
                     int64_t N, int64_t IC, int64_t OC);

/// dw (OC x IC) = dout^T (OC x N) * x (N x IC).
template <typename E>
void linearGradWeight(const Context &ctx, E *dw, const E *dout, const E *x,
                      int64_t N, int64_t IC, int64_t OC);

/// db (OC) = sum over rows of dout (N x OC); deterministic.
template <typename E>
void biasGrad(const Context &ctx, E *db, const E *dout, int64_t N, int64_t OC);

/// out = a + b over n elements (out may alias a or b).
template <typename E>
void add(const Context &ctx, E *out, const E *a, const E *b, int64_t n);

/// GELU, tanh approximation: 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))).
template <typename E>
void geluForward(const Context &ctx, E *out, const E *x, int64_t n);
template <typename E>
void geluBackward(const Context &ctx, E *dx, const E *dout, const E *x,
                  int64_t n);

template <typename E>
void reluForward(const Context &ctx, E *out, const E *x, int64_t n);
/// dx = dout where x > 0, else 0.
template <typename E>
void reluBackward(const Context &ctx, E *dx, const E *dout, const E *x,
                  int64_t n);

/// Causal self-attention; qkv is B x T x (C + 2 KV hs) (q | k | v), NH
/// query heads of hs = C / NH and KV key/value heads (KV divides NH; query
/// head h reads kv head h / (NH / KV); 3C when KV = NH). probs (B x NH x T x T)
/// = softmax(q k^T / sqrt(hs)) with exact zeros above the diagonal; out (B x T
/// x C) = probs v, heads concatenated. In bf16 the scores are rounded where
/// cuBLAS stores them into probs, and out is computed from the rounded probs
/// (as PyTorch's autocast does; the CPU's widened kernel keeps both in float).
template <typename E>
void attentionForward(const Context &ctx, E *out, E *probs, const E *qkv,
                      int64_t B, int64_t T, int64_t C, int64_t NH, int64_t KV);

/// dqkv (qkv's layout) from dout (B x T x C), qkv and the saved probs; a kv
/// head's dk and dv sum over its query heads.
/// `scratch` holds B x NH x T x T elements (the gradient of the scores; in
/// bf16, rounded there like the forward's scores).
template <typename E>
void attentionBackward(const Context &ctx, E *dqkv, E *scratch, const E *dout,
                       const E *qkv, const E *probs, int64_t B, int64_t T,
                       int64_t C, int64_t NH, int64_t KV);

/// The memory-efficient causal attention (FlashAttention-2), the twin of
/// cpu::blockedAttentionForward: out as attentionForward's (same qkv and
/// out layouts), and instead of probs the natural log-sum-exp of each query
/// row's scaled, causally masked scores, lse (B x NH x T):
///   lse[b,h,i] = log sum_{j<=i} exp(s_ij),  s_ij = q_i . k_j / sqrt(hs),
/// computed key tile by key tile with a running max m and sum l
/// (m' = max(m, max_j s_ij), l' = l exp(m - m') + sum_j exp(s_ij - m'),
/// the output accumulator rescaled by exp(m - m') likewise). No T x T
/// buffer and no allocation: tiles in shared memory, accumulators in
/// registers. hs = C / NH must be an integer in 1..128 (else an error is
/// recorded and nothing runs). Deterministic. In bf16 the tiles are
/// widened into shared memory and everything is float until out is stored.
template <typename E>
void blockedAttentionForward(const Context &ctx, E *out, float *lse,
                             const E *qkv, int64_t B, int64_t T, int64_t C,
                             int64_t NH, int64_t KV);

/// attentionBackward's dqkv (qkv's layout, every entry overwritten) from
/// dout, qkv, and the blocked forward's out and lse, recomputing the
/// probabilities tile by tile, p_ij = exp(s_ij - lse_i):
///   D_i = dO_i . O_i,  dS_ij = p_ij (dO_i . v_j - D_i),
///   dq_i = scale sum_j dS_ij k_j,  dk_j = scale sum_i dS_ij q_i,
///   dv_j = sum_i p_ij dO_i.
/// No scratch. Two passes (dk and dv per key tile, then dq per query tile)
/// instead of atomic adds, so every sum runs in a fixed order: the same
/// bits on every run. hs as in the forward.
template <typename E>
void blockedAttentionBackward(const Context &ctx, E *dqkv, const E *dout,
                              const E *qkv, const E *out, const float *lse,
                              int64_t B, int64_t T, int64_t C, int64_t NH,
                              int64_t KV);

/// *loss = mean over N rows of -log softmax(logits[row])[targets[row]],
/// deterministic. Without `rowScratch` the whole loss is computed by ONE
/// thread block (the only way to fix the summation order without memory to
/// hold partial sums): correct, but it runs on one SM, several milliseconds
/// at N = 4096, V = 50257. With `rowScratch` (N floats of device memory the
/// caller does not need afterwards) one block per row writes the row's loss
/// there and a second, one-block kernel sums them in order: as fast as the
/// memory allows, and equally deterministic (not bitwise the same value as
/// the one-block path).
template <typename E>
void crossEntropyForward(const Context &ctx, float *loss, const E *logits,
                         const int32_t *targets, int64_t N, int64_t V,
                         float *rowScratch = nullptr);

/// dlogits = dloss[0] * (softmax(logits) - onehot(targets)) / N; dloss is
/// read on the device.
template <typename E>
void crossEntropyBackward(const Context &ctx, E *dlogits, const float *dloss,
                          const E *logits, const int32_t *targets, int64_t N,
                          int64_t V);

/// AdamW step t >= 1, the update of cpu::adamw up to fused multiply-adds
/// (bias corrections computed on the host from `step`). fp32 only: the
/// master weights, their gradient shard and the moments. With `gradScale`
/// (a device scalar, gradient clipping's coefficient) on grad x scale.
void adamw(const Context &ctx, float *param, float *m, float *v,
           const float *grad, int64_t n, float lr, float beta1, float beta2,
           float eps, float weightDecay, int64_t step,
           const float *gradScale = nullptr);

/// Gradient clipping, as cpu::gradSqSum and cpu::clipCoefficient. The sum
/// of squares is in double and in an order fixed by n alone: up to
/// kGradSqSumBlocks blocks of kGradSqSumThreads threads (one per that many
/// elements) stride over grad, each block leaves its sum in `partials`
/// (one double per block: at most plan::kGradSqSumScratch floats), and one
/// block adds them, with *acc (when given), into *out. The coefficient is
/// computed on the device: nothing waits for the host.
inline constexpr int kGradSqSumBlocks = 256, kGradSqSumThreads = 256;
inline constexpr double kClipEpsilon = 1e-6;
template <typename E>
void gradSqSum(const Context &ctx, float *out, const E *grad, const float *acc,
               int64_t n, float *partials);
void clipCoefficient(const Context &ctx, float *coef, const float *sumSq,
                     double maxNorm);

/// out[i] = value (rounded to E) for n elements.
template <typename E>
void fill(const Context &ctx, E *out, int64_t n, float value);

/// data[i] *= scale for n elements, in place.
template <typename E>
void scale(const Context &ctx, E *data, int64_t n, float scale);

// Llama's ops, as the CPU's (cpu/Kernels.h); rstd is float always.

/// out = x * rstd * w over rows of C; rstd (N) saved.
template <typename E>
void rmsNormForward(const Context &ctx, E *out, float *rstd, const E *x,
                    const E *w, int64_t N, int64_t C, float eps);

/// dx (N x C) and dw (C) overwritten; dw by the deterministic column sum.
template <typename E>
void rmsNormBackward(const Context &ctx, E *dx, E *dw, const E *dout,
                     const E *x, const E *w, const float *rstd, int64_t N,
                     int64_t C);

/// out = silu(gate) * up for n elements.
template <typename E>
void swigluForward(const Context &ctx, E *out, const E *gate, const E *up,
                   int64_t n);

/// dgate = dout up s (1 + gate (1 - s)), dup = dout gate s, s = sigmoid(gate).
template <typename E>
void swigluBackward(const Context &ctx, E *dgate, E *dup, const E *dout,
                    const E *gate, const E *up, int64_t n);

/// Rotary embeddings of qkv (B x T x (H + 2 KV) hs), Hugging Face's
/// rotate-half; v copied. The backward turns by the opposite angle.
template <typename E>
void ropeForward(const Context &ctx, E *out, const E *qkv, int64_t B, int64_t T,
                 int64_t H, int64_t KV, int64_t hs, float theta);
template <typename E>
void ropeBackward(const Context &ctx, E *dqkv, const E *dout, int64_t B,
                  int64_t T, int64_t H, int64_t KV, int64_t hs, float theta);

/// The cast kernel: n elements widened (exact) or rounded to nearest even
/// (bit for bit runtime/include/fsdp/runtime/support/BFloat16.h's roundToBF16,
/// NaN included).
void cast(const Context &ctx, __nv_bfloat16 *out, const float *in, int64_t n);
void cast(const Context &ctx, float *out, const __nv_bfloat16 *in, int64_t n);

} // namespace fsdp::rt::cuda

#endif // FSDP_RUNTIME_CUDA_KERNELS_KERNELS_H
