//===- Elementwise.cu - add, GELU, ReLU, fill, scale, SwiGLU, rope --------===//
//
// The element-wise kernels are one grid-stride map over n elements, four
// at a time when every pointer is aligned to four elements (arena buffers
// are, views into them need not be) with a scalar tail, else in scalar
// loads (still coalesced). The operation is a functor of the (up to) two
// inputs, in float: elements are widened on load and rounded on store, so
// that a bf16 map is its float map rounded once. The cast kernel is the
// identity map between the two element types.
//
// GELU uses tanhf, the formula of the CPU backend's header; the CPU
// computes the same function as a sigmoid; the two agree to rounding in
// absolute terms (for x below about -3 the tanh form loses relative digits
// of a result that is itself tiny).
//
// The bias gradient is a column sum over rows: the deterministic column
// reduction of Common.cuh.
//
// SwiGLU's forward is a map of two inputs; its backward writes two
// outputs, a grid-stride loop of its own. Its sigmoid clamps the exponent
// at 88.3 as the CPU's expApprox does, so that 1 - s = s e never becomes
// 0 * inf for a very negative gate.
//
// Rotary embeddings: one thread per (row, head, pair) of q and k and per
// element of v (copied), each computing Hugging Face's inv_freq and angle
// in float, as the CPU does (powf, cosf, sinf: no fast intrinsics), with
// the rope scaling of runtime/include/fsdp/runtime/RopeScaling.h, the
// CPU's own definition.
//
//===----------------------------------------------------------------------===//

#include "Common.cuh"

#include "fsdp/runtime/RopeScaling.h"

namespace fsdp::rt::cuda {
namespace {

constexpr float kGeluK = 0.7978845608028654f; // sqrt(2 / pi)
constexpr float kGeluC = 0.044715f;

struct AddOp {
  __device__ float operator()(float a, float b) const { return a + b; }
};

struct GeluForwardOp {
  __device__ float operator()(float x, float) const {
    const float u = kGeluK * (x + kGeluC * x * x * x);
    return 0.5f * x * (1.0f + tanhf(u));
  }
};

struct GeluBackwardOp {
  // d/dx 0.5 x (1 + tanh(u)) = 0.5 (1 + t) + 0.5 x (1 - t^2) u'.
  __device__ float operator()(float dout, float x) const {
    const float x2 = x * x;
    const float u = kGeluK * (x + kGeluC * x2 * x);
    const float du = kGeluK * (1.0f + 3.0f * kGeluC * x2);
    const float t = tanhf(u);
    const float grad = 0.5f * (1.0f + t) + 0.5f * x * (1.0f - t * t) * du;
    return dout * grad;
  }
};

struct ReluForwardOp {
  // NaN passes through (NaN < 0 is false), as on the CPU.
  __device__ float operator()(float x, float) const {
    return x < 0.0f ? 0.0f : x;
  }
};

struct ReluBackwardOp {
  __device__ float operator()(float dout, float x) const {
    return x > 0.0f ? dout : 0.0f;
  }
};

struct FillOp {
  float value;
  __device__ float operator()(float, float) const { return value; }
};

struct ScaleOp {
  float factor;
  __device__ float operator()(float x, float) const { return x * factor; }
};

/// exp(-g) with the exponent clamped at 88.3 (NaN passes).
__device__ __forceinline__ float expNegClamped(float g) {
  const float x = -g;
  return expf(x > 88.3f ? 88.3f : x);
}

struct SwiGluForwardOp {
  __device__ float operator()(float g, float u) const {
    return g / (1.0f + expNegClamped(g)) * u;
  }
};

template <typename E>
__global__ void swigluBackwardKernel(E *__restrict__ dgate, E *__restrict__ dup,
                                     const E *__restrict__ dout,
                                     const E *__restrict__ gate,
                                     const E *__restrict__ up, int64_t n) {
  using detail::toFloat;
  const int64_t stride = int64_t(gridDim.x) * blockDim.x;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += stride) {
    const float d = toFloat(dout[i]), g = toFloat(gate[i]);
    const float e = expNegClamped(g);
    const float s = 1.0f / (1.0f + e);
    dup[i] = detail::fromFloat<E>(d * g * s);
    dgate[i] = detail::fromFloat<E>(d * toFloat(up[i]) * (s + g * s * (s * e)));
  }
}

/// Rotates the q and k pairs of every row by sign * angle, cos and sin
/// scaled by the scaling's factor (yarn's), and copies v.
template <typename E>
__global__ void ropeKernel(E *__restrict__ out, const E *__restrict__ in,
                           int64_t rows, int64_t T, int64_t H, int64_t KV,
                           int64_t hs, float theta, plan::RopeScaling sc,
                           float sign) {
  using detail::toFloat;
  const int64_t half = hs / 2, width = (H + 2 * KV) * hs;
  const int64_t pairs = (H + KV) * half, perRow = pairs + KV * hs;
  const int64_t stride = int64_t(gridDim.x) * blockDim.x;
  const float scale = plan::ropeCosSinScale(sc);
  for (int64_t j = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
       j < rows * perRow; j += stride) {
    const int64_t r = j / perRow, k = j % perRow;
    const E *x = in + r * width;
    E *o = out + r * width;
    if (k >= pairs) { // v: copied
      const int64_t at = (H + KV) * hs + (k - pairs);
      o[at] = x[at];
      continue;
    }
    const int64_t h = k / half, i = k % half;
    // Hugging Face's inv_freq (RopeScaling.h, shared with the CPU).
    const float invFreq = plan::ropeInvFreq(theta, i, hs, sc);
    const float angle = float(r % T) * invFreq;
    const float c = cosf(angle) * scale, sn = sign * (sinf(angle) * scale);
    const float x0 = toFloat(x[h * hs + i]), x1 = toFloat(x[h * hs + i + half]);
    o[h * hs + i] = detail::fromFloat<E>(x0 * c - x1 * sn);
    o[h * hs + i + half] = detail::fromFloat<E>(x1 * c + x0 * sn);
  }
}

template <typename E>
void launchRope(const Context &ctx, const char *where, E *out, const E *in,
                int64_t B, int64_t T, int64_t H, int64_t KV, int64_t hs,
                float theta, const plan::RopeScaling &sc, float sign) {
  const int64_t work = B * T * ((H + KV) * (hs / 2) + KV * hs);
  if (work <= 0)
    return;
  const int threads = 256;
  ropeKernel<<<detail::blocksFor(work, threads), threads, 0, ctx.stream>>>(
      out, in, B * T, T, H, KV, hs, theta, sc, sign);
  detail::checkLaunch(where);
}

/// out[i] = f(a[i], b[i]) reading NIn inputs (0: none, 1: a, 2: a and b).
/// out may alias a or b: each element is read before it is written, by the
/// same thread.
template <int NIn, class F, typename O, typename I>
__global__ void mapKernel(O *out, const I *a, const I *b, int64_t n, F f,
                          bool vec) {
  const int64_t stride = int64_t(gridDim.x) * blockDim.x;
  const int64_t tid = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  int64_t done = 0;
  if (vec) {
    const int64_t n4 = n / 4;
    for (int64_t i = tid; i < n4; i += stride) {
      detail::Quad<I> x{}, y{};
      detail::Quad<O> r;
      if constexpr (NIn >= 1)
        x = reinterpret_cast<const detail::Quad<I> *>(a)[i];
      if constexpr (NIn >= 2)
        y = reinterpret_cast<const detail::Quad<I> *>(b)[i];
#pragma unroll
      for (int k = 0; k < 4; ++k)
        r.v[k] = detail::fromFloat<O>(
            f(detail::toFloat(x.v[k]), detail::toFloat(y.v[k])));
      reinterpret_cast<detail::Quad<O> *>(out)[i] = r;
    }
    done = n4 * 4;
  }
  for (int64_t i = done + tid; i < n; i += stride) {
    const float x = NIn >= 1 ? detail::toFloat(a[i]) : 0.0f;
    const float y = NIn >= 2 ? detail::toFloat(b[i]) : 0.0f;
    out[i] = detail::fromFloat<O>(f(x, y));
  }
}

template <int NIn, class F, typename O, typename I>
void launchMap(const Context &ctx, const char *where, O *out, const I *a,
               const I *b, int64_t n, F f) {
  if (n <= 0)
    return;
  const bool vec = detail::quadAligned(out) &&
                   (NIn < 1 || detail::quadAligned(a)) &&
                   (NIn < 2 || detail::quadAligned(b));
  const int threads = 256;
  const unsigned blocks = detail::blocksFor(vec ? (n + 3) / 4 : n, threads);
  mapKernel<NIn, F, O, I>
      <<<blocks, threads, 0, ctx.stream>>>(out, a, b, n, f, vec);
  detail::checkLaunch(where);
}

struct IdentityOp {
  __device__ float operator()(float x, float) const { return x; }
};

} // namespace

/// out = a + b over n elements (out may alias a or b).
template <typename E>
void add(const Context &ctx, E *out, const E *a, const E *b, int64_t n) {
  launchMap<2>(ctx, "add", out, a, b, n, AddOp{});
}

/// GELU, tanh approximation: 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))).
template <typename E>
void geluForward(const Context &ctx, E *out, const E *x, int64_t n) {
  launchMap<1>(ctx, "geluForward", out, x, (const E *)nullptr, n,
               GeluForwardOp{});
}

template <typename E>
void geluBackward(const Context &ctx, E *dx, const E *dout, const E *x,
                  int64_t n) {
  launchMap<2>(ctx, "geluBackward", dx, dout, x, n, GeluBackwardOp{});
}

template <typename E>
void reluForward(const Context &ctx, E *out, const E *x, int64_t n) {
  launchMap<1>(ctx, "reluForward", out, x, (const E *)nullptr, n,
               ReluForwardOp{});
}

/// dx = dout where x > 0, else 0.
template <typename E>
void reluBackward(const Context &ctx, E *dx, const E *dout, const E *x,
                  int64_t n) {
  launchMap<2>(ctx, "reluBackward", dx, dout, x, n, ReluBackwardOp{});
}

/// out[i] = value (rounded to E) for n elements.
template <typename E>
void fill(const Context &ctx, E *out, int64_t n, float value) {
  launchMap<0>(ctx, "fill", out, (const E *)nullptr, (const E *)nullptr, n,
               FillOp{value});
}

template <typename E>
void scale(const Context &ctx, E *data, int64_t n, float factor) {
  launchMap<1>(ctx, "scale", data, data, (const E *)nullptr, n,
               ScaleOp{factor});
}

/// db (OC) = sum over rows of dout (N x OC); deterministic.
template <typename E>
void biasGrad(const Context &ctx, E *db, const E *dout, int64_t N, int64_t OC) {
  if (OC <= 0)
    return;
  detail::launchColumnSum<false>(ctx, "biasGrad", db, (E *)nullptr, dout,
                                 (const E *)nullptr, nullptr, nullptr, N, OC);
}

void cast(const Context &ctx, __nv_bfloat16 *out, const float *in, int64_t n) {
  launchMap<1>(ctx, "cast (f32 to bf16)", out, in, (const float *)nullptr, n,
               IdentityOp{});
}

void cast(const Context &ctx, float *out, const __nv_bfloat16 *in, int64_t n) {
  launchMap<1>(ctx, "cast (bf16 to f32)", out, in,
               (const __nv_bfloat16 *)nullptr, n, IdentityOp{});
}

/// out = silu(gate) * up for n elements.
template <typename E>
void swigluForward(const Context &ctx, E *out, const E *gate, const E *up,
                   int64_t n) {
  launchMap<2>(ctx, "swigluForward", out, gate, up, n, SwiGluForwardOp{});
}

/// dgate = dout up s (1 + gate (1 - s)), dup = dout gate s, s = sigmoid(gate).
template <typename E>
void swigluBackward(const Context &ctx, E *dgate, E *dup, const E *dout,
                    const E *gate, const E *up, int64_t n) {
  if (n <= 0)
    return;
  const int threads = 256;
  swigluBackwardKernel<<<detail::blocksFor(n, threads), threads, 0,
                         ctx.stream>>>(dgate, dup, dout, gate, up, n);
  detail::checkLaunch("swigluBackward");
}

/// Rotary embeddings of qkv (B x T x (H + 2 KV) hs), Hugging Face's
/// rotate-half with its rope scaling; v copied. The backward turns by the
/// opposite angle.
template <typename E>
void ropeForward(const Context &ctx, E *out, const E *qkv, int64_t B, int64_t T,
                 int64_t H, int64_t KV, int64_t hs, float theta,
                 int64_t scaling, double factor, double low_freq_factor,
                 double high_freq_factor, int64_t original_max_positions,
                 double attention_factor, double correction_low,
                 double correction_high) {
  launchRope(ctx, "ropeForward", out, qkv, B, T, H, KV, hs, theta,
             plan::ropeScalingOf(scaling, factor, low_freq_factor,
                                 high_freq_factor, original_max_positions,
                                 attention_factor, correction_low,
                                 correction_high),
             1.0f);
}

template <typename E>
void ropeBackward(const Context &ctx, E *dqkv, const E *dout, int64_t B,
                  int64_t T, int64_t H, int64_t KV, int64_t hs, float theta,
                  int64_t scaling, double factor, double low_freq_factor,
                  double high_freq_factor, int64_t original_max_positions,
                  double attention_factor, double correction_low,
                  double correction_high) {
  launchRope(ctx, "ropeBackward", dqkv, dout, B, T, H, KV, hs, theta,
             plan::ropeScalingOf(scaling, factor, low_freq_factor,
                                 high_freq_factor, original_max_positions,
                                 attention_factor, correction_low,
                                 correction_high),
             -1.0f);
}

#define FSDP_INSTANTIATE(E)                                                    \
  template void add<E>(const Context &, E *, const E *, const E *, int64_t);   \
  template void geluForward<E>(const Context &, E *, const E *, int64_t);      \
  template void geluBackward<E>(const Context &, E *, const E *, const E *,    \
                                int64_t);                                      \
  template void reluForward<E>(const Context &, E *, const E *, int64_t);      \
  template void reluBackward<E>(const Context &, E *, const E *, const E *,    \
                                int64_t);                                      \
  template void fill<E>(const Context &, E *, int64_t, float);                 \
  template void scale<E>(const Context &, E *, int64_t, float);                \
  template void biasGrad<E>(const Context &, E *, const E *, int64_t,          \
                            int64_t);                                          \
  template void swigluForward<E>(const Context &, E *, const E *, const E *,   \
                                 int64_t);                                     \
  template void swigluBackward<E>(const Context &, E *, E *, const E *,        \
                                  const E *, const E *, int64_t);              \
  template void ropeForward<E>(const Context &, E *, const E *, int64_t,       \
                               int64_t, int64_t, int64_t, int64_t, float,      \
                               int64_t, double, double, double, int64_t,       \
                               double, double, double);                        \
  template void ropeBackward<E>(const Context &, E *, const E *, int64_t,      \
                                int64_t, int64_t, int64_t, int64_t, float,     \
                                int64_t, double, double, double, int64_t,      \
                                double, double, double);
FSDP_CUDA_ELEMENT_TYPES(FSDP_INSTANTIATE)
#undef FSDP_INSTANTIATE

} // namespace fsdp::rt::cuda
