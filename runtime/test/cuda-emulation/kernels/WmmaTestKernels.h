//===- WmmaTestKernels.h - WMMA kernels checking the emulator --*- C++ -*-===//
//
// Small tensor-core kernels (WmmaTestKernels.cu) for EmuWmmaTest.cpp, and
// the scalar model of what they compute. The same source builds with nvcc
// for a GPU, so the emulation's model (fake/mma.h) can be checked against
// the hardware: every pointer here is a device pointer, every launch on
// the default stream.
//
//===----------------------------------------------------------------------===//
#ifndef CUEMU_WMMA_TEST_KERNELS_H
#define CUEMU_WMMA_TEST_KERNELS_H

#include <cuda_bf16.h>

#include <cmath>
#include <cstdint>
#include <cstring>

namespace wmmatest {

/// D = alpha (A B + C) with 16 x 16 tiles, a warp each, two per block. A is
/// M x K row-major, B K x N, C and D M x N (C nullptr: zeros); M and N
/// multiples of 16, K of the k-step (16 in bf16, 8 in tf32). The k-steps
/// accumulate in place (d = c); alpha scales the accumulator's x[].
struct Gemm {
  int M, N, K;
  const void *A; ///< __nv_bfloat16 (bf16) or float (tf32)
  int lda;
  const void *B;
  int ldb;
  bool bColMajor;
  const float *C;
  int ldc;
  bool cColMajor;
  float *D;
  int ldd;
  bool dColMajor;
  float alpha;
  bool viaShared;   ///< A's tiles staged through shared memory
  bool roundInputs; ///< tf32: __float_to_tf32 on every x[] of a and b
};
void gemmBF16(const Gemm &g);
void gemmTF32(const Gemm &g);

/// out[i] = __float_to_tf32(in[i]), i < n (one block).
void toTF32(const float *in, float *out, int n);

/// One warp misusing the API on a 16 x 16 bf16 tile: A is 16 x 32
/// elements (32-byte aligned), B 16 x 16, D 16 x 16 floats.
enum Misuse {
  kCorrect,           ///< none: D = A B
  kSkipMma,           ///< lane 5 does not call mma_sync
  kDifferentPointers, ///< lane 3 loads a from another column block
  kBadLdm,            ///< ldm 12, not a multiple of 8 elements
  kMisaligned,        ///< a loaded from 8 bytes past an aligned address
  kUnalignedShared,   ///< from a __shared__ array without __align__(32)
  kLaneDependent,     ///< lane 0 zeroes its x[0] of a
  kIndexDependent,    ///< every lane zeroes x[0..3] of a (some mapping)
  kStoreReadNoSync,   ///< stored to shared, read by other lanes: no sync
  kStoreReadSync,     ///< the same with the __syncwarp it needs
};
void misuse(Misuse what, const __nv_bfloat16 *A, const __nv_bfloat16 *B,
            float *D);

namespace ref {
inline uint32_t bits(float x) {
  uint32_t u;
  std::memcpy(&u, &x, sizeof u);
  return u;
}
inline float fromBits(uint32_t u) {
  float x;
  std::memcpy(&x, &u, sizeof x);
  return x;
}
/// What a tensor core reads of a float as tf32: the low 13 bits dropped.
inline float truncate(float x) { return fromBits(bits(x) & 0xffffe000u); }
/// cvt.rna.tf32.f32, written out independently of emu_wmma.cpp: the value
/// rounded to 10 mantissa bits, to nearest, ties away from zero; Inf and
/// NaN truncated (as an H200 does: a NaN with its payload in the low 13
/// bits becomes an Inf).
inline float rna(float x) {
  if (!std::isfinite(x))
    return truncate(x);
  if (x == 0)
    return x;
  int e;             // |x| in [2^(e-1), 2^e): 11 significant bits, or TF32's
  std::frexp(x, &e); // subnormal step 2^-136
  const int q = e - 11 > -136 ? e - 11 : -136;
  // std::round: halfway cases away from zero; a float of 2^128 is Inf.
  return float(std::ldexp(std::round(std::ldexp(double(x), -q)), q));
}
} // namespace ref

} // namespace wmmatest

#endif
