//===- BFloat16.h - bf16 storage: widening and rounding ---------*- C++ -*-===//
//
// bf16 is the top half of an IEEE binary32: widening is a shift, exact.
// Narrowing rounds to nearest, ties to even, as CUDA's __float2bfloat16_rn
// does, so that a CPU kernel and a CUDA kernel that compute the same float
// store the same bf16 bits. NaNs stay NaNs (quiet, sign kept); values past
// the largest bf16 round to infinity, as IEEE rounding says.
//
//===----------------------------------------------------------------------===//

#ifndef FSDP_RUNTIME_BFLOAT16_H
#define FSDP_RUNTIME_BFLOAT16_H

#include <cstdint>
#include <cstring>

namespace fsdp::rt {

inline float widenBF16(uint16_t bits) {
  uint32_t word = uint32_t(bits) << 16;
  float value;
  std::memcpy(&value, &word, sizeof(value));
  return value;
}

inline uint16_t roundToBF16(float value) {
  uint32_t word;
  std::memcpy(&word, &value, sizeof(word));
  if ((word & 0x7FFFFFFFu) > 0x7F800000u) // NaN: keep it one, quiet
    return uint16_t((word >> 16) | 0x0040u);
  // Adding 0x7FFF plus the kept part's lowest bit rounds half to even; a
  // carry into the exponent is the right result (up to infinity).
  uint32_t lsb = (word >> 16) & 1u;
  return uint16_t((word + 0x7FFFu + lsb) >> 16);
}

/// Widens n bf16 values into floats (may not overlap).
inline void widenBF16(float *out, const uint16_t *in, int64_t n) {
  for (int64_t i = 0; i < n; ++i)
    out[i] = widenBF16(in[i]);
}

/// Rounds n floats into bf16 values (may not overlap).
inline void roundToBF16(uint16_t *out, const float *in, int64_t n) {
  for (int64_t i = 0; i < n; ++i)
    out[i] = roundToBF16(in[i]);
}

} // namespace fsdp::rt

#endif // FSDP_RUNTIME_BFLOAT16_H
