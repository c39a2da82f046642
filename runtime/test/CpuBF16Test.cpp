//===- CpuBF16Test.cpp - the CPU's bf16 passes against the widened path ---===//
//
// BF16Convert's team conversions and BF16Kernels' direct kernels promise
// the bits of the plain path: support/BFloat16.h's scalar loops, and the
// f32 kernel on widened operands with its results rounded. Checked here
// bit for bit, at sizes on both sides of the team bound, on values that
// exercise the rounding (ties, NaN, infinities, subnormals), with repeated
// tokens and stale scratch, at one thread and at all.
//
//===----------------------------------------------------------------------===//

#include "CpuKernelsCheck.h"

#include "cpu/BF16Convert.h"
#include "cpu/BF16Kernels.h"
#include "fsdp/runtime/support/BFloat16.h"

namespace cpukernels {
namespace {

using cpukernels::sameBits; // the float one, beside the bf16 one below
using fsdp::rt::roundToBF16;
using fsdp::rt::widenBF16;

std::vector<uint16_t> toBF16(const std::vector<float> &v) {
  std::vector<uint16_t> out(v.size());
  roundToBF16(out.data(), v.data(), int64_t(v.size()));
  return out;
}

std::vector<float> widened(const std::vector<uint16_t> &v) {
  std::vector<float> out(v.size());
  widenBF16(out.data(), v.data(), int64_t(v.size()));
  return out;
}

bool sameBits(const std::vector<uint16_t> &a, const std::vector<uint16_t> &b) {
  return a.size() == b.size() &&
         (a.empty() || // memcmp may not take an empty vector's null data
          std::memcmp(a.data(), b.data(), sizeof(uint16_t) * a.size()) == 0);
}

/// Random floats with the rounding's hard cases planted: halfway ties
/// (both parities), NaNs, infinities, the largest finite float (rounds to
/// infinity), subnormals and signed zeros.
std::vector<float> hardFloats(Rng &rng, int64_t n) {
  std::vector<float> v = randomVector(rng, n, 3.0f);
  const uint32_t planted[] = {0x3F808000u, 0x3F818000u, 0x7FC00001u,
                              0xFF800001u, 0x7F800000u, 0xFF800000u,
                              0x7F7FFFFFu, 0x00000001u, 0x80008000u,
                              0x00000000u, 0x80000000u, 0x3F80FFFFu};
  for (int64_t i = 0; i < n; i += 97) {
    uint32_t bits = planted[(i / 97) % (sizeof planted / sizeof *planted)];
    std::memcpy(&v[i], &bits, sizeof bits);
  }
  return v;
}

void testTeamConversions() {
  Rng rng(41);
  // Below the team bound, at it, and past it by a ragged block.
  for (int64_t n : {int64_t(0), int64_t(1), int64_t(37), int64_t(1) << 16,
                    (int64_t(1) << 16) + 16387}) {
    const std::vector<float> x = hardFloats(rng, n);
    std::vector<uint16_t> want = toBF16(x), got(n, 0xDEAD);
    roundToBF16Team(got.data(), x.data(), n);
    CHECK_MSG(sameBits(got, want),
              "roundToBF16Team differs from the scalar rounding at n = " +
                  std::to_string(n));
    std::vector<float> back(n, 1.0f);
    widenBF16Team(back.data(), want.data(), n);
    CHECK_MSG(sameBits(back, widened(want)),
              "widenBF16Team differs from the scalar widening at n = " +
                  std::to_string(n));
  }
}

void testAddBF16() {
  Rng rng(42);
  for (int64_t n : {int64_t(5), int64_t(1) << 15, int64_t(100003)}) {
    const auto a = toBF16(hardFloats(rng, n)), b = toBF16(randomVector(rng, n));
    std::vector<float> sum(n);
    add(sum.data(), widened(a).data(), widened(b).data(), n);
    const std::vector<uint16_t> want = toBF16(sum);
    std::vector<uint16_t> got(n);
    addBF16(got.data(), a.data(), b.data(), n);
    CHECK_MSG(sameBits(got, want), "addBF16 differs from the widened add at "
                                   "n = " +
                                       std::to_string(n));
    std::vector<uint16_t> aliased = a; // out aliases a, as the plans do
    addBF16(aliased.data(), aliased.data(), b.data(), n);
    CHECK_MSG(sameBits(aliased, want), "addBF16 in place differs");
  }
}

/// The direct embedding kernels at vocabulary V: 23 (most tokens once)
/// and 5 (every token many times, fewer rows than positions).
void testEmbeddingBF16At(int64_t V) {
  const int64_t B = 3, T = 7, C = 40, Tmax = 9;
  Rng rng(43 + uint64_t(V));
  auto tokens = randomTokens(rng, B * T, V);
  tokens[4] = tokens[0]; // repeated tokens: rows summed more than once
  tokens[11] = tokens[0];
  tokens[B * T - 1] = tokens[1];
  // A signalling NaN in the table: the widened path quiets it.
  std::vector<float> table = randomVector(rng, V * C);
  const uint32_t signalling = 0x7F810000u;
  std::memcpy(&table[size_t(tokens[2]) * C + 3], &signalling, 4);
  auto wte = toBF16(table);
  wte[size_t(tokens[2]) * C + 3] = 0x7F81; // toBF16 would quiet it first
  const auto wpe = toBF16(randomVector(rng, Tmax * C));
  for (bool withWpe : {true, false}) {
    std::vector<float> out(B * T * C);
    embeddingForward(out.data(), tokens.data(), widened(wte).data(),
                     withWpe ? widened(wpe).data() : nullptr, B, T, C);
    std::vector<uint16_t> got(B * T * C, 0xBEEF);
    embeddingForwardBF16(got.data(), tokens.data(), wte.data(),
                         withWpe ? wpe.data() : nullptr, B, T, C);
    CHECK_MSG(sameBits(got, toBF16(out)),
              std::string("embeddingForwardBF16 differs from the widened "
                          "kernel ") +
                  (withWpe ? "with wpe" : "without wpe"));
  }

  const auto dout = toBF16(randomVector(rng, B * T * C));
  std::vector<float> dwte(V * C), dwpe(Tmax * C);
  embeddingBackward(dwte.data(), dwpe.data(), widened(dout).data(),
                    tokens.data(), B, T, C, V, Tmax);
  auto run = [&] {
    // The scratch holds what the last kernel left there: NaNs here. Its
    // size is the shared rule's, exactly (the sanitizer build catches a
    // write past it).
    std::vector<float> rows =
        nans(int64_t(fsdp::plan::cpuDirectBF16ScratchFloats(
            fsdp::plan::Opcode::EmbeddingBackward, B * T, Tmax, C, V)));
    std::vector<uint16_t> gotWte(V * C, 0xBEEF), gotWpe(Tmax * C, 0xBEEF);
    embeddingBackwardBF16(gotWte.data(), gotWpe.data(), dout.data(),
                          tokens.data(), B, T, C, V, Tmax, rows.data());
    CHECK_MSG(sameBits(gotWte, toBF16(dwte)),
              "embeddingBackwardBF16's dwte differs from the widened kernel");
    CHECK_MSG(sameBits(gotWpe, toBF16(dwpe)),
              "embeddingBackwardBF16's dwpe differs from the widened kernel");
  };
  run();
  withOneThread(run);

  // Without positions (token_embedding_backward, Llama's): no dwpe, and
  // the scratch has no rows for it.
  std::vector<float> tokenOnly(V * C);
  embeddingBackward(tokenOnly.data(), nullptr, widened(dout).data(),
                    tokens.data(), B, T, C, V, 0);
  std::vector<float> rows = nans(int64_t(fsdp::plan::cpuDirectBF16ScratchFloats(
      fsdp::plan::Opcode::TokenEmbeddingBackward, B * T, 0, C, V)));
  std::vector<uint16_t> gotTokens(V * C, 0xBEEF);
  embeddingBackwardBF16(gotTokens.data(), nullptr, dout.data(), tokens.data(),
                        B, T, C, V, 0, rows.data());
  CHECK_MSG(sameBits(gotTokens, toBF16(tokenOnly)),
            "embeddingBackwardBF16 without positions differs from the "
            "widened token embedding backward");
}

void testEmbeddingBF16() {
  testEmbeddingBF16At(23);
  testEmbeddingBF16At(5);
}

/// GELU and its backward on bf16 against the f32 kernels on widened
/// operands, rounded: the same bits on the rounding's hard cases, below
/// and past the kernels' parallel bound, on one thread and all.
void testGeluBF16() {
  Rng rng(46);
  for (int64_t n : {int64_t(1000), (int64_t(1) << 15) + 77}) {
    const auto x = toBF16(hardFloats(rng, n)),
               dout = toBF16(hardFloats(rng, n));
    std::vector<float> y(n), dx(n);
    geluForward(y.data(), widened(x).data(), n);
    geluBackward(dx.data(), widened(dout).data(), widened(x).data(), n);
    auto run = [&] {
      std::vector<uint16_t> gotY(n, 0xBEEF), gotDx(n, 0xBEEF);
      geluForwardBF16(gotY.data(), x.data(), n);
      geluBackwardBF16(gotDx.data(), dout.data(), x.data(), n);
      CHECK_MSG(sameBits(gotY, toBF16(y)),
                "geluForwardBF16 differs from the widened kernel at n = " +
                    std::to_string(n));
      CHECK_MSG(sameBits(gotDx, toBF16(dx)),
                "geluBackwardBF16 differs from the widened kernel at n = " +
                    std::to_string(n));
    };
    run();
    withOneThread(run);
  }
}

/// cross_entropy and its backward on bf16 logits against the f32 kernels
/// on the widened logits: the same bits, on more rows than there are row
/// slots (N = 37 against 16), with NaN-filled scratch of the rule's size
/// exactly, on one thread and all.
void testCrossEntropyBF16() {
  namespace plan = fsdp::plan;
  const int64_t N = 37, V = 301;
  Rng rng(45);
  const auto logits = toBF16(randomVector(rng, N * V, 4.0f));
  const auto targets = randomTokens(rng, N, V);
  const float dloss = 0.8125f;
  float wantLoss = 0.0f;
  crossEntropyForward(&wantLoss, widened(logits).data(), targets.data(), N, V);
  std::vector<float> wantGrad(N * V);
  crossEntropyBackward(wantGrad.data(), &dloss, widened(logits).data(),
                       targets.data(), N, V);
  auto run = [&] {
    std::vector<float> rows = nans(int64_t(plan::cpuDirectBF16ScratchFloats(
        plan::Opcode::CrossEntropy, 0, 0, 0, V)));
    float loss = -1.0f;
    crossEntropyForwardBF16(&loss, logits.data(), targets.data(), N, V,
                            rows.data());
    CHECK_MSG(std::memcmp(&loss, &wantLoss, sizeof loss) == 0,
              "crossEntropyForwardBF16 differs from the widened kernel");
    rows = nans(int64_t(plan::cpuDirectBF16ScratchFloats(
        plan::Opcode::CrossEntropyBackward, 0, 0, 0, V)));
    std::vector<uint16_t> grad(N * V, 0xBEEF);
    crossEntropyBackwardBF16(grad.data(), &dloss, logits.data(), targets.data(),
                             N, V, rows.data());
    CHECK_MSG(sameBits(grad, toBF16(wantGrad)),
              "crossEntropyBackwardBF16 differs from the widened kernel");
  };
  run();
  withOneThread(run);
}

/// AdamW from a bf16 gradient against AdamW from its widened copy: the
/// same bits, with and without clipping's scale, past the team bound.
void testAdamWBF16Grad() {
  Rng rng(44);
  const int64_t n = (int64_t(1) << 15) + 301;
  const auto grad = toBF16(hardFloats(rng, n));
  const auto param = randomVector(rng, n), m = randomVector(rng, n, 0.1f),
             v = randomVector(rng, n, 0.01f, 0.02f);
  const float scale = 0.75f;
  for (const float *gradScale : {static_cast<const float *>(nullptr), &scale}) {
    std::vector<float> p1 = param, m1 = m, v1 = v, p2 = param, m2 = m, v2 = v;
    adamw(p1.data(), m1.data(), v1.data(), widened(grad).data(), n, 1e-3f, 0.9f,
          0.95f, 1e-8f, 0.1f, 3, gradScale);
    adamw(p2.data(), m2.data(), v2.data(), grad.data(), n, 1e-3f, 0.9f, 0.95f,
          1e-8f, 0.1f, 3, gradScale);
    CHECK_MSG(sameBits(p1, p2) && sameBits(m1, m2) && sameBits(v1, v2),
              std::string("AdamW from a bf16 gradient differs from AdamW "
                          "from its widened copy ") +
                  (gradScale ? "with a scale" : "without a scale"));
  }
}

/// AdamW that writes a unit's shard copy: the update's bits unchanged, and
/// the copy the updated shard rounded (what a gather rounding the shard
/// gives), from either gradient type, over chunk tails and the team. The
/// selection bias's update writes its copy the same way.
void testAdamWShardCopy() {
  Rng rng(45);
  const int64_t n = (int64_t(1) << 15) + 301;
  const auto grad = hardFloats(rng, n);
  const auto gradBF16 = toBF16(grad);
  const auto param = hardFloats(rng, n), m = randomVector(rng, n, 0.1f),
             v = randomVector(rng, n, 0.01f, 0.02f);
  for (bool bf16Grad : {false, true}) {
    std::vector<float> p1 = param, m1 = m, v1 = v, p2 = param, m2 = m, v2 = v;
    std::vector<uint16_t> copy(n, 0xBEEF);
    if (bf16Grad) {
      adamw(p1.data(), m1.data(), v1.data(), gradBF16.data(), n, 1e-3f, 0.9f,
            0.95f, 1e-8f, 0.1f, 2);
      adamw(p2.data(), m2.data(), v2.data(), gradBF16.data(), n, 1e-3f, 0.9f,
            0.95f, 1e-8f, 0.1f, 2, nullptr, copy.data());
    } else {
      adamw(p1.data(), m1.data(), v1.data(), grad.data(), n, 1e-3f, 0.9f, 0.95f,
            1e-8f, 0.1f, 2);
      adamw(p2.data(), m2.data(), v2.data(), grad.data(), n, 1e-3f, 0.9f, 0.95f,
            1e-8f, 0.1f, 2, nullptr, copy.data());
    }
    const char *from = bf16Grad ? " (bf16 gradient)" : " (f32 gradient)";
    CHECK_MSG(sameBits(p1, p2) && sameBits(m1, m2) && sameBits(v1, v2),
              std::string("AdamW writing a shard copy updates differently") +
                  from);
    CHECK_MSG(sameBits(copy, toBF16(p2)),
              std::string("AdamW's shard copy is not the updated shard "
                          "rounded") +
                  from);
  }
  std::vector<float> bias = param, signal = hardFloats(rng, n);
  std::vector<uint16_t> copy(n, 0xBEEF);
  moeSelectionBiasUpdate(bias.data(), signal.data(), n, 1e-3, copy.data());
  CHECK_MSG(sameBits(copy, toBF16(bias)),
            "the selection bias's shard copy is not the updated bias rounded");
}

} // namespace

void testBF16Direct() {
  testTeamConversions();
  withOneThread(testTeamConversions);
  testAddBF16();
  testEmbeddingBF16();
  testCrossEntropyBF16();
  testGeluBF16();
  testAdamWBF16Grad();
  testAdamWShardCopy();
  withOneThread(testAdamWShardCopy);
}

} // namespace cpukernels
