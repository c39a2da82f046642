//===- EmuAttentionTest.cpp - attention, materialized and blocked ---------===//
//
// Part of fsdp-cuda-emulation-test (CudaEmulationTest.cpp says how the
// kernels run and are checked).
//
//===----------------------------------------------------------------------===//

#include "EmulationCheck.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <vector>

// ------------------------------------------------------------ attention
// " KV=n" in a test's name when there are fewer kv heads than heads, and
// " W=n" with a sliding window.
static std::string kvName(int NH, int KV, int W = 0) {
  return (KV == NH ? std::string() : " KV=" + std::to_string(KV)) +
         (W ? " W=" + std::to_string(W) : std::string());
}

// The first key row i sees under a sliding window of W keys (0: none).
static int windowLo(int i, int W) { return W > 0 && i >= W ? i - W + 1 : 0; }

// In bf16 the GPU rounds the scores (and dP) where cuBLAS stores them in
// the T x T buffers before the softmax reads them, which the CPU's widened
// kernel does not: a few bf16 units apart (kAttentionUlps).
constexpr double kAttentionUlps = 2;
/// What TF32 products add to the blocked kernels' error on tensor cores,
/// of the largest value: the materialized form's TF32 GEMMs are held to
/// 5e-3 on the GPU (CudaKernelsTest.cpp).
constexpr double kTensorCoreTol = 5e-3;
// KV kv heads (0: NH); with fewer, qkv is C + 2 KV hs wide. (The grouped
// cases take seeds of their own: the others' stay as they were.) W: the
// sliding window (0: none).
template <typename E>
void testAttention(int B, int T, int C, int NH, unsigned seed, int KV, int W) {
  KV = KV ? KV : NH;
  char nm[128];
  snprintf(nm, sizeof nm, "attention%s B=%d T=%d C=%d NH=%d%s",
           kIsBF16<E> ? " bf16" : "", B, T, C, NH, kvName(NH, KV, W).c_str());
  std::mt19937 rng(seed);
  auto qkv = randv(size_t(B) * T * (C + 2 * KV * (C / NH)), rng, -2, 2),
       dout = randv(size_t(B) * T * C, rng);
  roundTo<E>(qkv), roundTo<E>(dout);
  const size_t PT = size_t(B) * NH * T * T;
  std::vector<float> rout(size_t(B) * T * C), rprobs(PT, NAN);
  cp::attentionForward(*gBlas, rout.data(), rprobs.data(), qkv.data(), B, T, C,
                       NH, KV, W);
  roundTo<E>(rout), roundTo<E>(rprobs);
  std::vector<float> rdqkv(qkv.size()), rscr(PT, NAN);
  cp::attentionBackward(*gBlas, rdqkv.data(), rscr.data(), dout.data(),
                        qkv.data(), rprobs.data(), B, T, C, NH, KV, W);
  roundTo<E>(rdqkv), roundTo<E>(rscr);
  Outs o = runOrders(std::string(nm) + " fwd", [&]() -> Outs {
    BufT<E> out(rout.size()), probs(PT), bq(qkv.size());
    bq.set(qkv);
    cu::attentionForward(ctx, out.p, probs.p, bq.p, B, T, C, NH, KV, W);
    checkCanary(nm, out), checkCanary(nm, probs);
    return {out.vec(), probs.vec()};
  });
  compare(std::string(nm) + " out", o[0].data(), rout.data(), rout.size(),
          tol<E>(2e-5, kAttentionUlps));
  compare(std::string(nm) + " probs", o[1].data(), rprobs.data(), PT,
          tol<E>(2e-5, kAttentionUlps));
  size_t nz = 0;
  for (size_t r = 0; r < size_t(B) * NH * T; ++r)
    for (int j = 0; j < T; ++j)
      if ((j > int(r % T) || j < windowLo(r % T, W)) && o[1][r * T + j] != 0.0f)
        ++nz;
  if (nz)
    fail(std::string(nm) + ": nonzero probs outside the window");
  // backward from the GPU's probs (as the runtime would)
  auto gprobs = o[1];
  o = runOrders(std::string(nm) + " bwd", [&]() -> Outs {
    BufT<E> dq(qkv.size()), scr(PT), bq(qkv.size()), bd(dout.size()), bp(PT);
    bq.set(qkv), bd.set(dout), bp.set(gprobs);
    cu::attentionBackward(ctx, dq.p, scr.p, bd.p, bq.p, bp.p, B, T, C, NH, KV,
                          W);
    checkCanary(nm, dq), checkCanary(nm, scr);
    return {dq.vec(), scr.vec()};
  });
  compare(std::string(nm) + " dqkv", o[0].data(), rdqkv.data(), rdqkv.size(),
          tol<E>(5e-5, kAttentionUlps));
  // dS: compare where the CPU wrote it (j < blockEnd(i)); zero above diag.
  std::vector<float> gs = o[1], rs = rscr;
  for (size_t r = 0; r < size_t(B) * NH * T; ++r) {
    const int i = r % T;
    const int be = std::min(T, (i / 256 + 1) * 256);
    for (int j = 0; j < T; ++j)
      if (j >= be)
        gs[r * T + j] = rs[r * T + j] = 0;
  }
  compare(std::string(nm) + " dS", gs.data(), rs.data(), PT,
          tol<E>(5e-5, kAttentionUlps));
  size_t nz2 = 0;
  for (size_t r = 0; r < size_t(B) * NH * T; ++r)
    for (int j = 0; j < T; ++j)
      if ((j > int(r % T) || j < windowLo(r % T, W)) && o[1][r * T + j] != 0.0f)
        ++nz2;
  if (nz2)
    fail(std::string(nm) + ": nonzero dS outside the window");
}

// ------------------------------------------------------------ blocked
// The memory-efficient attention (BlockedAttention.cu) against the CPU's
// blocked kernels (out, lse, dqkv) and the materialized ones (out, dqkv):
// T across the tiles (32 rows, 16 above hs = 64), head sizes in each of
// the compiled buckets (32, 64, 128) and at their edges.
// In bf16 the backward reads the rounded out (a bf16 buffer in the plan),
// so its references do too; the materialized reference keeps its probs in
// float (no T x T buffer here), a few bf16 units from the blocked kernels.
// KV kv heads (0: NH) and the window W, as testAttention. With `tc` the
// kernels on TF32 tensor cores (Context::tf32: TensorCoreForward.cu and
// TensorCoreBackward.cu), to TF32's rounding on top (kTensorCoreTol of the
// largest value). `spread` scales key j by 1 + spread j / T, so that a
// row's largest score keeps growing along the keys (the forward's lazy
// rescale).
template <typename E>
void testBlocked(int B, int T, int C, int NH, unsigned seed, int KV, int W,
                 bool tc, float spread) {
  KV = KV ? KV : NH;
  const cu::Context c{ctx.stream, ctx.blas, tc};
  const double extra = tc ? kTensorCoreTol : 0.0;
  char nm[160];
  snprintf(nm, sizeof nm, "blocked%s%s B=%d T=%d C=%d NH=%d%s%s",
           tc ? " tensor cores" : "", kIsBF16<E> ? " bf16" : "", B, T, C, NH,
           kvName(NH, KV, W).c_str(), spread ? " spread" : "");
  std::mt19937 rng(seed);
  const int ld = C + 2 * KV * (C / NH);
  auto qkv = randv(size_t(B) * T * ld, rng, -2, 2),
       dout = randv(size_t(B) * T * C, rng);
  for (size_t r = 0; spread && r < size_t(B) * T; ++r)
    for (int d = C; d < C + KV * (C / NH); ++d)
      qkv[r * ld + d] *= 1.0f + spread * float(r % T) / float(T);
  roundTo<E>(qkv), roundTo<E>(dout);
  const size_t PT = size_t(B) * NH * T * T, L = size_t(B) * NH * T;
  std::vector<float> rout(size_t(B) * T * C), rlse(L), rdqkv(qkv.size());
  cp::blockedAttentionForward(*gBlas, rout.data(), rlse.data(), qkv.data(), B,
                              T, C, NH, KV, W);
  roundTo<E>(rout);
  cp::blockedAttentionBackward(*gBlas, rdqkv.data(), dout.data(), qkv.data(),
                               rout.data(), rlse.data(), B, T, C, NH, KV, W);
  roundTo<E>(rdqkv);
  std::vector<float> mout(rout.size()), mprobs(PT), mdqkv(qkv.size()), mscr(PT);
  cp::attentionForward(*gBlas, mout.data(), mprobs.data(), qkv.data(), B, T, C,
                       NH, KV, W);
  cp::attentionBackward(*gBlas, mdqkv.data(), mscr.data(), dout.data(),
                        qkv.data(), mprobs.data(), B, T, C, NH, KV, W);
  roundTo<E>(mout), roundTo<E>(mdqkv);
  Outs o = runOrders(std::string(nm) + " fwd", [&]() -> Outs {
    BufT<E> out(rout.size()), bq(qkv.size());
    Buf lse(L);
    bq.set(qkv);
    cu::blockedAttentionForward(c, out.p, lse.p, bq.p, B, T, C, NH, KV, W);
    checkCanary(nm, out), checkCanary(nm, lse);
    return {out.vec(), lse.vec()};
  });
  const std::string n = nm;
  compare(n + " out", o[0].data(), rout.data(), rout.size(),
          tol<E>(2e-5, 1) + extra);
  compare(n + " out vs materialized", o[0].data(), mout.data(), mout.size(),
          tol<E>(2e-5, 1) + extra);
  compare(n + " lse", o[1].data(), rlse.data(), L, 2e-6 + extra);
  // backward from the GPU's out and lse (as the runtime would)
  auto gout = o[0], glse = o[1];
  o = runOrders(n + " bwd", [&]() -> Outs {
    BufT<E> dq(qkv.size()), bq(qkv.size()), bd(dout.size()), bo(gout.size());
    Buf bl(L);
    bq.set(qkv), bd.set(dout), bo.set(gout), bl.set(glse);
    cu::blockedAttentionBackward(c, dq.p, bd.p, bq.p, bo.p, bl.p, B, T, C, NH,
                                 KV, W);
    checkCanary(nm, dq);
    return {dq.vec()};
  });
  compare(n + " dqkv", o[0].data(), rdqkv.data(), rdqkv.size(),
          tol<E>(5e-5, 1) + extra);
  compare(n + " dqkv vs materialized", o[0].data(), mdqkv.data(), mdqkv.size(),
          tol<E>(5e-5, kAttentionUlps) + extra);
}

// The blocked kernels skip the tiles wholly outside the window: NaN in the
// keys and values of rows 0..31 (the first tile at hs = 32) with a window
// of 8 at T = 130 must leave the rows from 64 on finite (their windows
// start at 57 or later: they never load tile 0), as the CPU's test does;
// without the window they are NaN.
static void testBlockedWindowSkips() {
  const int B = 1, T = 130, NH = 2, C = 64, ld = 3 * C, W = 8;
  std::mt19937 rng(924u);
  auto qkv = randv(size_t(B) * T * ld, rng, -2, 2),
       dout = randv(size_t(B) * T * C, rng);
  for (int j = 0; j < 32; ++j)
    for (int d = C; d < ld; ++d)
      qkv[size_t(j) * ld + d] = NAN;
  for (int w : {W, 0}) {
    BufT<float> out(size_t(T) * C), bq(qkv.size()), dq(qkv.size()),
        bd(dout.size());
    Buf lse(size_t(NH) * T);
    bq.set(qkv), bd.set(dout);
    cu::blockedAttentionForward(ctx, out.p, lse.p, bq.p, B, T, C, NH, NH, w);
    cu::blockedAttentionBackward(ctx, dq.p, bd.p, bq.p, out.p, lse.p, B, T, C,
                                 NH, NH, w);
    bool finite = true;
    for (int i = 64; i < T; ++i) {
      for (int d = 0; d < C; ++d)
        finite &= std::isfinite(out.p[size_t(i) * C + d]);
      for (int d = 0; d < ld; ++d)
        finite &= std::isfinite(dq.p[size_t(i) * ld + d]);
      for (int h = 0; h < NH; ++h)
        finite &= std::isfinite(lse.p[size_t(h) * T + i]);
    }
    ++gChecks;
    if (finite != (w != 0))
      fail(w ? "blocked W=8: a row from 64 on loaded tile 0 (NaN)"
             : "blocked without a window: tile 0's NaN did not reach the "
               "later rows, the skip check proves nothing");
  }
}

// Shapes the blocked kernels refuse: recorded as errors, nothing written.
static void testBlockedErrors(int C, int NH) {
  const std::string nm =
      "blocked error C=" + std::to_string(C) + " NH=" + std::to_string(NH);
  const int B = 1, T = 3;
  Buf out(size_t(T) * C), lse(size_t(NH) * T), q(size_t(T) * 3 * C, 0, 0.0f);
  Buf dq(size_t(T) * 3 * C);
  std::string msg;
  for (int pass = 0; pass < 2; ++pass) {
    ++gChecks;
    if (pass == 0)
      cu::blockedAttentionForward(ctx, out.p, lse.p, q.p, B, T, C, NH, NH, 0);
    else
      cu::blockedAttentionBackward(ctx, dq.p, out.p, q.p, out.p, lse.p, B, T, C,
                                   NH, NH, 0);
    if (!cu::takeError(msg))
      fail(nm + ": no error recorded");
    else if (getenv("VERBOSE"))
      printf("ok   %s: %s\n", nm.c_str(), msg.c_str());
  }
  for (size_t i = 0; i < dq.n; ++i)
    if (!std::isnan(dq.p[i]) || (i < out.n && !std::isnan(out.p[i]))) {
      fail(nm + ": output written");
      break;
    }
}

void groupAttention(unsigned &seed) {
  testAttention(1, 1, 4, 1, seed++);
  testAttention(1, 1, 6, 3, seed++);
  testAttention(2, 5, 6, 3, seed++);
  testAttention(2, 33, 12, 3, seed++);
  testAttention(1, 70, 8, 1, seed++);
  testAttention(2, 70, 9, 3, seed++);
  testAttention(1, 33, 64, 1, seed++);
  testAttention(1, 300, 8, 1, seed++);
  testAttention(1, 520, 4, 2, seed++);
  // Grouped-query: kv heads of 2 and 3 query heads, multi-query (KV = 1),
  // and two row blocks.
  testAttention(2, 5, 8, 4, 905u, /*KV=*/2);
  testAttention(2, 33, 24, 6, 906u, /*KV=*/2);
  testAttention(1, 70, 12, 3, 907u, /*KV=*/1);
  testAttention(1, 300, 16, 4, 908u, /*KV=*/2);
  // Sliding windows: one key, 4 keys, grouped, across two row blocks.
  testAttention(1, 9, 8, 2, 913u, 0, /*W=*/1);
  testAttention(2, 33, 12, 3, 914u, 0, /*W=*/4);
  testAttention(2, 33, 16, 4, 915u, /*KV=*/2, /*W=*/7);
  testAttention(1, 300, 8, 1, 916u, 0, /*W=*/100);
  printf("attention done (%d failures so far)\n", gFailures);
}

// The kernels on TF32 tensor cores: each bucket (32, 64, 128), T off the
// tiles and across several (blocks of 128 query rows at head size <= 64,
// 64 at 128; 128 keys in the key pass, 32 at 128), padded head sizes,
// grouped query heads, windows inside a tile and across tiles, bf16; T
// below one tile, a multiple of it and one past; and keys whose scale
// grows along T so that the forward's rows outgrow their reference
// maximum (its rescale).
void groupTensorCores(unsigned &seed) {
  const bool tc = true;
  testBlocked(1, 1, 4, 1, seed++, 0, 0, tc);    // T = 1, hs = 4
  testBlocked(2, 37, 64, 2, seed++, 0, 0, tc);  // hs = 32
  testBlocked(1, 130, 64, 1, seed++, 0, 0, tc); // GPT-2's head size
  testBlocked(1, 70, 128, 1, seed++, 0, 0, tc); // Llama's head size
  testBlocked(2, 33, 66, 2, seed++, 0, 0, tc);  // hs = 33: bucket 64
  testBlocked(1, 40, 130, 2, seed++, 0, 0, tc); // hs = 65: bucket 128
  testBlocked(1, 65, 512, 4, 931u, 2, 0, tc);   // grouped, hs = 128
  testBlocked(2, 70, 36, 3, 932u, 0, 5, tc);    // window inside a tile
  testBlocked(1, 130, 128, 1, 934u, 0, 17, tc); // the same at hs = 128
  testBlocked<BF16>(1, 130, 64, 1, 935u, 0, 0, tc);
  testBlocked<BF16>(1, 65, 512, 4, 936u, 2, 9, tc);
  testBlocked(2, 5, 128, 2, 940u, 0, 0, tc);      // hs = 64, T < a tile
  testBlocked(1, 128, 64, 2, 941u, 0, 0, tc);     // hs = 32, T = 128
  testBlocked(1, 129, 128, 2, 942u, 0, 0, tc);    // hs = 64, one past
  testBlocked(1, 136, 160, 2, 943u, 0, 0, tc);    // hs = 80: bucket 128
  testBlocked(1, 64, 256, 2, 944u, 0, 0, tc);     // hs = 128, T = 64
  testBlocked(3, 40, 96, 3, 945u, 0, 0, tc);      // batches, heads (hs = 32)
  testBlocked(1, 140, 256, 4, 946u, 2, 0, tc);    // grouped, across tiles
  testBlocked(1, 150, 128, 2, 947u, 0, 70, tc);   // window across tiles
  testBlocked(1, 160, 64, 1, 948u, 0, 0, tc, 8);  // growing maxima
  testBlocked(1, 140, 128, 1, 949u, 0, 0, tc, 8); // the same at hs 128
  testBlocked(1, 200, 64, 1, 950u, 0, 50, tc, 8); // with a window across
  testBlocked<BF16>(2, 150, 128, 2, 951u, 0, 0, tc, 8);
  testBlocked<BF16>(1, 129, 256, 2, 952u, 0, 0, tc);
}

void groupBlocked(unsigned &seed) {
  testBlocked(1, 1, 4, 1, seed++);     // T = 1, hs = 4
  testBlocked(2, 5, 8, 2, seed++);     // T = 5, hs = 4
  testBlocked(1, 1, 128, 1, seed++);   // T = 1, hs = 128
  testBlocked(1, 65, 64, 1, seed++);   // hs = 64: three tiles of 32
  testBlocked(2, 130, 8, 2, seed++);   // five tiles, the last of 2 rows
  testBlocked(1, 130, 64, 1, seed++);  // GPT-2's head size
  testBlocked(1, 130, 128, 1, seed++); // Llama's: nine tiles of 16
  testBlocked(1, 65, 256, 2, seed++);  // hs = 128, two heads
  testBlocked(2, 33, 66, 2, seed++);   // hs = 33: bucket 64, padded
  testBlocked(1, 40, 130, 2, seed++);  // hs = 65: bucket 128, padded
  testBlocked(2, 70, 36, 3, seed++);   // hs = 12
  testBlocked(1, 64, 32, 1, seed++);   // hs = 32, T a multiple of the tile
  testBlocked(1, 97, 96, 1, seed++);   // hs = 96
  testBlocked(1, 300, 64, 1, seed++);  // ten tiles
  testBlocked(2, 129, 192, 3, seed++); // hs = 64, three heads
  testBlocked(1, 200, 384, 3, seed++); // hs = 128, thirteen tiles
  // Grouped-query, each bucket: a key tile's dk, dv over 2, 3 or 4 heads.
  testBlocked(2, 5, 16, 4, 909u, /*KV=*/2);    // hs = 4
  testBlocked(1, 130, 384, 6, 910u, /*KV=*/2); // hs = 64
  testBlocked(2, 70, 48, 4, 911u, /*KV=*/1);   // hs = 12
  testBlocked(1, 65, 512, 4, 912u, /*KV=*/2);  // hs = 128
  // Sliding windows: one key; shorter than a tile; across tiles (the key
  // pass stops early, the forward and the query pass start late), in each
  // bucket; grouped; a window of T (full attention).
  testBlocked(1, 9, 8, 2, 917u, 0, /*W=*/1);
  testBlocked(2, 70, 36, 3, 918u, 0, /*W=*/5);
  testBlocked(1, 130, 64, 1, 919u, 0, /*W=*/40);
  testBlocked(1, 130, 128, 1, 920u, 0, /*W=*/17);
  testBlocked(1, 200, 384, 3, 921u, 0, /*W=*/50);
  testBlocked(1, 130, 384, 6, 922u, /*KV=*/2, /*W=*/33);
  testBlocked(2, 70, 48, 4, 923u, /*KV=*/1, /*W=*/70);
  testBlockedWindowSkips();
  {
    // Random shapes, on their own generator (the fuzz group's sequence
    // stays as it was).
    std::mt19937 fr(4242);
    auto U = [&](int lo, int hi) {
      return std::uniform_int_distribution<int>(lo, hi)(fr);
    };
    for (int it = 0; it < 8; ++it) {
      const int NH = U(1, 3), hs = U(1, 128);
      testBlocked(U(1, 2), U(1, 100), NH * hs, NH, seed++);
    }
  }
  testBlockedErrors(258, 2); // hs = 129
  testBlockedErrors(10, 3);  // C not a multiple of NH
  groupTensorCores(seed);
  printf("blocked done (%d failures so far)\n", gFailures);
}

// The element types the other files call these with.
template void testAttention<float>(int, int, int, int, unsigned, int, int);
template void testAttention<BF16>(int, int, int, int, unsigned, int, int);
template void testBlocked<float>(int, int, int, int, unsigned, int, int, bool,
                                 float);
template void testBlocked<BF16>(int, int, int, int, unsigned, int, int, bool,
                                float);
