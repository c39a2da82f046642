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

/// out[b,t,:] = wte[tokens[b,t],:] + wpe[t,:]. Tokens are in [0, V) (the
/// runtime validates data before it reaches a kernel).
void embeddingForward(float *out, const int32_t *tokens, const float *wte,
                      const float *wpe, int64_t B, int64_t T, int64_t C);

/// dwte (V x C) and dwpe (Tmax x C) are zeroed, then dwte[tokens[b,t]] +=
/// dout[b,t] and dwpe[t] += dout[b,t]. Rows of dwpe past T stay zero.
void embeddingBackward(float *dwte, float *dwpe, const float *dout,
                       const int32_t *tokens, int64_t B, int64_t T, int64_t C,
                       int64_t V, int64_t Tmax);

/// out = (x - mean) * rstd * w + b over rows of C; mean and rstd (N) are
/// saved for the backward. rstd = 1 / sqrt(var + eps), var biased.
void layerNormForward(float *out, float *mean, float *rstd, const float *x,
                      const float *w, const float *b, int64_t N, int64_t C,
                      float eps);

/// Overwrites dx (N x C), dw (C) and db (C).
void layerNormBackward(float *dx, float *dw, float *db, const float *dout,
                       const float *x, const float *w, const float *mean,
                       const float *rstd, int64_t N, int64_t C);

/// out (N x OC) = x (N x IC) * w^T (w is OC x IC) + bias (OC; may be null).
void linearForward(const Blas &blas, float *out, const float *x, const float *w,
                   const float *bias, int64_t N, int64_t IC, int64_t OC);

/// dx (N x IC) = dout (N x OC) * w (OC x IC).
void linearGradInput(const Blas &blas, float *dx, const float *dout,
                     const float *w, int64_t N, int64_t IC, int64_t OC);

/// dw (OC x IC) = dout^T (OC x N) * x (N x IC).
void linearGradWeight(const Blas &blas, float *dw, const float *dout,
                      const float *x, int64_t N, int64_t IC, int64_t OC);

/// db (OC) = sum over rows of dout (N x OC).
void biasGrad(float *db, const float *dout, int64_t N, int64_t OC);

/// out = a + b over n elements (out may alias a or b).
void add(float *out, const float *a, const float *b, int64_t n);

/// GELU, tanh approximation (GPT-2):
/// 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))).
void geluForward(float *out, const float *x, int64_t n);
void geluBackward(float *dx, const float *dout, const float *x, int64_t n);

void reluForward(float *out, const float *x, int64_t n);
/// dx = dout where x > 0, else 0.
void reluBackward(float *dx, const float *dout, const float *x, int64_t n);

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

/// Causal self-attention. qkv is B x T x (C + 2 KV hs) with q (NH heads of
/// size hs = C / NH), k and v (KV heads each) side by side: 3C when
/// KV = NH. Query head h reads kv head h / (NH / KV) (grouped-query
/// attention; KV divides NH). probs (B x NH x T x T) receives softmax(q
/// k^T / sqrt(hs)) with zeros above the diagonal; out (B x T x C) = probs
/// v, heads concatenated.
void attentionForward(const Blas &blas, float *out, float *probs,
                      const float *qkv, int64_t B, int64_t T, int64_t C,
                      int64_t NH, int64_t KV);

/// dqkv (qkv's layout) from dout (B x T x C), qkv and the saved probs; a
/// kv head's dk and dv sum over the NH / KV query heads it serves.
/// `scratch` holds B x NH x T x T floats for the gradient of the scores.
void attentionBackward(const Blas &blas, float *dqkv, float *scratch,
                       const float *dout, const float *qkv, const float *probs,
                       int64_t B, int64_t T, int64_t C, int64_t NH, int64_t KV);

/// Rows of keys per block in the blocked attention kernels: the k and v
/// rows of a block (2 x 64 x hs floats) stay in cache while every query
/// row of a block uses them.
constexpr int64_t kAttentionBlock = 64;

/// The same attention without the probabilities (FlashAttention-2): out
/// as attentionForward's, and lse (B x NH x T) the natural log-sum-exp of
/// each query row's scaled, causally masked scores,
///   lse[b,h,i] = log sum_{j<=i} exp(s_ij),  s_ij = q_i . k_j / sqrt(hs),
/// computed key block by key block with a running max m and sum l
/// (m' = max(m, max_j s_ij), l' = l exp(m - m') + sum_j exp(s_ij - m'),
/// the output accumulator rescaled by exp(m - m') likewise). No T x T
/// buffer; beyond out and lse a few tens of KiB of stack per thread
/// (BlockedAttention.cpp).
void blockedAttentionForward(const Blas &blas, float *out, float *lse,
                             const float *qkv, int64_t B, int64_t T, int64_t C,
                             int64_t NH, int64_t KV);

/// attentionBackward's dqkv from dout, qkv, the forward's out and lse,
/// recomputing the probabilities block by block, p_ij = exp(s_ij - lse_i):
///   D_i = dO_i . O_i,  dS_ij = p_ij (dO_i . v_j - D_i),
///   dq_i = scale sum_j dS_ij k_j,  dk_j = scale sum_i dS_ij q_i,
///   dv_j = sum_i p_ij dO_i.
/// With KV < NH, dk_j and dv_j also sum over the query heads of the group.
/// No scratch; the sums run in a fixed order (no atomics), so the result
/// does not depend on the thread count.
void blockedAttentionBackward(const Blas &blas, float *dqkv, const float *dout,
                              const float *qkv, const float *out,
                              const float *lse, int64_t B, int64_t T, int64_t C,
                              int64_t NH, int64_t KV);

/// *loss = mean over N rows of -log softmax(logits[row])[targets[row]].
void crossEntropyForward(float *loss, const float *logits,
                         const int32_t *targets, int64_t N, int64_t V);

/// dlogits = dloss * (softmax(logits) - onehot(targets)) / N.
void crossEntropyBackward(float *dlogits, const float *dloss,
                          const float *logits, const int32_t *targets,
                          int64_t N, int64_t V);

/// AdamW (decoupled weight decay), step t >= 1:
///   m = b1 m + (1 - b1) g;  v = b2 v + (1 - b2) g^2
///   mhat = m / (1 - b1^t);  vhat = v / (1 - b2^t)
///   p -= lr (mhat / (sqrt(vhat) + eps) + wd p)
/// with g = grad[i] * *gradScale where gradScale is given (gradient
/// clipping's coefficient), grad[i] otherwise (the same operations with a
/// scale of 1: x * 1 is x, bit for bit).
void adamw(float *param, float *m, float *v, const float *grad, int64_t n,
           float lr, float beta1, float beta2, float eps, float weightDecay,
           int64_t step, const float *gradScale = nullptr);

/// Gradient clipping's sum of squares: *out = acc + sum over i < n of
/// grad[i]^2 (acc = *acc, or 0 without one), in double, rounded to f32
/// once. The order is fixed by n alone (kGradSqSumParts parts, each
/// summed in 8 lanes, then the parts in order), not by the thread count.
inline constexpr int64_t kGradSqSumParts = 64;
void gradSqSum(float *out, const float *grad, const float *acc, int64_t n);

/// Gradient clipping's coefficient (PyTorch's clip_grad_norm_): *coef =
/// min(1, maxNorm / (sqrt(*sumSq) + plan::kClipEpsilon)), in double,
/// rounded to f32; exactly 1 where the norm is below maxNorm, NaN for a
/// NaN sum.
void clipCoefficient(float *coef, const float *sumSq, double maxNorm);

/// out[i] = value for n elements.
void fill(float *out, int64_t n, float value);

// Llama's ops.

/// out = x * rstd * w over rows of C, rstd = 1 / sqrt(mean(x^2) + eps)
/// saved (N) for the backward.
void rmsNormForward(float *out, float *rstd, const float *x, const float *w,
                    int64_t N, int64_t C, float eps);

/// Overwrites dx (N x C) and dw (C): with n = x rstd and dn = w dout,
/// dx = rstd (dn - n mean(dn n)) per row, dw = sum over rows of dout n.
void rmsNormBackward(float *dx, float *dw, const float *dout, const float *x,
                     const float *w, const float *rstd, int64_t N, int64_t C);

/// out = silu(gate) * up = gate sigmoid(gate) up, for n elements.
void swigluForward(float *out, const float *gate, const float *up, int64_t n);

/// With s = sigmoid(gate): dgate = dout up s (1 + gate (1 - s)) and
/// dup = dout gate s.
void swigluBackward(float *dgate, float *dup, const float *dout,
                    const float *gate, const float *up, int64_t n);

/// Rotary embeddings, Hugging Face's rotate-half: qkv is B x T x (H + 2 KV)
/// hs (H query heads, KV key heads, KV value heads). In every q and k head
/// the pair (i, i + hs/2), i < hs/2, at position t turns by the angle
/// a = t inv_freq[i], inv_freq[i] = 1 / theta^(2i/hs) (both in float, as
/// Hugging Face computes them): out[i] = x[i] cos a - x[i + hs/2] sin a,
/// out[i + hs/2] = x[i + hs/2] cos a + x[i] sin a. v is copied.
void ropeForward(float *out, const float *qkv, int64_t B, int64_t T, int64_t H,
                 int64_t KV, int64_t hs, float theta);

/// The gradient of ropeForward: dout turned back by -a (a rotation's
/// transpose), v's gradient copied.
void ropeBackward(float *dqkv, const float *dout, int64_t B, int64_t T,
                  int64_t H, int64_t KV, int64_t hs, float theta);

} // namespace fsdp::rt::cpu

#endif // FSDP_RUNTIME_CPU_KERNELS_H
