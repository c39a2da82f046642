//===- BFloat16Test.cpp - bf16 widening and rounding (BFloat16.h) ---------===//
//
// roundToBF16 and widenBF16, which the CPU backend's bf16 kernels, casts
// and collectives use, against a reference written another way: the two
// bf16 neighbours of a float compared by distance in double, ties to the
// even one, past the largest finite bf16 to infinity (IEEE rounding with
// the exponent range unbounded, then overflow). Checked for every bf16
// upper half with low halves that are exact, just below, at and just
// above a tie, and random; by name: ties to even both ways and both
// signs, NaNs (quiet and signalling, both signs) staying NaNs with their
// sign, infinities, the largest finite values rounding to infinity or
// not, subnormals, negative zero; and every bf16 widening and rounding
// back to itself (a NaN to a quiet NaN of its sign).
//
// Prints the first few failures and "bfloat16: N checks, M failed"; exits
// 1 on any failure.
//
//===----------------------------------------------------------------------===//

#include "fsdp/runtime/support/BFloat16.h"

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <initializer_list>

using namespace fsdp::rt;

namespace {
int64_t checks = 0, failures = 0;

float fromBits(uint32_t word) {
  float value;
  std::memcpy(&value, &word, sizeof(value));
  return value;
}
uint32_t bitsOf(float value) {
  uint32_t word;
  std::memcpy(&word, &value, sizeof(word));
  return word;
}
bool isNaN16(uint16_t bits) { return (bits & 0x7FFFu) > 0x7F80u; }

/// roundToBF16 of the float with bits `word` must be `want`.
void expectRound(uint32_t word, uint16_t want, const char *what) {
  ++checks;
  uint16_t got = roundToBF16(fromBits(word));
  if (got == want)
    return;
  if (++failures <= 20)
    std::printf("FAILED %s: roundToBF16(0x%08X) = 0x%04X, want 0x%04X\n", what,
                word, got, want);
}
void expect(bool ok, const char *what, uint32_t word) {
  ++checks;
  if (!ok && ++failures <= 20)
    std::printf("FAILED %s: 0x%08X\n", what, word);
}

/// The nearest bf16 to a finite float, by distance, ties to even.
uint16_t reference(uint32_t word) {
  uint16_t lo = uint16_t(word >> 16), hi = uint16_t(lo + 1);
  if ((word & 0xFFFFu) == 0)
    return lo;
  double x = std::fabs(double(fromBits(word)));
  double below = std::fabs(double(widenBF16(lo)));
  // Past the largest finite bf16 its neighbour is 2^128 (the exponent
  // range unbounded), which IEEE then rounds to infinity.
  double above = (hi & 0x7FFFu) == 0x7F80u ? std::ldexp(1.0, 128)
                                           : std::fabs(double(widenBF16(hi)));
  if (x - below != above - x)
    return x - below < above - x ? lo : hi;
  return (lo & 1u) ? hi : lo;
}

void checkAgainstReference() {
  uint32_t random = 12345;
  for (uint32_t upper = 0; upper < 0x10000u; ++upper) {
    if (isNaN16(uint16_t(upper)) || (upper & 0x7FFFu) == 0x7F80u)
      continue; // NaNs and infinities: by name below
    random = random * 1664525u + 1013904223u;
    for (uint32_t low : {0x0000u, 0x0001u, 0x7FFFu, 0x8000u, 0x8001u, 0xFFFFu,
                         random >> 16, random & 0xFFFFu}) {
      uint32_t word = upper << 16 | low;
      expectRound(word, reference(word), "against the reference");
    }
  }
}

void checkByName() {
  // Ties: to the even neighbour, down and up, both signs.
  expectRound(0x3F808000u, 0x3F80u, "tie down to even (1 + 2^-8)");
  expectRound(0x3F818000u, 0x3F82u, "tie up to even");
  expectRound(0xBF808000u, 0xBF80u, "negative tie down to even");
  expectRound(0xBF818000u, 0xBF82u, "negative tie up to even");
  expectRound(0x3F807FFFu, 0x3F80u, "just below a tie");
  expectRound(0x3F808001u, 0x3F81u, "just above a tie");
  expectRound(0x3FFF8000u, 0x4000u, "tie carrying into the exponent");
  // Infinities and the largest finite values.
  expectRound(0x7F800000u, 0x7F80u, "+inf");
  expectRound(0xFF800000u, 0xFF80u, "-inf");
  expectRound(0x7F7FFFFFu, 0x7F80u, "largest float rounds to +inf");
  expectRound(0xFF7FFFFFu, 0xFF80u, "most negative float rounds to -inf");
  expectRound(0x7F7F8000u, 0x7F80u, "tie above the largest bf16 to +inf");
  expectRound(0x7F7F7FFFu, 0x7F7Fu, "below that tie: the largest bf16");
  expectRound(0x7F7F0000u, 0x7F7Fu, "the largest bf16 itself");
  // Zeros and subnormals.
  expectRound(0x00000000u, 0x0000u, "+0");
  expectRound(0x80000000u, 0x8000u, "-0 keeps its sign");
  expectRound(0x80000001u, 0x8000u, "tiny negative rounds to -0");
  expectRound(0x00000001u, 0x0000u, "smallest float subnormal to +0");
  expectRound(0x00008000u, 0x0000u, "subnormal tie down to even (0)");
  expectRound(0x00018000u, 0x0002u, "subnormal tie up to even");
  expectRound(0x00008001u, 0x0001u, "above half the smallest bf16");
  expectRound(0x007FFFFFu, 0x0080u, "largest subnormal to smallest normal");
  expect(widenBF16(uint16_t(0x0001)) == std::ldexp(1.0f, -133),
         "widenBF16(0x0001) is 2^-133", 0x0001);
  expect(std::signbit(widenBF16(uint16_t(0x8000))) &&
             widenBF16(uint16_t(0x8000)) == 0.0f,
         "widenBF16(0x8000) is -0", 0x8000);
  // NaNs stay NaNs, quiet, with their sign, even when their payload lies
  // in the low half only (truncation would make them infinities).
  for (uint32_t word : {0x7FC00000u, 0xFFC00000u, 0x7F800001u, 0xFF800001u,
                        0x7FFFFFFFu, 0x7FA00000u, 0xFF80FFFFu}) {
    uint16_t got = roundToBF16(fromBits(word));
    expect(isNaN16(got) && (got & 0x0040u) && (got >> 15) == (word >> 31),
           "NaN stays a quiet NaN with its sign", word);
  }
}

/// Every bf16 widens exactly and rounds back to itself (NaNs: to a quiet
/// NaN of their sign); the array forms agree with the scalar ones.
void checkRoundTrip() {
  static uint16_t all[0x10000], back[0x10000];
  static float wide[0x10000];
  for (uint32_t b = 0; b < 0x10000u; ++b)
    all[b] = uint16_t(b);
  widenBF16(wide, all, 0x10000);
  roundToBF16(back, wide, 0x10000);
  for (uint32_t b = 0; b < 0x10000u; ++b) {
    expect(bitsOf(wide[b]) == b << 16, "widenBF16 is the upper half", b);
    if (isNaN16(uint16_t(b)))
      expect(back[b] == (b | 0x0040u), "a NaN rounds back quieted", b);
    else
      expect(back[b] == b, "round trip", b);
  }
}
} // namespace

int main() {
  checkAgainstReference();
  checkByName();
  checkRoundTrip();
  std::printf("bfloat16: %lld checks, %lld failed\n", (long long)checks,
              (long long)failures);
  return failures ? 1 : 0;
}
