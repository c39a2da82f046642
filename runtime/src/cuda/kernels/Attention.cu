//===- Attention.cu - causal multi-head self-attention --------------------===//
//
// The products are cuBLAS strided-batched GEMMs over (batch, head), reading
// q, k, v and writing dq, dk, dv in place in the B x T x 3C layout through
// row strides (ld = 3C; head h starts hs floats after head h - 1), with
// exactly the row-major arguments of the CPU backend's Blas::sgemm calls
// (src/cpu/Attention.cpp), causal row blocks included: rows i0..i1 of a
// block (kCausalBlock = 256 rows) only multiply against columns 0..i1, and
// dk, dv of those rows only against rows i0..T (37.5% fewer flops at
// T = 1024; for T <= 256 there is one block, the plain T x T products).
// rowGemmBatched (Linear.cu) issues min(B, NH) cuBLAS calls per product and
// row block, each batched over the other level. With one block (i0 = 0,
// i1 = T), per call batched over heads (strides in floats; over b they are
// T*3C, T*C and NH*T*T):
//
//   S  = scale q k^T  Sgemm(T, N, m=T,  n=T,  k=hs, A=k  ld 3C  stride hs,
//                           B=q  ld 3C stride hs,   C=probs ld T stride T*T)
//   O  = P v          Sgemm(N, N, m=hs, n=T,  k=T,  A=v  ld 3C  stride hs,
//                           B=P  ld T  stride T*T,  C=out   ld C stride hs)
//   dP = dO v^T       Sgemm(T, N, m=T,  n=T,  k=hs, A=v  ld 3C  stride hs,
//                           B=dO ld C  stride hs,   C=dS    ld T stride T*T)
//   dq = scale dS k   Sgemm(N, N, m=hs, n=T,  k=T,  A=k  ld 3C  stride hs,
//                           B=dS ld T  stride T*T,  C=dq    ld 3C stride hs)
//   dk = scale dS^T q Sgemm(N, T, m=hs, n=T,  k=T,  A=q  ld 3C  stride hs,
//                           B=dS ld T  stride T*T,  C=dk    ld 3C stride hs)
//   dv = P^T dO       Sgemm(N, T, m=hs, n=T,  k=T,  A=dO ld C   stride hs,
//                           B=P  ld T  stride T*T,  C=dv    ld 3C stride hs)
//
// (A, B: cuBLAS's first and second operand; for a row block, n becomes
// i1 - i0, the scores' m and the P v / dq k become i1, the dk / dv k
// becomes T - i0, and the pointers move to the block's first row.) The
// outputs of different heads interleave in memory (ldc > m) but never
// overlap, which cuBLAS allows.
//
// Grouped-query attention (KV kv heads, each serving g = NH / KV query
// heads): qkv's rows are ld = C + 2 KV hs wide, k starts at C and v at
// C + KV hs. Every product above runs once per position j in a group,
// batched over (b, kv head): the query head kh g + j, whose q, out and
// probs are g hs and g T^2 apart from the next kv head's, and the kv
// head's k, v, dk, dv, hs apart. dk and dv sum over the group: j = 0
// writes them (beta = 0), the others add (beta = 1), in order on the
// stream. With g = 1 these are the calls above. In bf16 the group's sum is
// rounded once per query head.
//
// The softmax runs one warp per row of T scores, an online (max, sum of
// exp) pass over the causal prefix, then a pass that writes the
// probabilities and zeros over the rest of the row (including what the
// blocked product left unwritten). Its backward, also a warp per row,
// computes dS = P (dP - sum(dP P)) in place in the scratch (the 1/sqrt(hs)
// is the alpha of the dq and dk products, as on the CPU), zero above the
// diagonal; the products below read only entries that were written.
//
// A sliding window of W keys (query i sees keys i - W < j <= i; W = 0:
// none) only masks, as on the CPU: the products stay the causal ones, and
// both softmax kernels write zeros before the window too.
//
// In bf16 the products are cublasGemmStridedBatchedEx (bf16 operands, fp32
// sums) and the T x T matrices are bf16 like every Float operand: the
// scores and dP are rounded where cuBLAS stores them, the softmax and its
// backward widen them, compute in float and round P and dS once. That is
// PyTorch autocast's materialized attention; the CPU's widened kernel
// keeps those intermediates in float, so the two differ by a few bf16
// units in the last place (the blocked form, all in float inside, does not).
//
//===----------------------------------------------------------------------===//

#include "Common.cuh"

#include <cmath>

namespace fsdp::rt::cuda {
namespace {

constexpr int kRowThreads = 256; // 8 rows per block

/// Rows per causal block of the products (as kCausalBlock on the CPU).
constexpr int64_t kCausalBlock = 256;

/// The end (exclusive) of the row block that starts at i0.
inline int64_t blockEnd(int64_t i0, int64_t T) {
  return i0 + kCausalBlock < T ? i0 + kCausalBlock : T;
}

template <typename E>
__global__ void __launch_bounds__(kRowThreads)
    causalSoftmaxKernel(E *__restrict__ probs, int64_t rows, int64_t T,
                        int64_t W) {
  using detail::toFloat;
  const int lane = threadIdx.x & 31;
  const int64_t r = (int64_t(blockIdx.x) * blockDim.x + threadIdx.x) >> 5;
  if (r >= rows)
    return;
  // Columns lo <= j <= i: the window's, below the diagonal.
  const int64_t n = r % T + 1, lo = detail::windowStart(r % T, W);
  E *p = probs + r * T;
  detail::MaxSum acc = detail::maxSumEmpty();
  for (int64_t j = lo + lane; j < n; j += 32)
    detail::maxSumAdd(acc, toFloat(p[j]));
  acc = detail::warpMaxSum(acc);
  const float inv = 1.0f / acc.s;
  for (int64_t j = lane; j < T; j += 32)
    p[j] = detail::fromFloat<E>(
        j >= lo && j < n ? __expf(toFloat(p[j]) - acc.m) * inv : 0.0f);
}

template <typename E>
__global__ void __launch_bounds__(kRowThreads)
    causalSoftmaxBackwardKernel(E *__restrict__ dscores,
                                const E *__restrict__ probs, int64_t rows,
                                int64_t T, int64_t W) {
  using detail::toFloat;
  const int lane = threadIdx.x & 31;
  const int64_t r = (int64_t(blockIdx.x) * blockDim.x + threadIdx.x) >> 5;
  if (r >= rows)
    return;
  const int64_t n = r % T + 1, lo = detail::windowStart(r % T, W);
  const E *p = probs + r * T;
  E *d = dscores + r * T;
  float dot = 0.0f;
  for (int64_t j = lo + lane; j < n; j += 32)
    dot += toFloat(d[j]) * toFloat(p[j]);
  dot = detail::warpSum(dot);
  for (int64_t j = lane; j < T; j += 32)
    d[j] = detail::fromFloat<E>(
        j >= lo && j < n ? toFloat(p[j]) * (toFloat(d[j]) - dot) : 0.0f);
}

unsigned rowBlocks(int64_t rows) {
  return unsigned((rows * 32 + kRowThreads - 1) / kRowThreads);
}

/// The qkv layout and the strides between kv heads of one group position.
struct Layout {
  int64_t hs, ld, TT, KV, g; // g query heads per kv head
  Layout(int64_t C, int64_t T, int64_t NH, int64_t KV)
      : hs(C / NH), ld(C + 2 * KV * (C / NH)), TT(T * T), KV(KV), g(NH / KV) {}
};

/// dq = scale dS k, dk = scale dS^T q and dv = P^T dO of causal row block
/// i0..i1 for group position j (dk and dv written for j = 0, added to by
/// the others).
template <typename E>
void backwardProducts(const Context &ctx, const Layout &L, E *dqkv, const E *dS,
                      const E *dout, const E *qkv, const E *probs, int64_t B,
                      int64_t T, int64_t C, int64_t NH, int64_t i0, int64_t i1,
                      int64_t j, float scale) {
  const int64_t hs = L.hs, ld = L.ld, TT = L.TT, g = L.g, KV = L.KV;
  const int64_t q = j * hs, k = C, v = C + KV * hs, P = j * TT;
  const float beta = j == 0 ? 0.0f : 1.0f;
  // Rows i0..i1 of dq see columns 0..i1 of dS.
  detail::rowGemmBatched(ctx, "attentionBackward (dS k)", false, false, i1 - i0,
                         hs, i1, scale, dS + P + i0 * T, T, NH * TT, g * TT,
                         qkv + k, ld, T * ld, hs, 0.0f, dqkv + q + i0 * ld, ld,
                         T * ld, g * hs, B, KV);
  // Rows i0..i1 of dk and dv (columns of dS and P) see the rows i0..T
  // below the diagonal.
  detail::rowGemmBatched(ctx, "attentionBackward (dS^T q)", true, false,
                         i1 - i0, hs, T - i0, scale, dS + P + i0 * T + i0, T,
                         NH * TT, g * TT, qkv + q + i0 * ld, ld, T * ld, g * hs,
                         beta, dqkv + k + i0 * ld, ld, T * ld, hs, B, KV);
  detail::rowGemmBatched(ctx, "attentionBackward (P^T dO)", true, false,
                         i1 - i0, hs, T - i0, 1.0f, probs + P + i0 * T + i0, T,
                         NH * TT, g * TT, dout + q + i0 * C, C, T * C, g * hs,
                         beta, dqkv + v + i0 * ld, ld, T * ld, hs, B, KV);
}

} // namespace

/// Causal self-attention; qkv is B x T x (C + 2 KV hs) (q | k | v), NH
/// query heads of hs = C / NH and KV key/value heads (KV divides NH; query
/// head h reads kv head h / (NH / KV); 3C when KV = NH). probs (B x NH x T x T)
/// = softmax(q k^T / sqrt(hs)) with exact zeros above the diagonal; out (B x T
/// x C) = probs v, heads concatenated; with a sliding window W > 0 row i's
/// probabilities are over keys i - W < j <= i (zeros before). In bf16 the
/// scores are rounded where
/// cuBLAS stores them into probs, and out is computed from the rounded probs
/// (as PyTorch's autocast does; the CPU's widened kernel keeps both in float).
template <typename E>
void attentionForward(const Context &ctx, E *out, E *probs, const E *qkv,
                      int64_t B, int64_t T, int64_t C, int64_t NH, int64_t KV,
                      int64_t W) {
  if (B <= 0 || T <= 0 || NH <= 0 || KV <= 0)
    return;
  const Layout L(C, T, NH, KV);
  const int64_t hs = L.hs, ld = L.ld, TT = L.TT, g = L.g;
  const float scale = 1.0f / std::sqrt(float(hs));
  const E *k = qkv + C, *v = qkv + C + KV * hs;

  // S = scale q k^T into probs, for each row block up to the block's end.
  for (int64_t i0 = 0; i0 < T; i0 += kCausalBlock) {
    const int64_t i1 = blockEnd(i0, T);
    for (int64_t j = 0; j < g; ++j)
      detail::rowGemmBatched(
          ctx, "attentionForward (q k^T)", false, true, i1 - i0, i1, hs, scale,
          qkv + j * hs + i0 * ld, ld, T * ld, g * hs, k, ld, T * ld, hs, 0.0f,
          probs + j * TT + i0 * T, T, NH * TT, g * TT, B, KV);
  }

  const int64_t rows = B * NH * T;
  causalSoftmaxKernel<<<rowBlocks(rows), kRowThreads, 0, ctx.stream>>>(
      probs, rows, T, W);
  detail::checkLaunch("attentionForward (softmax)");

  // out = P v, heads side by side.
  for (int64_t i0 = 0; i0 < T; i0 += kCausalBlock) {
    const int64_t i1 = blockEnd(i0, T);
    for (int64_t j = 0; j < g; ++j)
      detail::rowGemmBatched(ctx, "attentionForward (P v)", false, false,
                             i1 - i0, hs, i1, 1.0f, probs + j * TT + i0 * T, T,
                             NH * TT, g * TT, v, ld, T * ld, hs, 0.0f,
                             out + j * hs + i0 * C, C, T * C, g * hs, B, KV);
  }
}

/// dqkv (qkv's layout) from dout (B x T x C), qkv and the saved probs; a kv
/// head's dk and dv sum over its query heads; W is the forward's window.
/// `scratch` holds B x NH x T x T elements (the gradient of the scores; in
/// bf16, rounded there like the forward's scores).
template <typename E>
void attentionBackward(const Context &ctx, E *dqkv, E *scratch, const E *dout,
                       const E *qkv, const E *probs, int64_t B, int64_t T,
                       int64_t C, int64_t NH, int64_t KV, int64_t W) {
  if (B <= 0 || T <= 0 || NH <= 0 || KV <= 0)
    return;
  const Layout L(C, T, NH, KV);
  const int64_t hs = L.hs, ld = L.ld, TT = L.TT, g = L.g;
  const float scale = 1.0f / std::sqrt(float(hs));
  const E *v = qkv + C + KV * hs;

  // dP = dO v^T into scratch, row blocks as in the forward.
  for (int64_t i0 = 0; i0 < T; i0 += kCausalBlock) {
    const int64_t i1 = blockEnd(i0, T);
    for (int64_t j = 0; j < g; ++j)
      detail::rowGemmBatched(
          ctx, "attentionBackward (dO v^T)", false, true, i1 - i0, i1, hs, 1.0f,
          dout + j * hs + i0 * C, C, T * C, g * hs, v, ld, T * ld, hs, 0.0f,
          scratch + j * TT + i0 * T, T, NH * TT, g * TT, B, KV);
  }

  // dS = P (dP - rowsum(dP P)) in place, zero above the diagonal.
  const int64_t rows = B * NH * T;
  causalSoftmaxBackwardKernel<<<rowBlocks(rows), kRowThreads, 0, ctx.stream>>>(
      scratch, probs, rows, T, W);
  detail::checkLaunch("attentionBackward (softmax)");

  // dq, dk, dv. Every row of every head's dq is written once with beta = 0,
  // and every row of a kv head's dk and dv once with beta = 0 then added to
  // by the rest of its group, which overwrites all of dqkv.
  for (int64_t i0 = 0; i0 < T; i0 += kCausalBlock)
    for (int64_t j = 0; j < g; ++j)
      backwardProducts(ctx, L, dqkv, scratch, dout, qkv, probs, B, T, C, NH, i0,
                       blockEnd(i0, T), j, scale);
}

#define FSDP_INSTANTIATE(E)                                                    \
  template void attentionForward<E>(const Context &, E *, E *, const E *,      \
                                    int64_t, int64_t, int64_t, int64_t,        \
                                    int64_t, int64_t);                         \
  template void attentionBackward<E>(const Context &, E *, E *, const E *,     \
                                     const E *, const E *, int64_t, int64_t,   \
                                     int64_t, int64_t, int64_t, int64_t);
FSDP_CUDA_ELEMENT_TYPES(FSDP_INSTANTIATE)
#undef FSDP_INSTANTIATE

} // namespace fsdp::rt::cuda
