//===- TensorCoreTiles.cuh - the tensor-core attention tiles -*- CUDA -*-===//
//
// What the tensor-core attention kernels (TensorCoreForward.cu,
// TensorCoreBackward.cu) share: tile shapes, the WMMA fragments (TF32,
// m16n16k8), tiles staged in registers while the previous one is computed,
// and the products of a warp's 16 rows against a tile in shared memory.
//
// Why pipelined: the first tensor-core kernels waited on every key tile's
// loads with nothing in flight, sent each tile's P V through shared memory
// to rescale it row by row, and ran 4 warps against tiles of 32 keys; on
// an H200 they reached 6 to 25% of the tensor cores (docs/cuda.md,
// "Measured on a GPU"). Here the next tile's global loads are issued
// before the current tile's MMAs and land in shared memory after them,
// blocks are larger (8 warps up to head size 64) so a tile loaded serves
// more rows, and the forward keeps its output in accumulator fragments,
// rescaled only when a row's maximum grows by more than kSlack
// (TensorCoreForward.cu): 2.3x the forward and 2.0x the backward of the
// first kernels at GPT-2 124M's shape.
//
// Tile rows are HS + 4 floats apart: still a multiple of 16 bytes (WMMA's
// ldm) with 16-row blocks 32-byte aligned, and 8 consecutive rows start 4
// banks apart, so a fragment's 8 x 4 reads hit 32 different banks.
//
//===----------------------------------------------------------------------===//

#ifndef FSDP_RUNTIME_CUDA_KERNELS_TENSORCORETILES_CUH
#define FSDP_RUNTIME_CUDA_KERNELS_TENSORCORETILES_CUH

#include "Common.cuh"

#include <mma.h>

namespace fsdp::rt::cuda::detail::tc {

namespace wmma = nvcuda::wmma;

/// A block of Warps warps of 16 rows each (queries, or keys in the key
/// pass) against tiles of Step rows of the other operand; HS the head size
/// rounded up to 32, 64 or 128.
template <int HS_, int Warps, int Step> struct Shape {
  static constexpr int HS = HS_;
  static constexpr int kWarps = Warps;
  static constexpr int kThreads = 32 * Warps;
  static constexpr int kRows = 16 * Warps; // rows a block owns
  static constexpr int kStep = Step;       // rows of the other tile
  static constexpr int kLd = HS + 4;       // tile row stride (floats)
  static constexpr int kSld = Step + 4;    // score row stride (floats)
  static constexpr int kKs = HS / 8;       // k-steps over the head size
  static constexpr int kNs = HS / 16;      // 16-column slabs of the head
  static constexpr int kPer = Step / 2;    // score columns per lane
  static_assert(Step % 16 == 0 && kThreads % HS == 0, "tile mapping");
};

/// The 16 x 16 block an accumulator fragment is rescaled through.
constexpr int kRld = 20;

using FragA = wmma::fragment<wmma::matrix_a, 16, 16, 8, wmma::precision::tf32,
                             wmma::row_major>;
using FragBRow = wmma::fragment<wmma::matrix_b, 16, 16, 8,
                                wmma::precision::tf32, wmma::row_major>;
using FragBCol = wmma::fragment<wmma::matrix_b, 16, 16, 8,
                                wmma::precision::tf32, wmma::col_major>;
using FragC = wmma::fragment<wmma::accumulator, 16, 16, 8, float>;

__device__ __forceinline__ float tf32(float x) {
  return wmma::__float_to_tf32(x);
}

/// Rows row0 .. row0 + Rows of an hs-wide slice (row stride ld), held in
/// registers between the global loads and the stores to shared memory, so
/// that the loads are in flight while the block computes. Thread t holds
/// column t % HS of rows t / HS + k Threads / HS: the column is fixed, the
/// row steps are constant, and consecutive threads read consecutive
/// elements. E is kept as loaded (bf16 is widened where it is stored).
template <int HS, int Rows, int Threads, typename E> struct Staged {
  static constexpr int kStride = Threads / HS; // rows between a thread's
  static constexpr int kN = Rows / kStride;    // elements per thread
  static_assert(Rows % kStride == 0, "tile mapping");
  E v[kN];

  __device__ void load(const E *__restrict__ src, int64_t ld, int64_t row0,
                       int64_t T, int hs) {
    const E zero = fromFloat<E>(0.0f);
    const int d = threadIdx.x % HS, r = threadIdx.x / HS;
    const E *p = src + (row0 + r) * ld + d;
    // Offsets within a tile fit an int (Rows rows of ld elements).
    const int step = kStride * int(ld);
    const int64_t left = T - row0 - r; // rows of this thread's below T
#pragma unroll
    for (int k = 0; k < kN; ++k)
      v[k] = k * kStride < left && d < hs ? p[k * step] : zero;
  }

  /// Into a tile of row stride Ld, TF32-rounded.
  template <int Ld> __device__ void store(float *tile) const {
    const int d = threadIdx.x % HS, r = threadIdx.x / HS;
#pragma unroll
    for (int k = 0; k < kN; ++k)
      tile[(r + k * kStride) * Ld + d] = tf32(toFloat(v[k]));
  }
};

/// Rows row0 .. row0 + Rows of a slice straight into a tile (once per
/// block: the block's own rows, before the loop).
template <int HS, int Rows, int Threads, int Ld, typename E>
__device__ __forceinline__ void loadTile(float *tile, const E *__restrict__ src,
                                         int64_t ld, int64_t row0, int64_t T,
                                         int hs) {
  Staged<HS, Rows, Threads, E> s;
  s.load(src, ld, row0, T, hs);
  s.template store<Ld>(tile);
}

/// The tile's rows below T, first hs columns, out to dst (row stride ld).
template <int HS, int Rows, int Threads, int Ld, typename E>
__device__ __forceinline__ void storeTile(E *__restrict__ dst, int64_t ld,
                                          const float *tile, int64_t row0,
                                          int64_t T, int hs) {
  const int d = threadIdx.x % HS, r = threadIdx.x / HS;
  constexpr int kStride = Threads / HS;
  E *p = dst + (row0 + r) * ld + d;
  const int step = kStride * int(ld);
  const int64_t left = T - row0 - r;
#pragma unroll
  for (int k = 0; k < Rows / kStride; ++k)
    if (k * kStride < left && d < hs)
      p[k * step] = fromFloat<E>(tile[(r + k * kStride) * Ld + d]);
}

/// The warp's 16 rows of a tile (row stride S::kLd) as A fragments.
template <class S>
__device__ __forceinline__ void loadRowsA(FragA (&a)[S::kKs],
                                          const float *rows) {
#pragma unroll
  for (int k = 0; k < S::kKs; ++k)
    wmma::load_matrix_sync(a[k], rows + 8 * k, S::kLd);
}

/// out (16 x kStep, row stride kSld) = A (16 x HS) times the transpose of
/// the kStep rows of `tile` (row stride kLd).
template <class S>
__device__ __forceinline__ void
timesTransposed(float *out, const FragA (&a)[S::kKs], const float *tile) {
#pragma unroll
  for (int n = 0; n < S::kStep / 16; ++n) {
    FragC acc;
    wmma::fill_fragment(acc, 0.0f);
#pragma unroll
    for (int k = 0; k < S::kKs; ++k) {
      FragBCol b;
      wmma::load_matrix_sync(b, tile + 16 * n * S::kLd + 8 * k, S::kLd);
      wmma::mma_sync(acc, a[k], b, acc);
    }
    wmma::store_matrix_sync(out + 16 * n, acc, S::kSld, wmma::mem_row_major);
  }
}

/// acc (16 x HS) += P (16 x kStep, row stride kSld) times the kStep rows
/// of `tile` (row stride kLd).
template <class S>
__device__ __forceinline__ void
accumulateProduct(FragC (&acc)[S::kNs], const float *p, const float *tile) {
#pragma unroll
  for (int k = 0; k < S::kStep / 8; ++k) {
    FragA a;
    wmma::load_matrix_sync(a, p + 8 * k, S::kSld);
#pragma unroll
    for (int n = 0; n < S::kNs; ++n) {
      FragBRow b;
      wmma::load_matrix_sync(b, tile + 8 * k * S::kLd + 16 * n, S::kLd);
      wmma::mma_sync(acc[n], a, b, acc[n]);
    }
  }
}

template <class S> __device__ __forceinline__ void zero(FragC (&acc)[S::kNs]) {
#pragma unroll
  for (int n = 0; n < S::kNs; ++n)
    wmma::fill_fragment(acc[n], 0.0f);
}

/// The accumulators, scaled, into the warp's 16 rows of a tile.
template <class S>
__device__ __forceinline__ void
putAccumulators(float *rows, FragC (&acc)[S::kNs], float factor) {
#pragma unroll
  for (int n = 0; n < S::kNs; ++n) {
#pragma unroll
    for (int e = 0; e < acc[n].num_elements; ++e)
      acc[n].x[e] *= factor;
    wmma::store_matrix_sync(rows + 16 * n, acc[n], S::kLd, wmma::mem_row_major);
  }
}

/// Whether key rows [k0, k0 + nk) and query rows [q0, q0 + nq) share no
/// visible pair under causality and window W: a warp skips such a pair of
/// tiles whole (the condition is the warp's, so its lanes agree).
__device__ __forceinline__ bool disjoint(int64_t q0, int nq, int64_t k0, int nk,
                                         int64_t W) {
  return k0 > q0 + nq - 1 || k0 + nk - 1 < windowStart(q0, W);
}

/// Whether every pair of query rows [q0, q0 + nq) and key rows
/// [k0, k0 + nk) is visible: then the softmax masks nothing (the common
/// tile, below the diagonal and inside the window).
__device__ __forceinline__ bool allVisible(int64_t q0, int nq, int64_t k0,
                                           int nk, int64_t W) {
  return k0 + nk - 1 <= q0 && k0 >= windowStart(q0 + nq - 1, W);
}

/// The columns c of a tile starting at key j0 that query row i sees under
/// window W, as the int range lo <= c <= hi (empty when hi < lo): 32-bit
/// compares per element instead of 64-bit ones.
struct Visible {
  int lo, hi;
  __device__ bool operator()(int c) const { return c >= lo && c <= hi; }
};

__device__ __forceinline__ Visible visibleColumns(int64_t i, int64_t j0,
                                                  int64_t W, int width) {
  const int64_t hi = i - j0, lo = windowStart(i, W) - j0;
  return {int(lo < 0       ? 0
              : lo > width ? width
                           : lo),
          int(hi < -1       ? -1
              : hi >= width ? width - 1
                            : hi)};
}

} // namespace fsdp::rt::cuda::detail::tc

#endif // FSDP_RUNTIME_CUDA_KERNELS_TENSORCORETILES_CUH
