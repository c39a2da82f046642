//===- emu_wmma.cpp - the emulated WMMA calls (fake/mma.h) ----------------===//
//
// Each call is a warp barrier (emu::warpCollective) and then:
//
//   load_matrix_sync   each lane reads the whole tile, rows x cols elements
//                      at stride ldm and nothing else, into its own order
//                      ("waits until all warp lanes have arrived, then
//                      loads", as CUDA documents it).
//   store_matrix_sync  each lane writes its own share of the tile, every
//                      element once. No barrier follows, as none does on a
//                      GPU: a lane reading what another lane stored needs
//                      __syncwarp() (or __syncthreads()) in between, and
//                      here reads NaN poison or stale data without one.
//   mma_sync           the first lane to leave computes D = A B + C once
//                      and writes every lane's d (d may be c): fp32, each
//                      product exact (bf16 x bf16 and tf32 x tf32 fit a
//                      float), summed onto C with k ascending; tf32 inputs
//                      lose their low 13 mantissa bits (truncated), as the
//                      tensor cores ignore them, so a kernel that forgets
//                      __float_to_tf32 still gets TF32 products. A GPU sums
//                      in its own order and internal precision: the last
//                      bits of a long sum may differ.
//
// The first lane to leave also checks the call for the warp and reports
// each problem once (emu::note): lanes passing different operands, a
// pointer a GPU would not have 32-byte aligned, an ldm not a multiple of
// 16 bytes, a store whose rows overlap, lanes whose copies of a fragment
// differ (code that depended on the unspecified element mapping).
//
// Checked on an H200 with kernels/WmmaTestKernels.cu built by nvcc:
// __float_to_tf32 gave these bits for the special cases and 100000 random
// floats; the tensor cores read unrounded tf32 inputs truncated; their
// tiles were within 2e-6 (normwise) of this model, last bits apart, and
// wrote nothing between a tile's rows. There, a lane skipping mma_sync
// hung the kernel, and an ldm of 12 bf16, a pointer 8 bytes off or lanes
// passing different pointers gave wrong tiles without an error.
//
//===----------------------------------------------------------------------===//

#include "mma.h"

#include <cstdarg>
#include <cstdint>
#include <cstdio>
#include <cstring>

namespace emu {
namespace wmma {
namespace {

/// The calls, as warp-barrier modes (distinct from the shuffles').
enum Op { kLoad = 20, kStore = 21, kMma = 22 };

const char *opName(Op op) {
  return op == kLoad    ? "load_matrix_sync"
         : op == kStore ? "store_matrix_sync"
                        : "mma_sync";
}

/// One lane's call, published to its warp at the barrier.
struct Call {
  Op op;
  int line;
  const void *p = nullptr; ///< load, store: the tile in memory
  unsigned ldm = 0;
  bool colMajor = false;
  Frag f[4] = {}; ///< load, store: the fragment; mma: d, a, b, c
  bool tf32 = false;
};

constexpr int kMaxTile = 16 * 16;

/// Where lane `lane` keeps element e (row-major in the tile) of a fragment
/// of n elements (a power of two): an order of its own per lane and per
/// use, so that code relying on some mapping finds the copies differ.
int slot(int e, int lane, Use use, int n) {
  static const int kMul[] = {29, 45, 77}, kAdd[] = {3, 11, 5};
  return ((e + 37 * lane + kAdd[use]) * kMul[use]) & (n - 1);
}

/// The lane that writes element e of a stored tile (each lane a share).
int owner(int e) { return (e * 13 + 7) & 31; }

int size(const Frag &f) { return f.rows * f.cols; }
int elementBytes(const Frag &f) { return f.bf16 ? 2 : 4; }

/// Element e of lane `lane`'s copy of f: its bits, and its value.
uint32_t bitsAt(const Frag &f, int lane, int e) {
  const int s = slot(e, lane, f.use, size(f));
  if (f.bf16)
    return static_cast<const __nv_bfloat16 *>(f.x)[s].__x;
  uint32_t u;
  std::memcpy(&u, static_cast<const float *>(f.x) + s, sizeof u);
  return u;
}
float valueAt(const Frag &f, int lane, int e) {
  const int s = slot(e, lane, f.use, size(f));
  return f.bf16 ? __bfloat162float(static_cast<const __nv_bfloat16 *>(f.x)[s])
                : static_cast<const float *>(f.x)[s];
}

/// Element (r, c)'s offset in elements from the tile's pointer.
size_t offset(int r, int c, unsigned ldm, bool colMajor) {
  return colMajor ? size_t(c) * ldm + r : size_t(r) * ldm + c;
}

int myLane() { return curThread() % 32; }

void report(const Call &call, const char *fmt, ...) {
  char text[400];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(text, sizeof text, fmt, ap);
  va_end(ap);
  note("%s block (%u,%u,%u) warp %d: %s (line %d): %s", curKernel(),
       gBlockIdx.x, gBlockIdx.y, gBlockIdx.z, curThread() / 32, opName(call.op),
       call.line, text);
}

/// The lanes at this very call (a lane at another one is reported by the
/// barrier and left out), as lane numbers, ascending.
int sameCall(const Call &mine, const void *const lanes[32], int at[32]) {
  int n = 0;
  for (int l = 0; l < 32; ++l)
    if (lanes[l] && static_cast<const Call *>(lanes[l])->op == mine.op)
      at[n++] = l;
  return n;
}

/// The memory operand of a load or store, as the GPU needs it.
void checkMemory(const Call &call) {
  const Frag &f = call.f[0];
  const unsigned step = 16 / elementBytes(f);
  const size_t promised = sharedAlignment(call.p);
  if (reinterpret_cast<uintptr_t>(call.p) % 32 != 0)
    report(call, "pointer %p is not 32-byte (256-bit) aligned", call.p);
  else if (promised != 0 && promised < 32)
    report(call,
           "pointer %p into a __shared__ array a GPU only aligns to %zu "
           "bytes there (declare the array __align__(32))",
           call.p, promised);
  if (call.ldm % step != 0)
    report(call, "ldm %u is not a multiple of %u elements (16 bytes)", call.ldm,
           step);
  const int extent = call.colMajor ? f.rows : f.cols;
  if (call.op == kStore && call.ldm < unsigned(extent))
    report(call,
           "ldm %u is below the tile's %d %s: its %s overlap, and which "
           "lane's write lands is unspecified",
           call.ldm, extent, call.colMajor ? "rows" : "columns",
           call.colMajor ? "columns" : "rows");
}

/// Reports lanes whose copies of fragment k differ (the first lane's is
/// the reference).
void checkCopies(const Call &mine, const void *const lanes[32], int k,
                 const char *what) {
  int at[32];
  const int n = sameCall(mine, lanes, at);
  const Frag &ref = static_cast<const Call *>(lanes[at[0]])->f[k];
  for (int i = 1; i < n; ++i) {
    const Frag &f = static_cast<const Call *>(lanes[at[i]])->f[k];
    for (int e = 0; e < size(f); ++e)
      if (bitsAt(f, at[i], e) != bitsAt(ref, at[0], e)) {
        report(mine,
               "lanes %d and %d hold different %s (element (%d,%d): %g and "
               "%g): the kernel treated x[] by index or by lane, but which "
               "elements a lane holds is unspecified; only the same "
               "operation on every x[i] is portable",
               at[0], at[i], what, e / f.cols, e % f.cols,
               valueAt(ref, at[0], e), valueAt(f, at[i], e));
        return;
      }
  }
}

/// The first lane to leave a call checks it for the warp.
void check(const Call &mine, const void *const lanes[32]) {
  int at[32];
  const int n = sameCall(mine, lanes, at);
  const Call &first = *static_cast<const Call *>(lanes[at[0]]);
  for (int i = 1; i < n; ++i) {
    const Call &o = *static_cast<const Call *>(lanes[at[i]]);
    if (o.p != first.p || o.ldm != first.ldm || o.colMajor != first.colMajor) {
      report(mine,
             "lanes %d and %d pass different operands (pointer %p and %p, "
             "ldm %u and %u, %s and %s major): all 32 lanes must pass the "
             "same",
             at[0], at[i], first.p, o.p, first.ldm, o.ldm,
             first.colMajor ? "column" : "row", o.colMajor ? "column" : "row");
      break;
    }
  }
  if (mine.op == kMma) {
    checkCopies(mine, lanes, 1, "matrix_a fragments");
    checkCopies(mine, lanes, 2, "matrix_b fragments");
    checkCopies(mine, lanes, 3, "accumulators (c)");
    return;
  }
  checkMemory(mine);
  if (mine.op == kStore)
    checkCopies(mine, lanes, 0, "accumulators");
}

/// The tensor core's view of a tf32 operand: the low 13 bits ignored.
float truncateTF32(float x) {
  uint32_t u;
  std::memcpy(&u, &x, sizeof u);
  u &= 0xffffe000u;
  std::memcpy(&x, &u, sizeof u);
  return x;
}

} // namespace

void load(const Frag &f, const void *p, unsigned ldm, bool colMajor, int line) {
  Call call{kLoad, line, p, ldm, colMajor, {f}};
  const void *lanes[32];
  if (warpCollective(&call, lanes, kLoad, line))
    check(call, lanes);
  const int lane = myLane(), bytes = elementBytes(f);
  const char *src = static_cast<const char *>(p);
  char *x = static_cast<char *>(f.x);
  for (int e = 0; e < size(f); ++e)
    std::memcpy(x + size_t(slot(e, lane, f.use, size(f))) * bytes,
                src + offset(e / f.cols, e % f.cols, ldm, colMajor) * bytes,
                bytes);
}

void store(void *p, const Frag &f, unsigned ldm, bool colMajor, int line) {
  Call call{kStore, line, p, ldm, colMajor, {f}};
  const void *lanes[32];
  if (warpCollective(&call, lanes, kStore, line))
    check(call, lanes);
  const int lane = myLane(), bytes = elementBytes(f);
  char *dst = static_cast<char *>(p);
  const char *x = static_cast<const char *>(f.x);
  for (int e = 0; e < size(f); ++e)
    if (owner(e) == lane)
      std::memcpy(dst + offset(e / f.cols, e % f.cols, ldm, colMajor) * bytes,
                  x + size_t(slot(e, lane, f.use, size(f))) * bytes, bytes);
}

void mma(const Frag &d, const Frag &a, const Frag &b, const Frag &c, bool tf32,
         int line) {
  Call call{kMma, line};
  call.f[0] = d, call.f[1] = a, call.f[2] = b, call.f[3] = c;
  call.tf32 = tf32;
  const void *lanes[32];
  if (!warpCollective(&call, lanes, kMma, line))
    return; // the first lane to leave has done it for the warp
  check(call, lanes);
  // This lane's copies (any other lane's that differ were reported).
  const int me = myLane(), M = a.rows, K = a.cols, N = b.cols;
  float A[kMaxTile], B[kMaxTile], D[kMaxTile];
  for (int e = 0; e < M * K; ++e)
    A[e] = tf32 ? truncateTF32(valueAt(a, me, e)) : valueAt(a, me, e);
  for (int e = 0; e < K * N; ++e)
    B[e] = tf32 ? truncateTF32(valueAt(b, me, e)) : valueAt(b, me, e);
  for (int r = 0; r < M; ++r)
    for (int col = 0; col < N; ++col) {
      float acc = valueAt(c, me, r * N + col);
      for (int k = 0; k < K; ++k)
        acc += A[r * K + k] * B[k * N + col]; // exact product, one rounding
      D[r * N + col] = acc;
    }
  // Every lane's d, c read first (d may be c).
  int at[32];
  const int n = sameCall(call, lanes, at);
  for (int i = 0; i < n; ++i) {
    const Frag &dl = static_cast<const Call *>(lanes[at[i]])->f[0];
    float *x = static_cast<float *>(dl.x);
    for (int e = 0; e < M * N; ++e)
      x[slot(e, at[i], kAcc, M * N)] = D[e];
  }
}

float toTF32(float x) {
  uint32_t u;
  std::memcpy(&u, &x, sizeof u);
  // To nearest, ties away from zero: add half of the dropped 13 bits'
  // unit to the magnitude; a carry rounds into the exponent (to Inf above
  // the largest TF32). Inf and NaN only lose the 13 bits, as on an H200
  // (a NaN whose payload lay there becomes an Inf; 0xffffffff, the
  // poison, stays a NaN).
  if ((u & 0x7f800000u) != 0x7f800000u)
    u += 0x1000u;
  u &= 0xffffe000u;
  std::memcpy(&x, &u, sizeof u);
  return x;
}

} // namespace wmma
} // namespace emu
