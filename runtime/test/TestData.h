//===- TestData.h - reproducible inputs for the kernel tests ----*- C++ -*-===//
//
// The CPU and CUDA kernel tests draw their inputs from the same generator,
// so that every machine checks the same numbers.
//
//===----------------------------------------------------------------------===//

#ifndef FSDP_RUNTIME_TEST_TESTDATA_H
#define FSDP_RUNTIME_TEST_TESTDATA_H

#include <cstddef>
#include <cstdint>
#include <vector>

namespace fsdp::rt::test {

/// xorshift64*, so that the inputs are the same on every machine.
struct Rng {
  uint64_t state;
  explicit Rng(uint64_t seed) : state(seed * 0x9E3779B97F4A7C15ull + 1) {}
  uint64_t next() {
    state ^= state >> 12;
    state ^= state << 25;
    state ^= state >> 27;
    return state * 0x2545F4914F6CDD1Dull;
  }
  /// Uniform in [-1, 1).
  float uniform() { return float(next() >> 40) / float(1 << 23) - 1.0f; }
  int32_t below(int64_t n) { return int32_t((next() >> 33) % uint64_t(n)); }
};

inline std::vector<float> randomVector(Rng &rng, size_t n, float scale = 1.0f,
                                       float offset = 0.0f) {
  std::vector<float> v(n);
  for (float &x : v)
    x = offset + scale * rng.uniform();
  return v;
}

inline std::vector<int32_t> randomTokens(Rng &rng, size_t n, int64_t V) {
  std::vector<int32_t> v(n);
  for (int32_t &t : v)
    t = rng.below(V);
  return v;
}

} // namespace fsdp::rt::test

#endif // FSDP_RUNTIME_TEST_TESTDATA_H
