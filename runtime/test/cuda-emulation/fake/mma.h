//===- mma.h - the emulated WMMA API (nvcuda::wmma), a subset ---*- C++ -*-===//
//
// CUDA's warp matrix functions for the emulated kernels, with the real
// header's names and signatures, for exactly these fragments:
//
//   m16n16k16  matrix_a, matrix_b  __nv_bfloat16, row_major or col_major
//              accumulator         float
//   m16n16k8   matrix_a, matrix_b  precision::tf32 (float storage)
//              accumulator         float
//
// and fill_fragment, load_matrix_sync, store_matrix_sync, mma_sync and
// __float_to_tf32 on them. Any other fragment is an incomplete type: a
// compile error, rather than an emulation nobody checked.
//
// A fragment holds the WHOLE tile in every lane. Which elements of the
// tile a lane's x[] holds, and in which order, is unspecified on a GPU
// (and differs between architectures), so a kernel may only treat every
// x[i] alike: scale it, fill it, convert it. Here num_elements is the
// tile's rows x cols (256, 128 for a tf32 matrix_a or matrix_b; a GPU has
// 8 or 4), and each lane keeps the elements in an order of its own (one
// permutation per lane and per use). Uniform element-wise code works as
// on a GPU; code that depends on a mapping (a particular x[i], values
// that differ between lanes, an accumulator's x[] copied into a matrix_a)
// makes the lanes' copies differ, which the next mma_sync or
// store_matrix_sync reports, or computes a wrong tile: never, by chance,
// the right one.
//
// Every call but fill_fragment is warp-collective, a warp barrier as a
// shuffle is (emu::warpCollective): a lane missing, exited or at another
// call is reported as for a shuffle, and so are lanes passing different
// pointers, ldm or layouts, a pointer not 32-byte aligned (for a __shared__
// array, by the alignment it was declared with: use __align__(32)) and an
// ldm not a multiple of 16 bytes. emu_wmma.cpp says what each call does.
//
//===----------------------------------------------------------------------===//
#ifndef CUEMU_FAKE_MMA_H
#define CUEMU_FAKE_MMA_H

#include "emu.h"

#include <type_traits>

namespace nvcuda {
namespace wmma {

struct row_major;
struct col_major;
struct matrix_a;
struct matrix_b;
struct accumulator;
namespace precision {
struct tf32;
} // namespace precision

enum layout_t { mem_row_major, mem_col_major };

template <typename T> struct helper_traits {
  typedef T element_type;
  typedef T storage_element_type;
  typedef T fill_argument_type;
};
template <> struct helper_traits<precision::tf32> {
  typedef precision::tf32 element_type;
  typedef float storage_element_type;
  typedef float fill_argument_type;
};

template <typename T, int size> struct __frag_base {
  enum { num_elements = size };
  enum { num_storage_elements = size };
  typedef T element_type;
  typedef typename helper_traits<T>::storage_element_type storage_element_type;
  storage_element_type x[size];
};

template <typename FragEleType, int size>
inline void fill_fragment(
    __frag_base<FragEleType, size> &f,
    const typename helper_traits<FragEleType>::fill_argument_type &in) {
  for (int i = 0; i < size; ++i)
    f.x[i] = in;
}

template <typename Use, int m, int n, int k, typename T, typename Layout = void>
class fragment;

// The whole tile: matrix_a m x k, matrix_b k x n, accumulator m x n.
template <typename Layout>
class fragment<matrix_a, 16, 16, 16, __nv_bfloat16, Layout>
    : public __frag_base<__nv_bfloat16, 16 * 16> {
  static_assert(std::is_same<Layout, row_major>::value ||
                    std::is_same<Layout, col_major>::value,
                "matrix_a needs row_major or col_major");
};
template <typename Layout>
class fragment<matrix_b, 16, 16, 16, __nv_bfloat16, Layout>
    : public __frag_base<__nv_bfloat16, 16 * 16> {
  static_assert(std::is_same<Layout, row_major>::value ||
                    std::is_same<Layout, col_major>::value,
                "matrix_b needs row_major or col_major");
};
template <>
class fragment<accumulator, 16, 16, 16, float>
    : public __frag_base<float, 16 * 16> {};
template <typename Layout>
class fragment<matrix_a, 16, 16, 8, precision::tf32, Layout>
    : public __frag_base<precision::tf32, 16 * 8> {
  static_assert(std::is_same<Layout, row_major>::value ||
                    std::is_same<Layout, col_major>::value,
                "matrix_a needs row_major or col_major");
};
template <typename Layout>
class fragment<matrix_b, 16, 16, 8, precision::tf32, Layout>
    : public __frag_base<precision::tf32, 8 * 16> {
  static_assert(std::is_same<Layout, row_major>::value ||
                    std::is_same<Layout, col_major>::value,
                "matrix_b needs row_major or col_major");
};
template <>
class fragment<accumulator, 16, 16, 8, float>
    : public __frag_base<float, 16 * 16> {};

} // namespace wmma
} // namespace nvcuda

// ---------------------------------------------------------------- emulation
namespace emu {
namespace wmma {

enum Use { kA, kB, kAcc };

/// A fragment as emu_wmma.cpp sees it: the lane's copy of the tile.
struct Frag {
  void *x;        ///< the fragment's x[], in the lane's order
  int rows, cols; ///< matrix_a m x k, matrix_b k x n, accumulator m x n
  Use use;        ///< which order the lanes keep it in
  bool bf16;      ///< __nv_bfloat16 elements, else float
};

/// The call site's line, a default argument (no int converts to it, so a
/// layout passed where the real API takes none stays an error).
struct Line {
  int v;
};

template <typename U, int M, int N, int K, typename T, typename L>
Frag frag(const ::nvcuda::wmma::fragment<U, M, N, K, T, L> &f) {
  namespace w = ::nvcuda::wmma;
  const Use use = std::is_same<U, w::matrix_a>::value   ? kA
                  : std::is_same<U, w::matrix_b>::value ? kB
                                                        : kAcc;
  return {const_cast<void *>(static_cast<const void *>(f.x)), use == kB ? K : M,
          use == kA ? K : N, use, std::is_same<T, __nv_bfloat16>::value};
}

/// The warp-collective calls (emu_wmma.cpp); colMajor: the memory's layout.
void load(const Frag &f, const void *p, unsigned ldm, bool colMajor, int line);
void store(void *p, const Frag &f, unsigned ldm, bool colMajor, int line);
void mma(const Frag &d, const Frag &a, const Frag &b, const Frag &c, bool tf32,
         int line);
/// cvt.rna.tf32.f32: to 10 mantissa bits, to nearest, ties away from zero
/// (Inf and NaN truncated), the low 13 bits zero.
float toTF32(float x);

} // namespace wmma
} // namespace emu

namespace nvcuda {
namespace wmma {

inline float __float_to_tf32(float in) { return ::emu::wmma::toTF32(in); }

#define CUEMU_WMMA_LOAD(USE, K, T, P)                                          \
  inline void load_matrix_sync(fragment<USE, 16, 16, K, T, row_major> &a,      \
                               const P *p, unsigned ldm,                       \
                               ::emu::wmma::Line line = {__builtin_LINE()}) {  \
    ::emu::wmma::load(::emu::wmma::frag(a), p, ldm, false, line.v);            \
  }                                                                            \
  inline void load_matrix_sync(fragment<USE, 16, 16, K, T, col_major> &a,      \
                               const P *p, unsigned ldm,                       \
                               ::emu::wmma::Line line = {__builtin_LINE()}) {  \
    ::emu::wmma::load(::emu::wmma::frag(a), p, ldm, true, line.v);             \
  }
CUEMU_WMMA_LOAD(matrix_a, 16, __nv_bfloat16, __nv_bfloat16)
CUEMU_WMMA_LOAD(matrix_b, 16, __nv_bfloat16, __nv_bfloat16)
CUEMU_WMMA_LOAD(matrix_a, 8, precision::tf32, float)
CUEMU_WMMA_LOAD(matrix_b, 8, precision::tf32, float)
#undef CUEMU_WMMA_LOAD

#define CUEMU_WMMA_ACC(K)                                                      \
  inline void load_matrix_sync(fragment<accumulator, 16, 16, K, float> &a,     \
                               const float *p, unsigned ldm, layout_t layout,  \
                               ::emu::wmma::Line line = {__builtin_LINE()}) {  \
    ::emu::wmma::load(::emu::wmma::frag(a), p, ldm, layout == mem_col_major,   \
                      line.v);                                                 \
  }                                                                            \
  inline void store_matrix_sync(                                               \
      float *p, const fragment<accumulator, 16, 16, K, float> &a,              \
      unsigned ldm, layout_t layout,                                           \
      ::emu::wmma::Line line = {__builtin_LINE()}) {                           \
    ::emu::wmma::store(p, ::emu::wmma::frag(a), ldm, layout == mem_col_major,  \
                       line.v);                                                \
  }
CUEMU_WMMA_ACC(16)
CUEMU_WMMA_ACC(8)
#undef CUEMU_WMMA_ACC

#define CUEMU_WMMA_MMA(K, T, LA, LB)                                           \
  inline void mma_sync(fragment<accumulator, 16, 16, K, float> &d,             \
                       const fragment<matrix_a, 16, 16, K, T, LA> &a,          \
                       const fragment<matrix_b, 16, 16, K, T, LB> &b,          \
                       const fragment<accumulator, 16, 16, K, float> &c,       \
                       ::emu::wmma::Line line = {__builtin_LINE()}) {          \
    ::emu::wmma::mma(::emu::wmma::frag(d), ::emu::wmma::frag(a),               \
                     ::emu::wmma::frag(b), ::emu::wmma::frag(c), K == 8,       \
                     line.v);                                                  \
  }
CUEMU_WMMA_MMA(16, __nv_bfloat16, row_major, row_major)
CUEMU_WMMA_MMA(16, __nv_bfloat16, row_major, col_major)
CUEMU_WMMA_MMA(16, __nv_bfloat16, col_major, row_major)
CUEMU_WMMA_MMA(16, __nv_bfloat16, col_major, col_major)
CUEMU_WMMA_MMA(8, precision::tf32, row_major, row_major)
CUEMU_WMMA_MMA(8, precision::tf32, row_major, col_major)
CUEMU_WMMA_MMA(8, precision::tf32, col_major, row_major)
CUEMU_WMMA_MMA(8, precision::tf32, col_major, col_major)
#undef CUEMU_WMMA_MMA

} // namespace wmma
} // namespace nvcuda

#endif
