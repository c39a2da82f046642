//===- WmmaTestKernels.cu - WMMA kernels that check the emulation ---------===//
//
// WmmaTestKernels.h says what each computes. CUDA source: preprocess.py
// turns it into C++ for the emulator (fake/mma.h) as it does the runtime's
// kernels, and nvcc builds it as it is for a GPU.
//
//===----------------------------------------------------------------------===//

#include "WmmaTestKernels.h"

#include <cuda_bf16.h>
#include <mma.h>

namespace wmmatest {
namespace {

namespace wmma = nvcuda::wmma;

/// The fragments of one precision: bf16 m16n16k16 or tf32 m16n16k8.
template <typename In> struct Frags;
template <> struct Frags<__nv_bfloat16> {
  static constexpr int kStep = 16;
  using A = wmma::fragment<wmma::matrix_a, 16, 16, 16, __nv_bfloat16,
                           wmma::row_major>;
  template <typename L>
  using B = wmma::fragment<wmma::matrix_b, 16, 16, 16, __nv_bfloat16, L>;
  using C = wmma::fragment<wmma::accumulator, 16, 16, 16, float>;
};
template <> struct Frags<float> {
  static constexpr int kStep = 8;
  using A = wmma::fragment<wmma::matrix_a, 16, 16, 8, wmma::precision::tf32,
                           wmma::row_major>;
  template <typename L>
  using B = wmma::fragment<wmma::matrix_b, 16, 16, 8, wmma::precision::tf32, L>;
  using C = wmma::fragment<wmma::accumulator, 16, 16, 8, float>;
};

template <typename F> __device__ void roundToTF32(F &f) {
  for (int i = 0; i < f.num_elements; ++i)
    f.x[i] = wmma::__float_to_tf32(f.x[i]);
}

__device__ wmma::layout_t layout(bool colMajor) {
  return colMajor ? wmma::mem_col_major : wmma::mem_row_major;
}

/// Element (r, c)'s offset in a matrix of leading dimension ld.
__device__ int at(int r, int c, int ld, bool colMajor) {
  return colMajor ? c * ld + r : r * ld + c;
}

template <typename In, typename BLayout> __global__ void gemmKernel(Gemm g) {
  using F = Frags<In>;
  constexpr int KS = F::kStep, kLd = KS + 8; // staged rows: 32-byte steps
  __shared__ __align__(32) In stage[2][16 * kLd];
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int tile = blockIdx.x * 2 + warp, tilesN = g.N / 16;
  if (tile >= g.M / 16 * tilesN)
    return; // the whole warp
  const int r0 = tile / tilesN * 16, c0 = tile % tilesN * 16;
  const In *A = static_cast<const In *>(g.A);
  const In *B = static_cast<const In *>(g.B);
  typename F::C acc;
  if (g.C)
    wmma::load_matrix_sync(acc, g.C + at(r0, c0, g.ldc, g.cColMajor), g.ldc,
                           layout(g.cColMajor));
  else
    wmma::fill_fragment(acc, 0.0f);
  for (int k0 = 0; k0 < g.K; k0 += KS) {
    const In *pa = A + r0 * g.lda + k0;
    unsigned lda = g.lda;
    if (g.viaShared) {
      In *s = stage[warp];
      for (int i = lane; i < 16 * KS; i += 32)
        s[i / KS * kLd + i % KS] = pa[i / KS * g.lda + i % KS];
      __syncwarp();
      pa = s, lda = kLd;
    }
    typename F::A a;
    typename F::template B<BLayout> b;
    wmma::load_matrix_sync(a, pa, lda);
    wmma::load_matrix_sync(b, B + at(k0, c0, g.ldb, g.bColMajor), g.ldb);
    if (g.viaShared)
      __syncwarp(); // the next k-step's staging overwrites this one
    if constexpr (KS == 8) {
      if (g.roundInputs) {
        roundToTF32(a);
        roundToTF32(b);
      }
    }
    wmma::mma_sync(acc, a, b, acc);
  }
  for (int i = 0; i < acc.num_elements; ++i)
    acc.x[i] *= g.alpha;
  wmma::store_matrix_sync(g.D + at(r0, c0, g.ldd, g.dColMajor), acc, g.ldd,
                          layout(g.dColMajor));
}

template <typename In> void gemm(const Gemm &g) {
  const int tiles = g.M / 16 * (g.N / 16);
  if (g.bColMajor)
    gemmKernel<In, wmma::col_major><<<(tiles + 1) / 2, 64>>>(g);
  else
    gemmKernel<In, wmma::row_major><<<(tiles + 1) / 2, 64>>>(g);
}

__global__ void toTF32Kernel(const float *in, float *out, int n) {
  for (int i = threadIdx.x; i < n; i += blockDim.x)
    out[i] = wmma::__float_to_tf32(in[i]);
}

__global__ void misuseKernel(Misuse what, const __nv_bfloat16 *A,
                             const __nv_bfloat16 *B, float *D) {
  __shared__ __nv_bfloat16 loose[16 * 16 + 16]; // only 2-byte aligned
  __shared__ __align__(32) float out[16 * 16];
  const int lane = threadIdx.x % 32;
  Frags<__nv_bfloat16>::A a;
  Frags<__nv_bfloat16>::B<wmma::row_major> b;
  Frags<__nv_bfloat16>::C acc;
  wmma::fill_fragment(acc, 0.0f);
  const __nv_bfloat16 *pa = A;
  unsigned ld = 32;
  if (what == kDifferentPointers && lane == 3)
    pa = A + 16;
  if (what == kBadLdm)
    ld = 12;
  if (what == kMisaligned)
    pa = A + 4;
  if (what == kUnalignedShared) {
    for (int i = lane; i < 16 * 16; i += 32)
      loose[16 + i] = A[i / 16 * 32 + i % 16];
    __syncwarp();
    pa = loose + 16, ld = 16;
  }
  wmma::load_matrix_sync(a, pa, ld);
  wmma::load_matrix_sync(b, B, 16);
  if (what == kLaneDependent && lane == 0)
    a.x[0] = __float2bfloat16_rn(0.0f);
  if (what == kIndexDependent)
    for (int i = 0; i < 4; ++i)
      a.x[i] = __float2bfloat16_rn(0.0f);
  if (what != kSkipMma || lane != 5)
    wmma::mma_sync(acc, a, b, acc);
  if (what != kStoreReadNoSync && what != kStoreReadSync) {
    wmma::store_matrix_sync(D, acc, 16, wmma::mem_row_major);
    return;
  }
  // Each lane copies half a row of the stored tile: elements other lanes
  // wrote, which it may read only after a __syncwarp.
  wmma::store_matrix_sync(out, acc, 16, wmma::mem_row_major);
  if (what == kStoreReadSync)
    __syncwarp();
  for (int c = lane % 2 * 8; c < lane % 2 * 8 + 8; ++c)
    D[lane / 2 * 16 + c] = out[lane / 2 * 16 + c];
}

} // namespace

void gemmBF16(const Gemm &g) { gemm<__nv_bfloat16>(g); }
void gemmTF32(const Gemm &g) { gemm<float>(g); }

void toTF32(const float *in, float *out, int n) {
  toTF32Kernel<<<1, 128>>>(in, out, n);
}

void misuse(Misuse what, const __nv_bfloat16 *A, const __nv_bfloat16 *B,
            float *D) {
  misuseKernel<<<1, 32>>>(what, A, B, D);
}

} // namespace wmmatest
