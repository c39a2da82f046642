//===- Elementwise.cu - add, GELU, ReLU, fill, scale, bias gradient -------===//
//
// The element-wise kernels are one grid-stride map over n elements, in
// float4 when every pointer is 16-byte aligned (arena buffers are, views
// into them need not be) with a scalar tail, else in scalar loads (still
// coalesced). The operation is a functor of the (up to) two inputs.
//
// GELU uses tanhf, the formula of the CPU backend's header; the CPU
// computes the same function as a sigmoid; the two agree to rounding in
// absolute terms (for x below about -3 the tanh form loses relative digits
// of a result that is itself tiny).
//
// The bias gradient is a column sum over rows: the deterministic column
// reduction of Common.cuh.
//
//===----------------------------------------------------------------------===//

#include "Common.cuh"

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

/// out[i] = f(a[i], b[i]) reading NIn inputs (0: none, 1: a, 2: a and b).
/// out may alias a or b: each element is read before it is written, by the
/// same thread.
template <int NIn, class F>
__global__ void mapKernel(float *out, const float *a, const float *b, int64_t n,
                          F f, bool vec) {
  const int64_t stride = int64_t(gridDim.x) * blockDim.x;
  const int64_t tid = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  int64_t done = 0;
  if (vec) {
    const int64_t n4 = n / 4;
    for (int64_t i = tid; i < n4; i += stride) {
      float4 x = make_float4(0.f, 0.f, 0.f, 0.f), y = x, r;
      if constexpr (NIn >= 1)
        x = reinterpret_cast<const float4 *>(a)[i];
      if constexpr (NIn >= 2)
        y = reinterpret_cast<const float4 *>(b)[i];
      r.x = f(x.x, y.x);
      r.y = f(x.y, y.y);
      r.z = f(x.z, y.z);
      r.w = f(x.w, y.w);
      reinterpret_cast<float4 *>(out)[i] = r;
    }
    done = n4 * 4;
  }
  for (int64_t i = done + tid; i < n; i += stride) {
    const float x = NIn >= 1 ? a[i] : 0.0f;
    const float y = NIn >= 2 ? b[i] : 0.0f;
    out[i] = f(x, y);
  }
}

template <int NIn, class F>
void launchMap(const Context &ctx, const char *where, float *out,
               const float *a, const float *b, int64_t n, F f) {
  if (n <= 0)
    return;
  const bool vec = detail::aligned16(out) &&
                   (NIn < 1 || detail::aligned16(a)) &&
                   (NIn < 2 || detail::aligned16(b));
  const int threads = 256;
  const unsigned blocks = detail::blocksFor(vec ? (n + 3) / 4 : n, threads);
  mapKernel<NIn, F><<<blocks, threads, 0, ctx.stream>>>(out, a, b, n, f, vec);
  detail::checkLaunch(where);
}

} // namespace

void add(const Context &ctx, float *out, const float *a, const float *b,
         int64_t n) {
  launchMap<2>(ctx, "add", out, a, b, n, AddOp{});
}

void geluForward(const Context &ctx, float *out, const float *x, int64_t n) {
  launchMap<1>(ctx, "geluForward", out, x, nullptr, n, GeluForwardOp{});
}

void geluBackward(const Context &ctx, float *dx, const float *dout,
                  const float *x, int64_t n) {
  launchMap<2>(ctx, "geluBackward", dx, dout, x, n, GeluBackwardOp{});
}

void reluForward(const Context &ctx, float *out, const float *x, int64_t n) {
  launchMap<1>(ctx, "reluForward", out, x, nullptr, n, ReluForwardOp{});
}

void reluBackward(const Context &ctx, float *dx, const float *dout,
                  const float *x, int64_t n) {
  launchMap<2>(ctx, "reluBackward", dx, dout, x, n, ReluBackwardOp{});
}

void fill(const Context &ctx, float *out, int64_t n, float value) {
  launchMap<0>(ctx, "fill", out, nullptr, nullptr, n, FillOp{value});
}

void scale(const Context &ctx, float *data, int64_t n, float factor) {
  launchMap<1>(ctx, "scale", data, data, nullptr, n, ScaleOp{factor});
}

void biasGrad(const Context &ctx, float *db, const float *dout, int64_t N,
              int64_t OC) {
  if (OC <= 0)
    return;
  detail::launchColumnSum<false>(ctx, "biasGrad", db, nullptr, dout, nullptr,
                                 nullptr, nullptr, N, OC);
}

} // namespace fsdp::rt::cuda
