//===- CpuAttentionTest.cpp - attention kernels, materialized and blocked -===//
//
// Part of fsdp-cpu-kernels-test (CpuKernelsTest.cpp says how the kernels
// are checked).
//
//===----------------------------------------------------------------------===//

#include "CpuKernelsCheck.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include <omp.h>

namespace cpukernels {

//===----------------------------------------------------------------------===//
// Attention
//===----------------------------------------------------------------------===//

struct AttentionRef {
  /// The output, the probabilities and each row's log-sum-exp of its
  /// scaled, masked scores.
  std::vector<double> out, probs, lse;
};

/// qkv's row width with KV kv heads: C + 2 KV hs (3C when KV = NH).
int64_t qkvWidth(int64_t C, int64_t NH, int64_t KV) {
  return C + 2 * KV * (C / NH);
}

/// Query head h reads kv head h / (NH / KV): k at kAt, v at kAt + KV hs.
int64_t kAt(int64_t h, int64_t C, int64_t NH, int64_t KV) {
  return C + h / (NH / KV) * (C / NH);
}

/// The first key row i sees under a sliding window of W keys (0: none):
/// transformers' mask kv_idx > q_idx - sliding_window, on its own.
int64_t refWindowStart(int64_t i, int64_t W) {
  int64_t lo = 0;
  while (W > 0 && !(lo > i - W))
    ++lo;
  return lo;
}

AttentionRef refAttention(const std::vector<double> &qkv, int64_t B, int64_t T,
                          int64_t C, int64_t NH, int64_t KV, int64_t W = 0) {
  const int64_t hs = C / NH, ld = qkvWidth(C, NH, KV);
  const double scale = 1.0 / std::sqrt(double(hs));
  AttentionRef r{std::vector<double>(B * T * C, 0.0),
                 std::vector<double>(B * NH * T * T, 0.0),
                 std::vector<double>(B * NH * T, 0.0)};
  std::vector<double> s(T);
  for (int64_t b = 0; b < B; ++b)
    for (int64_t h = 0; h < NH; ++h)
      for (int64_t i = 0; i < T; ++i) {
        const double *q = &qkv[(b * T + i) * ld + h * hs];
        double m = -1e300, sum = 0.0;
        const int64_t lo = refWindowStart(i, W);
        for (int64_t j = lo; j <= i; ++j) {
          const double *k = &qkv[(b * T + j) * ld + kAt(h, C, NH, KV)];
          s[j] = 0.0;
          for (int64_t d = 0; d < hs; ++d)
            s[j] += q[d] * k[d];
          s[j] *= scale;
          m = std::max(m, s[j]);
        }
        for (int64_t j = lo; j <= i; ++j)
          sum += std::exp(s[j] - m);
        r.lse[(b * NH + h) * T + i] = m + std::log(sum);
        double *p = &r.probs[((b * NH + h) * T + i) * T];
        double *o = &r.out[(b * T + i) * C + h * hs];
        for (int64_t j = lo; j <= i; ++j) {
          p[j] = std::exp(s[j] - m) / sum;
          const double *v =
              &qkv[(b * T + j) * ld + kAt(h, C, NH, KV) + KV * hs];
          for (int64_t d = 0; d < hs; ++d)
            o[d] += p[j] * v[d];
        }
      }
  return r;
}

/// The textbook backward, in double, from the reference probabilities (a
/// kv head's gradient sums over its query heads).
std::vector<double> refAttentionBackward(const std::vector<double> &dout,
                                         const std::vector<double> &qkv,
                                         const std::vector<double> &probs,
                                         int64_t B, int64_t T, int64_t C,
                                         int64_t NH, int64_t KV) {
  const int64_t hs = C / NH, ld = qkvWidth(C, NH, KV), ko = KV * hs;
  const double scale = 1.0 / std::sqrt(double(hs));
  std::vector<double> dqkv(B * T * ld, 0.0), dS(T);
  for (int64_t b = 0; b < B; ++b)
    for (int64_t h = 0; h < NH; ++h)
      for (int64_t i = 0; i < T; ++i) {
        const double *p = &probs[((b * NH + h) * T + i) * T];
        const double *dO = &dout[(b * T + i) * C + h * hs];
        double rowDot = 0.0;
        for (int64_t j = 0; j <= i; ++j) {
          const double *v = &qkv[(b * T + j) * ld + kAt(h, C, NH, KV) + ko];
          dS[j] = 0.0;
          for (int64_t d = 0; d < hs; ++d)
            dS[j] += dO[d] * v[d];
          rowDot += dS[j] * p[j];
        }
        const double *q = &qkv[(b * T + i) * ld + h * hs];
        double *dq = &dqkv[(b * T + i) * ld + h * hs];
        for (int64_t j = 0; j <= i; ++j) {
          const double ds = p[j] * (dS[j] - rowDot);
          const double *k = &qkv[(b * T + j) * ld + kAt(h, C, NH, KV)];
          double *dk = &dqkv[(b * T + j) * ld + kAt(h, C, NH, KV)];
          double *dv = dk + ko;
          for (int64_t d = 0; d < hs; ++d) {
            dq[d] += scale * ds * k[d];
            dk[d] += scale * ds * q[d];
            dv[d] += p[j] * dO[d];
          }
        }
      }
  return dqkv;
}

/// fdCount < 0: central differences for every element of qkv. qkv is
/// uniform in +-qkvScale; tolerances are multiplied by tolScale. KV kv
/// heads (0: NH, plain multi-head attention); W the sliding window (0:
/// none).
void checkAttention(const Blas &blas, int64_t B, int64_t T, int64_t C,
                    int64_t NH, int64_t fdCount, uint64_t seed,
                    float qkvScale = 1.5f, double tolScale = 1.0,
                    int64_t KV = 0, int64_t W = 0) {
  KV = KV ? KV : NH;
  const std::string at =
      " (B=" + std::to_string(B) + ", T=" + std::to_string(T) +
      ", C=" + std::to_string(C) + ", NH=" + std::to_string(NH) +
      ", KV=" + std::to_string(KV) + ", W=" + std::to_string(W) + ")";
  Rng rng(seed);
  auto qkv = randomVector(rng, B * T * qkvWidth(C, NH, KV), qkvScale);
  auto dqkv0 = toDouble(qkv);
  auto ref = refAttention(dqkv0, B, T, C, NH, KV, W);

  auto out = nans(B * T * C), probs = nans(B * NH * T * T);
  attentionForward(blas, out.data(), probs.data(), qkv.data(), B, T, C, NH, KV,
                   W);
  CHECK_CLOSE("attentionForward out" + at, out, ref.out, 1e-5 * tolScale,
              1e-4 * tolScale);
  CHECK_CLOSE("attentionForward probs" + at, probs, ref.probs, 1e-6 * tolScale,
              1e-4 * tolScale);

  // The causal mask: exact zeros above the diagonal (and before the
  // window), rows that sum to 1.
  int64_t aboveDiagonal = 0;
  double worstSum = 0.0;
  for (int64_t r = 0; r < B * NH * T; ++r) {
    const int64_t i = r % T;
    double sum = 0.0;
    for (int64_t j = 0; j < T; ++j) {
      if (j > i || j < refWindowStart(i, W))
        aboveDiagonal += probs[r * T + j] != 0.0f;
      sum += probs[r * T + j];
    }
    worstSum = std::max(worstSum, std::fabs(sum - 1.0));
  }
  CHECK_MSG(aboveDiagonal == 0,
            "attentionForward: " + std::to_string(aboveDiagonal) +
                " probs outside the window are not 0" + at);
  CHECK_MSG(worstSum <= 1e-5, "attentionForward: a row of probs sums to 1 +- " +
                                  std::to_string(worstSum) + at);

  auto dout = randomVector(rng, B * T * C);
  auto ddout = toDouble(dout);
  auto dqkv = nans(qkv.size()), scratch = nans(B * NH * T * T);
  attentionBackward(blas, dqkv.data(), scratch.data(), dout.data(), qkv.data(),
                    probs.data(), B, T, C, NH, KV, W);
  CHECK_CLOSE("attentionBackward vs reference backward" + at, dqkv,
              refAttentionBackward(ddout, dqkv0, ref.probs, B, T, C, NH, KV),
              1e-5 * tolScale, 1e-4 * tolScale);
  if (fdCount == 0)
    return;
  auto loss = [&](const std::vector<double> &v) {
    return dot(ddout, refAttention(v, B, T, C, NH, KV, W).out);
  };
  auto idx = fdCount < 0 ? allIndices(qkv.size())
                         : someIndices(rng, qkv.size(), size_t(fdCount));
  CHECK_CLOSE("attentionBackward vs finite differences" + at, gather(dqkv, idx),
              centralDiff(loss, dqkv0, idx), 1e-5, 1e-4);
}

void testAttention(const Blas &blas) {
  checkAttention(blas, 2, 5, 12, 3, /*fdCount=*/-1, 5);
  // Longer sequences run in row blocks: 300 = one full block and a partial
  // one, 512 two full blocks, 769 three blocks and one row.
  checkAttention(blas, 1, 300, 16, 2, /*fdCount=*/48, 6);
  checkAttention(blas, 2, 512, 8, 2, /*fdCount=*/16, 7);
  checkAttention(blas, 1, 769, 8, 1, /*fdCount=*/8, 8);
  // Scores spread over hundreds: the softmax must shift by the row maximum
  // (exp saturates past 88). Float scores of that size carry ~1e-5 absolute
  // error, hence the looser tolerances.
  checkAttention(blas, 1, 300, 32, 2, /*fdCount=*/0, 15, /*qkvScale=*/8.0f,
                 /*tolScale=*/10.0);
  // Grouped-query: 2 kv heads of 2 query heads each, and one kv head for
  // all 4 (multi-query); the second one spans two row blocks.
  checkAttention(blas, 2, 5, 16, 4, /*fdCount=*/-1, 16, 1.5f, 1.0, /*KV=*/2);
  checkAttention(blas, 1, 300, 16, 4, /*fdCount=*/48, 17, 1.5f, 1.0,
                 /*KV=*/1);
  // Sliding windows (Mistral's): 4 keys at T = 9, one key (each row sees
  // itself), 100 keys across the 256-row blocks, grouped-query with a
  // window, and windows of T and more (full causal attention).
  checkAttention(blas, 2, 9, 12, 3, /*fdCount=*/-1, 18, 1.5f, 1.0, 0, /*W=*/4);
  checkAttention(blas, 1, 6, 8, 2, /*fdCount=*/-1, 19, 1.5f, 1.0, 0, /*W=*/1);
  checkAttention(blas, 1, 300, 16, 2, /*fdCount=*/48, 20, 1.5f, 1.0, 0,
                 /*W=*/100);
  checkAttention(blas, 2, 9, 16, 4, /*fdCount=*/-1, 21, 1.5f, 1.0, /*KV=*/2,
                 /*W=*/3);
  checkAttention(blas, 1, 7, 8, 2, /*fdCount=*/-1, 22, 1.5f, 1.0, 0, /*W=*/7);
  checkAttention(blas, 1, 7, 8, 2, /*fdCount=*/0, 23, 1.5f, 1.0, 0, /*W=*/50);
}

//===----------------------------------------------------------------------===//
// Blocked attention
//===----------------------------------------------------------------------===//

/// The worst errors the blocked kernels showed against the materialized
/// ones, relative to the largest magnitude of the materialized result,
/// and of lse against double (printed at the end, for the record); [1]
/// for the case with scores in the hundreds.
struct BlockedErrors {
  double out = 0.0, lse = 0.0, grad = 0.0;
} gBlockedErrors[2];

double maxAbs(const std::vector<float> &v) {
  double m = 0.0;
  for (float x : v)
    m = std::max(m, double(std::fabs(x)));
  return m;
}

/// max |got - want| / max |want|, and a check that it is within relTol.
bool checkScaled(const char *file, int line, const std::string &what,
                 const std::vector<float> &got, const std::vector<float> &want,
                 double relTol, double &worst) {
  const double scale = std::max(maxAbs(want), 1e-30);
  double err = 0.0;
  for (size_t i = 0; i < got.size() && i < want.size(); ++i)
    err = std::max(err, std::fabs(double(got[i]) - double(want[i])));
  if (std::isnan(err) || got.size() != want.size())
    err = std::numeric_limits<double>::infinity();
  worst = std::max(worst, err / scale);
  return checkClose(file, line, what, got.data(), toDouble(want).data(),
                    got.size(), relTol * scale, 0.0);
}

#define CHECK_SCALED(...) checkScaled(__FILE__, __LINE__, __VA_ARGS__)

struct BlockedResult {
  std::vector<float> out, lse, dqkv;
};

/// Fills the next `bytes` of the stack below the caller with NaN bits, so
/// that a kernel called next that reads a stack variable before writing it
/// sees NaN instead of the zeros a fresh stack holds (in fsdp-run the stack
/// holds whatever earlier calls left: the blocked forward's running sums,
/// read once uninitialised, turned a 6-layer GPT-2's loss into NaN).
__attribute__((noinline)) void poisonStack() {
  volatile unsigned char junk[256 << 10];
  for (size_t i = 0; i < sizeof junk; ++i)
    junk[i] = 0xFF;
}

BlockedResult runBlocked(const Blas &blas, const std::vector<float> &qkv,
                         const std::vector<float> &dout, int64_t B, int64_t T,
                         int64_t C, int64_t NH, int64_t KV, int64_t W = 0) {
  BlockedResult r{nans(B * T * C), nans(B * NH * T), nans(qkv.size())};
  poisonStack();
  blockedAttentionForward(blas, r.out.data(), r.lse.data(), qkv.data(), B, T, C,
                          NH, KV, W);
  poisonStack();
  blockedAttentionBackward(blas, r.dqkv.data(), dout.data(), qkv.data(),
                           r.out.data(), r.lse.data(), B, T, C, NH, KV, W);
  return r;
}

/// Blocked against materialized (to float rounding of their scale) and
/// against the double reference. tolScale loosens all tolerances. KV kv
/// heads (0: NH); W the sliding window (0: none).
void checkBlockedAttention(const Blas &blas, int64_t B, int64_t T, int64_t NH,
                           int64_t hs, uint64_t seed, float qkvScale = 1.5f,
                           double tolScale = 1.0, int64_t KV = 0,
                           int64_t W = 0) {
  const int64_t C = NH * hs;
  KV = KV ? KV : NH;
  const std::string at =
      " (B=" + std::to_string(B) + ", T=" + std::to_string(T) +
      ", NH=" + std::to_string(NH) + ", hs=" + std::to_string(hs) +
      ", KV=" + std::to_string(KV) + ", W=" + std::to_string(W) + ")";
  BlockedErrors &worst = gBlockedErrors[tolScale > 1.0];
  Rng rng(seed);
  auto qkv = randomVector(rng, B * T * qkvWidth(C, NH, KV), qkvScale);
  auto dout = randomVector(rng, B * T * C);
  auto dqkv0 = toDouble(qkv);

  auto out = nans(B * T * C), probs = nans(B * NH * T * T);
  attentionForward(blas, out.data(), probs.data(), qkv.data(), B, T, C, NH, KV,
                   W);
  auto dqkv = nans(qkv.size()), scratch = nans(B * NH * T * T);
  attentionBackward(blas, dqkv.data(), scratch.data(), dout.data(), qkv.data(),
                    probs.data(), B, T, C, NH, KV, W);
  const BlockedResult r = runBlocked(blas, qkv, dout, B, T, C, NH, KV, W);

  CHECK_SCALED("blockedAttentionForward out vs materialized" + at, r.out, out,
               1e-5 * tolScale, worst.out);
  const auto ref = refAttention(dqkv0, B, T, C, NH, KV, W);
  CHECK_CLOSE("blockedAttentionForward out vs reference" + at, r.out, ref.out,
              1e-5 * tolScale, 1e-4 * tolScale);
  const std::vector<double> &lse = ref.lse;
  CHECK_CLOSE("blockedAttentionForward lse vs reference" + at, r.lse, lse,
              1e-5 * tolScale, 1e-5 * tolScale);
  for (size_t i = 0; i < lse.size(); ++i)
    worst.lse = std::max(worst.lse, std::fabs(double(r.lse[i]) - lse[i]) /
                                        std::max(1.0, std::fabs(lse[i])));
  CHECK_SCALED("blockedAttentionBackward vs attentionBackward" + at, r.dqkv,
               dqkv, 1e-5 * tolScale, worst.grad);
  CHECK_CLOSE(
      "blockedAttentionBackward vs reference" + at, r.dqkv,
      refAttentionBackward(toDouble(dout), dqkv0, ref.probs, B, T, C, NH, KV),
      1e-5 * tolScale, 1e-4 * tolScale);
}

/// Central differences of sum(dout * attention(qkv)) against the blocked
/// backward; fdCount < 0: every element.
void checkBlockedFiniteDiff(const Blas &blas, int64_t B, int64_t T, int64_t NH,
                            int64_t hs, int64_t fdCount, uint64_t seed,
                            int64_t KV = 0, int64_t W = 0) {
  const int64_t C = NH * hs;
  KV = KV ? KV : NH;
  const std::string at =
      " (B=" + std::to_string(B) + ", T=" + std::to_string(T) +
      ", NH=" + std::to_string(NH) + ", KV=" + std::to_string(KV) +
      ", W=" + std::to_string(W) + ")";
  Rng rng(seed);
  auto qkv = randomVector(rng, B * T * qkvWidth(C, NH, KV), 1.5f);
  auto dout = randomVector(rng, B * T * C);
  auto dqkv0 = toDouble(qkv), ddout = toDouble(dout);
  const BlockedResult r = runBlocked(blas, qkv, dout, B, T, C, NH, KV, W);
  auto loss = [&](const std::vector<double> &v) {
    return dot(ddout, refAttention(v, B, T, C, NH, KV, W).out);
  };
  auto idx = fdCount < 0 ? allIndices(qkv.size())
                         : someIndices(rng, qkv.size(), size_t(fdCount));
  CHECK_CLOSE("blockedAttentionBackward vs finite differences" + at,
              gather(r.dqkv, idx), centralDiff(loss, dqkv0, idx), 1e-5, 1e-4);
}

/// Row i of out, lse and dq depends only on rows <= i, and the blocked
/// kernels visit those rows the same way whatever T is: the rows of
/// T = block - 1 and T = block are bit-identical to the first rows of
/// T = block + 1 (dk and dv do depend on the later rows, and are covered
/// by checkBlockedAttention at each of these lengths).
/// hs = 8 is all column tail (one column at a time), hs = 16 one vector.
void testBlockedBoundary(const Blas &blas, int64_t hs) {
  const int64_t NH = 2, C = NH * hs, Tmax = kAttentionBlock + 1;
  Rng rng(21 + hs);
  auto qkv = randomVector(rng, Tmax * 3 * C, 1.5f);
  auto dout = randomVector(rng, Tmax * C);
  const BlockedResult full = runBlocked(blas, qkv, dout, 1, Tmax, C, NH, NH);
  for (int64_t T : {kAttentionBlock - 1, kAttentionBlock}) {
    const std::vector<float> q(qkv.begin(), qkv.begin() + T * 3 * C),
        d(dout.begin(), dout.begin() + T * C);
    const BlockedResult r = runBlocked(blas, q, d, 1, T, C, NH, NH);
    bool same =
        std::memcmp(r.out.data(), full.out.data(), sizeof(float) * T * C) == 0;
    for (int64_t h = 0; h < NH; ++h)
      same &= std::memcmp(r.lse.data() + h * T, full.lse.data() + h * Tmax,
                          sizeof(float) * T) == 0;
    for (int64_t i = 0; i < T; ++i)
      same &= std::memcmp(r.dqkv.data() + i * 3 * C,
                          full.dqkv.data() + i * 3 * C, sizeof(float) * C) == 0;
    CHECK_MSG(same,
              "blocked attention: rows of T=" + std::to_string(T) +
                  " differ from the first rows of T=" + std::to_string(Tmax) +
                  " (hs=" + std::to_string(hs) + ")");
  }
}

/// The blocked kernels skip the key blocks wholly outside a query block's
/// window: with NaN in the keys and values of key block 0 and a window of
/// 10 at T = 257, no query row from 128 on meets block 0 (its window
/// starts at 119 or later, in block 1), so their out, lse and dq, and the
/// dk and dv of keys from 128 on, stay finite; a kernel that visited
/// block 0 and only masked it would turn them NaN (0 x NaN). Without the
/// window they are NaN. Both the tiled path (hs 16) and the scalar one
/// (hs 136, which only ever reads the window's keys).
void testBlockedWindowSkips(const Blas &blas, int64_t hs) {
  const int64_t B = 1, T = 257, NH = 2, C = NH * hs, ld = 3 * C, W = 10;
  Rng rng(40 + hs);
  auto qkv = randomVector(rng, B * T * ld, 1.5f);
  auto dout = randomVector(rng, B * T * C);
  for (int64_t j = 0; j < kAttentionBlock; ++j)
    for (int64_t d = C; d < ld; ++d)
      qkv[j * ld + d] = std::numeric_limits<float>::quiet_NaN();
  auto finiteFrom = [&](const BlockedResult &r) {
    bool finite = true;
    for (int64_t i = 128; i < T; ++i) {
      for (int64_t d = 0; d < C; ++d)
        finite &= std::isfinite(r.out[i * C + d]);
      for (int64_t d = 0; d < ld; ++d)
        finite &= std::isfinite(r.dqkv[i * ld + d]);
      for (int64_t h = 0; h < NH; ++h)
        finite &= std::isfinite(r.lse[h * T + i]);
    }
    return finite;
  };
  CHECK_MSG(finiteFrom(runBlocked(blas, qkv, dout, B, T, C, NH, NH, W)),
            "blocked attention with a window of 10 visits key block 0 for "
            "query rows from 128 on (hs=" +
                std::to_string(hs) + ")");
  CHECK_MSG(!finiteFrom(runBlocked(blas, qkv, dout, B, T, C, NH, NH, 0)),
            "blocked attention without a window does not see key block 0's "
            "NaN (hs=" +
                std::to_string(hs) + "): the skip test proves nothing");
}

/// A window of T or more is full causal attention, bit for bit, in both
/// forms.
void testWindowPastT(const Blas &blas) {
  const int64_t B = 2, T = 130, NH = 4, C = NH * 16, KV = 2;
  Rng rng(45);
  auto qkv = randomVector(rng, B * T * qkvWidth(C, NH, KV), 1.5f);
  auto dout = randomVector(rng, B * T * C);
  const BlockedResult none = runBlocked(blas, qkv, dout, B, T, C, NH, KV, 0);
  for (int64_t W : {T, T + 1, int64_t(1) << 40}) {
    const BlockedResult r = runBlocked(blas, qkv, dout, B, T, C, NH, KV, W);
    CHECK_MSG(sameBits(r.out, none.out) && sameBits(r.lse, none.lse) &&
                  sameBits(r.dqkv, none.dqkv),
              "blocked attention with window " + std::to_string(W) +
                  " >= T differs from none");
    std::vector<float> p0 = nans(B * NH * T * T), p1 = p0, o0 = nans(B * T * C),
                       o1 = o0, g0 = nans(qkv.size()), g1 = g0,
                       s0 = nans(B * NH * T * T), s1 = s0;
    attentionForward(blas, o0.data(), p0.data(), qkv.data(), B, T, C, NH, KV,
                     0);
    attentionForward(blas, o1.data(), p1.data(), qkv.data(), B, T, C, NH, KV,
                     W);
    attentionBackward(blas, g0.data(), s0.data(), dout.data(), qkv.data(),
                      p0.data(), B, T, C, NH, KV, 0);
    attentionBackward(blas, g1.data(), s1.data(), dout.data(), qkv.data(),
                      p1.data(), B, T, C, NH, KV, W);
    CHECK_MSG(sameBits(o0, o1) && sameBits(p0, p1) && sameBits(g0, g1),
              "materialized attention with window " + std::to_string(W) +
                  " >= T differs from none");
  }
}

void testBlockedAttention(const Blas &blas) {
  // B, T, NH, hs: T = 1, below, at, just past and well past the block
  // (64), never a multiple of it past 64; hs = 72 has a 64-column chunk
  // and a tail, hs = 136 takes the scalar path.
  const int64_t shapes[][4] = {
      {1, 1, 1, 8},    {2, 1, 3, 16},   {2, 7, 2, 8},   {1, 7, 4, 16},
      {1, 63, 2, 8},   {1, 64, 1, 16},  {2, 64, 3, 8},  {2, 65, 2, 16},
      {1, 65, 4, 8},   {1, 130, 3, 16}, {2, 130, 1, 8}, {1, 257, 2, 8},
      {2, 257, 4, 16}, {1, 70, 2, 72},  {1, 70, 1, 136}};
  uint64_t seed = 30;
  for (const auto &s : shapes)
    checkBlockedAttention(blas, s[0], s[1], s[2], s[3], seed++);
  // Scores spread over hundreds: the running max changes from block to
  // block and the accumulator must be rescaled (see checkAttention's case).
  checkBlockedAttention(blas, 1, 200, 2, 32, seed++, /*qkvScale=*/8.0f,
                        /*tolScale=*/10.0);
  checkBlockedFiniteDiff(blas, 2, 5, 2, 4, /*fdCount=*/-1, seed++);
  checkBlockedFiniteDiff(blas, 1, 67, 2, 4, /*fdCount=*/64, seed++);
  // Grouped-query: B, T, NH, hs, KV; the tiled path (hs 16, 72) and the
  // scalar one (hs 136), multi-query (KV = 1) included.
  const int64_t grouped[][5] = {{2, 7, 4, 8, 2},
                                {1, 65, 4, 16, 1},
                                {2, 130, 6, 16, 3},
                                {1, 70, 4, 72, 2},
                                {1, 70, 2, 136, 1}};
  for (const auto &g : grouped)
    checkBlockedAttention(blas, g[0], g[1], g[2], g[3], seed++, 1.5f, 1.0,
                          g[4]);
  checkBlockedFiniteDiff(blas, 2, 5, 4, 4, /*fdCount=*/-1, seed++, /*KV=*/2);
  // Sliding windows: B, T, NH, hs, KV, W. One key, a window inside a
  // block, one of exactly a block, windows that span 2 and 3 blocks
  // (T = 257: the later query blocks skip the first key blocks), grouped,
  // the column tail (hs 72) and the scalar path (hs 136).
  const int64_t windowed[][6] = {
      {1, 9, 2, 8, 2, 1},     {2, 70, 2, 16, 2, 5},    {1, 200, 2, 16, 2, 64},
      {1, 257, 2, 8, 2, 70},  {2, 257, 4, 16, 2, 130}, {1, 130, 6, 16, 3, 33},
      {1, 150, 2, 72, 2, 40}, {1, 150, 2, 136, 1, 40}};
  for (const auto &w : windowed)
    checkBlockedAttention(blas, w[0], w[1], w[2], w[3], seed++, 1.5f, 1.0, w[4],
                          w[5]);
  checkBlockedFiniteDiff(blas, 2, 9, 2, 4, /*fdCount=*/-1, seed++, 0, /*W=*/3);
  checkBlockedFiniteDiff(blas, 1, 140, 4, 4, /*fdCount=*/64, seed++, /*KV=*/2,
                         /*W=*/66);
  testBlockedWindowSkips(blas, 16);
  testBlockedWindowSkips(blas, 136);
  testWindowPastT(blas);
  testBlockedBoundary(blas, 8);
  testBlockedBoundary(blas, 16);

  // Every output row has one owner and a fixed summation order, with and
  // without grouped-query attention.
  const int64_t B = 2, T = 130, NH = 4, C = NH * 16;
  for (int64_t KV : {NH, int64_t(2)})
    for (int64_t W : {int64_t(0), int64_t(40)}) {
      Rng rng(seed);
      auto qkv = randomVector(rng, B * T * qkvWidth(C, NH, KV), 1.5f);
      auto dout = randomVector(rng, B * T * C);
      const BlockedResult all = runBlocked(blas, qkv, dout, B, T, C, NH, KV, W);
      BlockedResult one;
      withOneThread(
          [&] { one = runBlocked(blas, qkv, dout, B, T, C, NH, KV, W); });
      CHECK_MSG(sameBits(all.out, one.out) && sameBits(all.lse, one.lse) &&
                    sameBits(all.dqkv, one.dqkv),
                "blocked attention differs between 1 and " +
                    std::to_string(omp_get_max_threads()) + " threads (KV=" +
                    std::to_string(KV) + ", W=" + std::to_string(W) + ")");
    }

  for (int wide = 0; wide < 2; ++wide)
    std::printf("cpu-kernels: blocked attention vs materialized%s, worst "
                "error / scale: out %.3g, dqkv %.3g; lse vs double %.3g\n",
                wide ? " (scores in the hundreds)" : "",
                gBlockedErrors[wide].out, gBlockedErrors[wide].grad,
                gBlockedErrors[wide].lse);
}

} // namespace cpukernels
