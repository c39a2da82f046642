//===- Kernels.h - the CUDA backend's kernels -------------------*- C++ -*-===//
//
// The same kernels as src/cpu/Kernels.h, with the same semantics, shapes and
// argument order, on the GPU: fp32, row-major, every output overwritten
// (never accumulated into). All pointers are device pointers. Nothing here
// synchronises with the host or allocates: every launch, memset and cuBLAS
// call goes on ctx.stream, in order.
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

/// out[b,t,:] = wte[tokens[b,t],:] + wpe[t,:]; tokens in [0, V).
void embeddingForward(const Context &ctx, float *out, const int32_t *tokens,
                      const float *wte, const float *wpe, int64_t B, int64_t T,
                      int64_t C);

/// dwte (V x C) and dwpe (Tmax x C) overwritten with the scatter-add of dout
/// (rows of dwpe past T are zero). Deterministic, without atomics: each row
/// of dwte is summed by one thread block in an order fixed by the tokens.
void embeddingBackward(const Context &ctx, float *dwte, float *dwpe,
                       const float *dout, const int32_t *tokens, int64_t B,
                       int64_t T, int64_t C, int64_t V, int64_t Tmax);

/// out = (x - mean) * rstd * w + b over rows of C; mean, rstd (N) saved.
void layerNormForward(const Context &ctx, float *out, float *mean, float *rstd,
                      const float *x, const float *w, const float *b, int64_t N,
                      int64_t C, float eps);

/// Overwrites dx (N x C), dw (C) and db (C); deterministic. dx must not
/// alias the inputs.
void layerNormBackward(const Context &ctx, float *dx, float *dw, float *db,
                       const float *dout, const float *x, const float *w,
                       const float *mean, const float *rstd, int64_t N,
                       int64_t C);

/// out (N x OC) = x (N x IC) * w^T (w is OC x IC) + bias (OC; may be null).
void linearForward(const Context &ctx, float *out, const float *x,
                   const float *w, const float *bias, int64_t N, int64_t IC,
                   int64_t OC);

/// dx (N x IC) = dout (N x OC) * w (OC x IC).
void linearGradInput(const Context &ctx, float *dx, const float *dout,
                     const float *w, int64_t N, int64_t IC, int64_t OC);

/// dw (OC x IC) = dout^T (OC x N) * x (N x IC).
void linearGradWeight(const Context &ctx, float *dw, const float *dout,
                      const float *x, int64_t N, int64_t IC, int64_t OC);

/// db (OC) = sum over rows of dout (N x OC); deterministic.
void biasGrad(const Context &ctx, float *db, const float *dout, int64_t N,
              int64_t OC);

/// out = a + b over n elements (out may alias a or b).
void add(const Context &ctx, float *out, const float *a, const float *b,
         int64_t n);

/// GELU, tanh approximation: 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))).
void geluForward(const Context &ctx, float *out, const float *x, int64_t n);
void geluBackward(const Context &ctx, float *dx, const float *dout,
                  const float *x, int64_t n);

void reluForward(const Context &ctx, float *out, const float *x, int64_t n);
/// dx = dout where x > 0, else 0.
void reluBackward(const Context &ctx, float *dx, const float *dout,
                  const float *x, int64_t n);

/// Causal self-attention; qkv is B x T x 3C (q | k | v), NH heads of
/// hs = C / NH. probs (B x NH x T x T) = softmax(q k^T / sqrt(hs)) with exact
/// zeros above the diagonal; out (B x T x C) = probs v, heads concatenated.
void attentionForward(const Context &ctx, float *out, float *probs,
                      const float *qkv, int64_t B, int64_t T, int64_t C,
                      int64_t NH);

/// dqkv (B x T x 3C) from dout (B x T x C), qkv and the saved probs.
/// `scratch` holds B x NH x T x T floats (the gradient of the scores).
void attentionBackward(const Context &ctx, float *dqkv, float *scratch,
                       const float *dout, const float *qkv, const float *probs,
                       int64_t B, int64_t T, int64_t C, int64_t NH);

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
/// recorded and nothing runs). Deterministic.
void blockedAttentionForward(const Context &ctx, float *out, float *lse,
                             const float *qkv, int64_t B, int64_t T, int64_t C,
                             int64_t NH);

/// attentionBackward's dqkv (B x T x 3C, every entry overwritten) from
/// dout, qkv, and the blocked forward's out and lse, recomputing the
/// probabilities tile by tile, p_ij = exp(s_ij - lse_i):
///   D_i = dO_i . O_i,  dS_ij = p_ij (dO_i . v_j - D_i),
///   dq_i = scale sum_j dS_ij k_j,  dk_j = scale sum_i dS_ij q_i,
///   dv_j = sum_i p_ij dO_i.
/// No scratch. Two passes (dk and dv per key tile, then dq per query tile)
/// instead of atomic adds, so every sum runs in a fixed order: the same
/// bits on every run. hs as in the forward.
void blockedAttentionBackward(const Context &ctx, float *dqkv,
                              const float *dout, const float *qkv,
                              const float *out, const float *lse, int64_t B,
                              int64_t T, int64_t C, int64_t NH);

/// *loss = mean over N rows of -log softmax(logits[row])[targets[row]],
/// deterministic. Without `rowScratch` the whole loss is computed by ONE
/// thread block (the only way to fix the summation order without memory to
/// hold partial sums): correct, but it runs on one SM, several milliseconds
/// at N = 4096, V = 50257. With `rowScratch` (N floats of device memory the
/// caller does not need afterwards) one block per row writes the row's loss
/// there and a second, one-block kernel sums them in order: as fast as the
/// memory allows, and equally deterministic (not bitwise the same value as
/// the one-block path).
void crossEntropyForward(const Context &ctx, float *loss, const float *logits,
                         const int32_t *targets, int64_t N, int64_t V,
                         float *rowScratch = nullptr);

/// dlogits = dloss[0] * (softmax(logits) - onehot(targets)) / N; dloss is
/// read on the device.
void crossEntropyBackward(const Context &ctx, float *dlogits,
                          const float *dloss, const float *logits,
                          const int32_t *targets, int64_t N, int64_t V);

/// AdamW step t >= 1, the update of cpu::adamw up to fused multiply-adds
/// (bias corrections computed on the host from `step`).
void adamw(const Context &ctx, float *param, float *m, float *v,
           const float *grad, int64_t n, float lr, float beta1, float beta2,
           float eps, float weightDecay, int64_t step);

/// out[i] = value for n elements.
void fill(const Context &ctx, float *out, int64_t n, float value);

/// data[i] *= scale for n elements, in place (the reduce-scatter's mean).
void scale(const Context &ctx, float *data, int64_t n, float scale);

} // namespace fsdp::rt::cuda

#endif // FSDP_RUNTIME_CUDA_KERNELS_KERNELS_H
