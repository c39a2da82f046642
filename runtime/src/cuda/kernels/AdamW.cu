//===- AdamW.cu - the AdamW optimiser step --------------------------------===//
//
// One streaming pass over param, m, v and grad (four elements at a time
// when all four are aligned for it), the update of cpu::adamw (up to the
// fused multiply-adds nvcc contracts by default): the bias corrections
// 1 - beta^t are computed on the host in double, as there, and divided (not
// folded into lr); sqrtf and the divisions are IEEE (no fast math). The
// gradient is f32, or bf16 (mixed precision's reduced shard, which the
// compiler leaves uncast), widened as it is read. A unit's shard copy,
// when given, takes each updated element rounded to bf16 (detail::toBF16,
// the CPU's bits).
//
//===----------------------------------------------------------------------===//

#include "Common.cuh"

#include <cmath>

namespace fsdp::rt::cuda {
namespace {

struct AdamWParams {
  float lr, beta1, beta2, eps, weightDecay, corr1, corr2;
};

__device__ __forceinline__ void adamwOne(float &p, float &m, float &v, float g,
                                         const AdamWParams &a) {
  const float mj = a.beta1 * m + (1.0f - a.beta1) * g;
  const float vj = a.beta2 * v + (1.0f - a.beta2) * g * g;
  m = mj;
  v = vj;
  const float root = sqrtf(vj / a.corr2);
  const float mhat = mj / a.corr1;
  p -= a.lr * (mhat / (root + a.eps) + a.weightDecay * p);
}

/// G: float, or __nv_bfloat16 (mixed precision's reduced shard, read
/// without a cast; widened as it is read, exactly).
template <typename G>
__global__ void adamwKernel(float *__restrict__ param, float *__restrict__ m,
                            float *__restrict__ v, const G *__restrict__ grad,
                            int64_t n, AdamWParams a, bool vec,
                            const float *__restrict__ gradScale,
                            __nv_bfloat16 *__restrict__ copy) {
  // x * 1 is x: without a scale, the same operations as with one of 1.
  const float s = gradScale ? *gradScale : 1.0f;
  const int64_t stride = int64_t(gridDim.x) * blockDim.x;
  const int64_t tid = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  int64_t done = 0;
  if (vec) {
    const int64_t n4 = n / 4;
    float4 *p4 = reinterpret_cast<float4 *>(param);
    float4 *m4 = reinterpret_cast<float4 *>(m);
    float4 *v4 = reinterpret_cast<float4 *>(v);
    const auto *g4 = reinterpret_cast<const detail::Quad<G> *>(grad);
    for (int64_t i = tid; i < n4; i += stride) {
      float4 p = p4[i], mm = m4[i], vv = v4[i];
      const detail::Quad<G> g = g4[i];
      adamwOne(p.x, mm.x, vv.x, detail::toFloat(g.v[0]) * s, a);
      adamwOne(p.y, mm.y, vv.y, detail::toFloat(g.v[1]) * s, a);
      adamwOne(p.z, mm.z, vv.z, detail::toFloat(g.v[2]) * s, a);
      adamwOne(p.w, mm.w, vv.w, detail::toFloat(g.v[3]) * s, a);
      p4[i] = p;
      m4[i] = mm;
      v4[i] = vv;
      if (copy) {
        copy[4 * i] = detail::toBF16(p.x);
        copy[4 * i + 1] = detail::toBF16(p.y);
        copy[4 * i + 2] = detail::toBF16(p.z);
        copy[4 * i + 3] = detail::toBF16(p.w);
      }
    }
    done = n4 * 4;
  }
  for (int64_t i = done + tid; i < n; i += stride) {
    adamwOne(param[i], m[i], v[i], detail::toFloat(grad[i]) * s, a);
    if (copy)
      copy[i] = detail::toBF16(param[i]);
  }
}

template <typename G>
void launchAdamW(const Context &ctx, float *param, float *m, float *v,
                 const G *grad, int64_t n, float lr, float beta1, float beta2,
                 float eps, float weightDecay, int64_t step,
                 const float *gradScale, uint16_t *copy) {
  if (n <= 0)
    return;
  AdamWParams a;
  a.lr = lr;
  a.beta1 = beta1;
  a.beta2 = beta2;
  a.eps = eps;
  a.weightDecay = weightDecay;
  a.corr1 = float(1.0 - std::pow(double(beta1), double(step)));
  a.corr2 = float(1.0 - std::pow(double(beta2), double(step)));
  const bool vec = detail::aligned16(param) && detail::aligned16(m) &&
                   detail::aligned16(v) && detail::quadAligned(grad);
  const int threads = 256;
  const unsigned blocks = detail::blocksFor(vec ? (n + 3) / 4 : n, threads);
  adamwKernel<G><<<blocks, threads, 0, ctx.stream>>>(
      param, m, v, grad, n, a, vec, gradScale,
      reinterpret_cast<__nv_bfloat16 *>(copy));
  detail::checkLaunch("adamw");
}

} // namespace

void adamw(const Context &ctx, float *param, float *m, float *v,
           const float *grad, int64_t n, float lr, float beta1, float beta2,
           float eps, float weightDecay, int64_t step, const float *gradScale,
           uint16_t *copy) {
  launchAdamW(ctx, param, m, v, grad, n, lr, beta1, beta2, eps, weightDecay,
              step, gradScale, copy);
}

void adamw(const Context &ctx, float *param, float *m, float *v,
           const uint16_t *grad, int64_t n, float lr, float beta1, float beta2,
           float eps, float weightDecay, int64_t step, const float *gradScale,
           uint16_t *copy) {
  launchAdamW(ctx, param, m, v, reinterpret_cast<const __nv_bfloat16 *>(grad),
              n, lr, beta1, beta2, eps, weightDecay, step, gradScale, copy);
}

} // namespace fsdp::rt::cuda
