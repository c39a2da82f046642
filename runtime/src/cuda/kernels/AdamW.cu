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
// Multi-tensor: adamwTensors updates a list of tensors (AdamWTensors.h:
// every parameter segment of a step's adjacent adamw_shard instructions)
// in one launch per 24 of them, a block per 4096 elements of one tensor,
// instead of a launch per segment (about 150 for GPT-2 124M, most of them
// a few hundred elements); adamw is the list of one.
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

/// One tensor of a launch: AdamWTensor's pointers on the device, its
/// hyperparameters with their bias corrections, its flags. No padding
/// bytes, here or in TensorList: GCC 12 clears a copied struct's padding
/// under -ftrivial-auto-var-init (the CPU emulation's build) and, for an
/// array of structs inside a lambda's capture, cleared 4 bytes of a
/// pointer next to it.
struct DeviceTensor {
  float *param, *m, *v;
  const void *grad; ///< f32, or bf16 where kBF16Grad
  __nv_bfloat16 *copy;
  const float *gradScale;
  int64_t n;
  AdamWParams a;
  uint32_t flags; ///< kBF16Grad, kVec (every pointer aligned for quads)
};
constexpr uint32_t kBF16Grad = 1, kVec = 2;
static_assert(sizeof(DeviceTensor) == 7 * 8 + sizeof(AdamWParams) + 4,
              "DeviceTensor has padding");

/// Tensors per launch: the list goes by value as the kernel's parameters,
/// which must stay under 4 KiB (about 2.3 here).
constexpr int kListTensors = 24;
/// Elements per block: 256 threads x 4 quads each.
constexpr int kThreads = 256;
constexpr int64_t kBlockElements = 4096;

struct TensorList {
  DeviceTensor t[kListTensors];
  int64_t firstBlock[kListTensors + 1]; ///< tensor k's blocks start here
  int64_t count;
};

/// Elements [begin, end) of `t`, whose gradient is G (float, or
/// __nv_bfloat16: mixed precision's reduced shard, read without a cast;
/// widened as it is read, exactly), by this block's threads.
template <typename G>
__device__ void adamwRange(const DeviceTensor &t, int64_t begin, int64_t end) {
  // x * 1 is x: without a scale, the same operations as with one of 1.
  const float s = t.gradScale ? *t.gradScale : 1.0f;
  const G *grad = static_cast<const G *>(t.grad);
  int64_t done = begin;
  if (t.flags & kVec) { // begin is a multiple of 4 (kBlockElements is)
    float4 *p4 = reinterpret_cast<float4 *>(t.param);
    float4 *m4 = reinterpret_cast<float4 *>(t.m);
    float4 *v4 = reinterpret_cast<float4 *>(t.v);
    const auto *g4 = reinterpret_cast<const detail::Quad<G> *>(grad);
    for (int64_t i = begin / 4 + threadIdx.x; i < end / 4; i += blockDim.x) {
      float4 p = p4[i], mm = m4[i], vv = v4[i];
      const detail::Quad<G> g = g4[i];
      adamwOne(p.x, mm.x, vv.x, detail::toFloat(g.v[0]) * s, t.a);
      adamwOne(p.y, mm.y, vv.y, detail::toFloat(g.v[1]) * s, t.a);
      adamwOne(p.z, mm.z, vv.z, detail::toFloat(g.v[2]) * s, t.a);
      adamwOne(p.w, mm.w, vv.w, detail::toFloat(g.v[3]) * s, t.a);
      p4[i] = p;
      m4[i] = mm;
      v4[i] = vv;
      if (t.copy) {
        t.copy[4 * i] = detail::toBF16(p.x);
        t.copy[4 * i + 1] = detail::toBF16(p.y);
        t.copy[4 * i + 2] = detail::toBF16(p.z);
        t.copy[4 * i + 3] = detail::toBF16(p.w);
      }
    }
    done = end / 4 * 4;
  }
  for (int64_t i = done + threadIdx.x; i < end; i += blockDim.x) {
    adamwOne(t.param[i], t.m[i], t.v[i], detail::toFloat(grad[i]) * s, t.a);
    if (t.copy)
      t.copy[i] = detail::toBF16(t.param[i]);
  }
}

/// Each block updates kBlockElements of one tensor of the list: the
/// tensor whose blocks include it (at most kListTensors to look through).
__global__ void adamwTensorsKernel(TensorList list) {
  const int64_t block = blockIdx.x;
  int64_t k = 0;
  while (k + 1 < list.count && block >= list.firstBlock[k + 1])
    ++k;
  const DeviceTensor &t = list.t[k];
  const int64_t begin = (block - list.firstBlock[k]) * kBlockElements;
  const int64_t end =
      begin + kBlockElements < t.n ? begin + kBlockElements : t.n;
  if (t.flags & kBF16Grad)
    adamwRange<__nv_bfloat16>(t, begin, end);
  else
    adamwRange<float>(t, begin, end);
}

/// `t` as a launch takes it, at step `step`.
DeviceTensor deviceTensor(const AdamWTensor &t, int64_t step) {
  DeviceTensor d;
  d.param = t.param;
  d.m = t.m;
  d.v = t.v;
  d.grad = t.grad;
  d.copy = reinterpret_cast<__nv_bfloat16 *>(t.copy);
  d.gradScale = t.gradScale;
  d.n = t.n;
  d.a.lr = t.lr;
  d.a.beta1 = t.beta1;
  d.a.beta2 = t.beta2;
  d.a.eps = t.eps;
  d.a.weightDecay = t.weightDecay;
  d.a.corr1 = float(1.0 - std::pow(double(t.beta1), double(step)));
  d.a.corr2 = float(1.0 - std::pow(double(t.beta2), double(step)));
  const bool vec =
      detail::aligned16(t.param) && detail::aligned16(t.m) &&
      detail::aligned16(t.v) &&
      (t.bf16Grad
           ? detail::quadAligned(static_cast<const __nv_bfloat16 *>(t.grad))
           : detail::quadAligned(static_cast<const float *>(t.grad)));
  d.flags = (t.bf16Grad ? kBF16Grad : 0) | (vec ? kVec : 0);
  return d;
}

void launchList(const Context &ctx, const TensorList &list, int64_t blocks) {
  adamwTensorsKernel<<<unsigned(blocks), kThreads, 0, ctx.stream>>>(list);
  detail::checkLaunch("adamw");
}

} // namespace

void adamwTensors(const Context &ctx, const AdamWTensor *tensors, size_t count,
                  int64_t step) {
  TensorList list;
  list.count = 0;
  int64_t blocks = 0;
  for (size_t k = 0; k < count; ++k) {
    if (tensors[k].n <= 0)
      continue;
    list.t[list.count] = deviceTensor(tensors[k], step);
    list.firstBlock[list.count] = blocks;
    blocks += (tensors[k].n + kBlockElements - 1) / kBlockElements;
    if (++list.count < kListTensors && k + 1 < count)
      continue;
    list.firstBlock[list.count] = blocks;
    launchList(ctx, list, blocks);
    list.count = 0;
    blocks = 0;
  }
  if (list.count > 0) { // the last tensors were empty
    list.firstBlock[list.count] = blocks;
    launchList(ctx, list, blocks);
  }
}

void adamw(const Context &ctx, float *param, float *m, float *v,
           const float *grad, int64_t n, float lr, float beta1, float beta2,
           float eps, float weightDecay, int64_t step, const float *gradScale,
           uint16_t *copy) {
  AdamWTensor t{param, m,     v,     grad, copy,        gradScale, n,
                lr,    beta1, beta2, eps,  weightDecay, false};
  adamwTensors(ctx, &t, 1, step);
}

void adamw(const Context &ctx, float *param, float *m, float *v,
           const uint16_t *grad, int64_t n, float lr, float beta1, float beta2,
           float eps, float weightDecay, int64_t step, const float *gradScale,
           uint16_t *copy) {
  AdamWTensor t{param, m,     v,     grad, copy,        gradScale, n,
                lr,    beta1, beta2, eps,  weightDecay, true};
  adamwTensors(ctx, &t, 1, step);
}

} // namespace fsdp::rt::cuda
