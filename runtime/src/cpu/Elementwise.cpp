//===- Elementwise.cpp - add, GELU, ReLU, fill, SwiGLU, rope --------------===//
//
// Flat loops over n elements. Each is one `parallel for simd`: OpenMP splits
// the range into contiguous chunks and the compiler vectorises each chunk.
// Below kParallelMin elements the loop runs on the calling thread, where a
// parallel region would cost more than the work.
//
// GELU needs tanh, which glibc only vectorises under -ffast-math (the
// library is built without it), so it is written as a sigmoid,
// 0.5 (1 + tanh(u)) = 1 / (1 + exp(-2u)), over a polynomial exp that the
// compiler vectorises. SwiGLU's sigmoid is written over the same exp.
// GELU's bf16 kernels widen and round each element in the same loop.
//
// Rotary embeddings work per row (one position): the pair (i, i + hs/2)
// of every q and k head turns by the same angle, so each row computes its
// hs/2 cosines and sines once and applies them to all of its heads.
//
//===----------------------------------------------------------------------===//

#include "BF16Kernels.h"
#include "Kernels.h"
#include "VectorMath.h"

#include "fsdp/runtime/RopeScaling.h"
#include "fsdp/runtime/support/BFloat16.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

namespace fsdp::rt::cpu {
namespace {

constexpr int64_t kParallelMin = 1 << 15;

constexpr float kGeluK = 0.7978845608028654f; // sqrt(2 / pi)
constexpr float kGeluC = 0.044715f;

// GELU's element formulas, shared by the f32 kernels and the bf16 ones
// (which widen each element as they read it and round it as they write
// it): the same operations, hence the widened path's bits. Always inlined,
// so that each clone compiles them for its own ISA.

/// GELU, tanh approximation (GPT-2):
/// 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))).
__attribute__((always_inline)) inline float geluAt(float xi) {
  float u = kGeluK * (xi + kGeluC * xi * xi * xi);
  return xi / (1.0f + expApprox(-2.0f * u));
}

/// With s = sigmoid(2u): gelu = x s and gelu' = s + 2 x u' s (1 - s).
/// 1 - s is computed as s e (e = exp(-2u)), which does not cancel.
__attribute__((always_inline)) inline float geluGradAt(float dout, float xi) {
  float x2 = xi * xi;
  float u = kGeluK * (xi + kGeluC * x2 * xi);
  float du = kGeluK * (1.0f + 3.0f * kGeluC * x2);
  float e = expApprox(-2.0f * u);
  float s = 1.0f / (1.0f + e);
  float grad = s + 2.0f * xi * du * s * (s * e);
  return dout * grad;
}

} // namespace

/// out = a + b over n elements (out may alias a or b).
FSDP_CPU_KERNEL void add(float *out, const float *a, const float *b,
                         int64_t n) {
  // out may alias a or b; each element is read before it is written, so
  // the simd assertion (no loop-carried dependence) still holds.
#pragma omp parallel for simd schedule(static) if (n >= kParallelMin)
  for (int64_t i = 0; i < n; ++i)
    out[i] = a[i] + b[i];
}

FSDP_CPU_KERNEL void geluForward(float *out, const float *x, int64_t n) {
#pragma omp parallel for simd schedule(static) if (n >= kParallelMin)
  for (int64_t i = 0; i < n; ++i)
    out[i] = geluAt(x[i]);
}

FSDP_CPU_KERNEL void geluBackward(float *dx, const float *dout, const float *x,
                                  int64_t n) {
#pragma omp parallel for simd schedule(static) if (n >= kParallelMin)
  for (int64_t i = 0; i < n; ++i)
    dx[i] = geluGradAt(dout[i], x[i]);
}

FSDP_CPU_KERNEL void geluForwardBF16(uint16_t *out, const uint16_t *x,
                                     int64_t n) {
#pragma omp parallel for simd schedule(static) if (n >= kParallelMin)
  for (int64_t i = 0; i < n; ++i)
    out[i] = roundToBF16(geluAt(widenBF16(x[i])));
}

FSDP_CPU_KERNEL void geluBackwardBF16(uint16_t *dx, const uint16_t *dout,
                                      const uint16_t *x, int64_t n) {
#pragma omp parallel for simd schedule(static) if (n >= kParallelMin)
  for (int64_t i = 0; i < n; ++i)
    dx[i] = roundToBF16(geluGradAt(widenBF16(dout[i]), widenBF16(x[i])));
}

FSDP_CPU_KERNEL void reluForward(float *out, const float *x, int64_t n) {
  // Written so that NaN passes through (NaN < 0 is false).
#pragma omp parallel for simd schedule(static) if (n >= kParallelMin)
  for (int64_t i = 0; i < n; ++i)
    out[i] = x[i] < 0.0f ? 0.0f : x[i];
}

/// dx = dout where x > 0, else 0.
FSDP_CPU_KERNEL void reluBackward(float *dx, const float *dout, const float *x,
                                  int64_t n) {
#pragma omp parallel for simd schedule(static) if (n >= kParallelMin)
  for (int64_t i = 0; i < n; ++i)
    dx[i] = x[i] > 0.0f ? dout[i] : 0.0f;
}

/// out[i] = value for n elements.
FSDP_CPU_KERNEL void fill(float *out, int64_t n, float value) {
#pragma omp parallel for simd schedule(static) if (n >= kParallelMin)
  for (int64_t i = 0; i < n; ++i)
    out[i] = value;
}

/// out = silu(gate) * up = gate sigmoid(gate) up, for n elements.
FSDP_CPU_KERNEL void swigluForward(float *out, const float *gate,
                                   const float *up, int64_t n) {
#pragma omp parallel for simd schedule(static) if (n >= kParallelMin)
  for (int64_t i = 0; i < n; ++i)
    out[i] = gate[i] / (1.0f + expApprox(-gate[i])) * up[i];
}

/// With s = sigmoid(gate): dgate = dout up s (1 + gate (1 - s)) and
/// dup = dout gate s.
FSDP_CPU_KERNEL void swigluBackward(float *dgate, float *dup, const float *dout,
                                    const float *gate, const float *up,
                                    int64_t n) {
  // silu' = s + g s (1 - s), with 1 - s computed as s e (e = exp(-g)),
  // which does not cancel for large g.
#pragma omp parallel for simd schedule(static) if (n >= kParallelMin)
  for (int64_t i = 0; i < n; ++i) {
    const float g = gate[i];
    const float e = expApprox(-g);
    const float s = 1.0f / (1.0f + e);
    dup[i] = dout[i] * g * s;
    dgate[i] = dout[i] * up[i] * (s + g * s * (s * e));
  }
}

namespace {
/// Turns the q and k pairs of each row by sign * angle (sign -1: the
/// inverse rotation, the backward), cos and sin scaled by the scaling's
/// factor (yarn's), and copies v.
void rotate(float *out, const float *in, int64_t B, int64_t T, int64_t H,
            int64_t KV, int64_t hs, float theta, const plan::RopeScaling &sc,
            float sign) {
  const int64_t half = hs / 2, width = (H + 2 * KV) * hs;
  const int64_t rotated = (H + KV) * hs;
  const float scale = plan::ropeCosSinScale(sc);
  // Hugging Face's inv_freq, in float (RopeScaling.h, shared with CUDA).
  std::vector<float> invFreq(size_t(half > 0 ? half : 0));
  for (int64_t i = 0; i < half; ++i)
    invFreq[size_t(i)] = plan::ropeInvFreq(theta, i, hs, sc);
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < B * T; ++r) {
    const float t = float(r % T);
    const float *x = in + r * width;
    float *o = out + r * width;
    for (int64_t i = 0; i < half; ++i) {
      const float angle = t * invFreq[size_t(i)];
      const float c = std::cos(angle) * scale,
                  s = sign * (std::sin(angle) * scale);
      for (int64_t h = 0; h < H + KV; ++h) {
        const float x0 = x[h * hs + i], x1 = x[h * hs + i + half];
        o[h * hs + i] = x0 * c - x1 * s;
        o[h * hs + i + half] = x1 * c + x0 * s;
      }
    }
    std::memcpy(o + rotated, x + rotated, size_t(KV * hs) * sizeof(float));
  }
}

} // namespace

/// Rotary embeddings, Hugging Face's rotate-half: qkv is B x T x (H + 2 KV)
/// hs (H query heads, KV key heads, KV value heads). In every q and k head
/// the pair (i, i + hs/2), i < hs/2, at position t turns by the angle
/// a = t inv_freq[i], inv_freq[i] = 1 / theta^(2i/hs) scaled as the
/// scaling parameters say (plan::ropeInvFreq, RopeScaling.h; in float, as
/// Hugging Face computes them): with c = m cos a, s = m sin a (m: yarn's
/// attention factor, else 1), out[i] = x[i] c - x[i + hs/2] s,
/// out[i + hs/2] = x[i + hs/2] c + x[i] s. v is copied.
void ropeForward(float *out, const float *qkv, int64_t B, int64_t T, int64_t H,
                 int64_t KV, int64_t hs, float theta, int64_t scaling,
                 double factor, double low_freq_factor, double high_freq_factor,
                 int64_t original_max_positions, double attention_factor,
                 double correction_low, double correction_high) {
  rotate(out, qkv, B, T, H, KV, hs, theta,
         plan::ropeScalingOf(scaling, factor, low_freq_factor, high_freq_factor,
                             original_max_positions, attention_factor,
                             correction_low, correction_high),
         1.0f);
}

/// The gradient of ropeForward: dout turned back by -a (the transpose of
/// the scaled rotation), v's gradient copied.
void ropeBackward(float *dqkv, const float *dout, int64_t B, int64_t T,
                  int64_t H, int64_t KV, int64_t hs, float theta,
                  int64_t scaling, double factor, double low_freq_factor,
                  double high_freq_factor, int64_t original_max_positions,
                  double attention_factor, double correction_low,
                  double correction_high) {
  const float sign = -1.0f; // the inverse rotation
  rotate(dqkv, dout, B, T, H, KV, hs, theta,
         plan::ropeScalingOf(scaling, factor, low_freq_factor, high_freq_factor,
                             original_max_positions, attention_factor,
                             correction_low, correction_high),
         sign);
}

} // namespace fsdp::rt::cpu
