//===- Init.cpp - deterministic parameter initialisation ------------------===//
//
// Element i of a parameter is a pure function of (seed, name, i): a
// counter-based generator (splitmix64 of a per-parameter key plus the
// element pair index) feeding Box-Muller. A rank that holds only a shard of
// a parameter therefore initialises exactly the values the full parameter
// has there, and runs are reproducible across thread counts.
//
//===----------------------------------------------------------------------===//

#include "fsdp/runtime/exec/Session.h"

#include <cmath>

namespace fsdp::rt {
namespace {
uint64_t splitmix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

uint64_t fnv1a(const std::string &s) {
  uint64_t h = 0xCBF29CE484222325ull;
  for (unsigned char c : s)
    h = (h ^ c) * 0x100000001B3ull;
  return h;
}
} // namespace

void initializeParam(const ParamDesc &param, uint64_t seed, int64_t begin,
                     int64_t end, float *out) {
  int64_t n = end - begin;
  if (param.init != plan::InitKind::Normal) {
    float value = param.init == plan::InitKind::Ones ? 1.0f : 0.0f;
    for (int64_t i = 0; i < n; ++i)
      out[i] = value;
    return;
  }
  uint64_t key = splitmix64(seed ^ fnv1a(param.name));
  double stddev = param.stddev;
#pragma omp parallel for schedule(static)
  for (int64_t j = 0; j < n; ++j) {
    int64_t i = begin + j;
    uint64_t bits = splitmix64(key + uint64_t(i >> 1));
    // Two uniforms in (0, 1], then the Box-Muller pair; i picks one.
    double u1 = (double((bits >> 32) & 0xFFFFFFFFu) + 1.0) / 4294967296.0;
    double u2 = (double(bits & 0xFFFFFFFFu) + 1.0) / 4294967296.0;
    double r = std::sqrt(-2.0 * std::log(u1)), theta = 2.0 * M_PI * u2;
    out[j] = float(stddev * r * ((i & 1) ? std::sin(theta) : std::cos(theta)));
  }
}

} // namespace fsdp::rt
