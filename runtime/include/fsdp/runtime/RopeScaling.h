//===- RopeScaling.h - rope's frequencies, for every backend ----*- C++ -*-===//
//
// The inverse frequencies of rotary embeddings with Hugging Face's rope
// scaling (transformers' modeling_rope_utils.py: `default`, `linear`,
// `llama3`, `yarn`), and the factor yarn puts on cos and sin. One
// definition for the CPU kernel, the CUDA kernel (FSDP_ROPE_HD is
// `__host__ __device__` under nvcc) and the compiler (fsdp-gen precomputes
// yarn's correction range and attention factor with the host functions at
// the end), so that no two of them can diverge.
//
// Every float operation is the one torch performs, in the same order and
// with the same roundings: torch computes inv_freq in float32, casts a
// Python scalar to float32 where it meets a float32 tensor, and divides a
// scalar by a tensor as `tensor.reciprocal() * scalar`. Scalars that
// Python computes in double (llama3's wavelength bounds, yarn's ramp
// width) are computed in double here too.
//
// Standard C++17 (plus the macro): no dependency beyond <cmath>.
//
//===----------------------------------------------------------------------===//

#ifndef FSDP_RUNTIME_ROPESCALING_H
#define FSDP_RUNTIME_ROPESCALING_H

#include <cmath>
#include <cstdint>
#include <math.h> // powf, in host and device code

#if defined(__CUDACC__)
#define FSDP_ROPE_HD __host__ __device__
#else
#define FSDP_ROPE_HD
#endif

namespace fsdp::plan {

/// Python's 2 * math.pi (the double; repr round-trips).
inline constexpr double kRopeTwoPi = 6.283185307179586;

/// rope's `scaling` parameter, as the plan stores it (fsdp.rope's
/// #fsdp.rope_scaling<...> attribute has the same values).
enum class RopeScalingKind : int64_t {
  Default = 0, ///< inv_freq[i] = 1 / theta^(2i/hs)
  Linear = 1,  ///< inv_freq / factor
  Llama3 = 2,  ///< Llama 3.1's smooth band between two wavelengths
  Yarn = 3,    ///< YaRN: a ramp between interpolation and extrapolation
};

/// The scaling parameters of one rope instruction (the kernel's parameters
/// after heads, kv_heads and theta; unused ones keep their defaults).
struct RopeScaling {
  int64_t kind = 0;           ///< a RopeScalingKind
  double factor = 1;          ///< linear, llama3, yarn
  double lowFreqFactor = 1;   ///< llama3
  double highFreqFactor = 4;  ///< llama3
  double originalMax = 0;     ///< llama3: original_max_position_embeddings
  double attentionFactor = 1; ///< yarn: cos and sin are multiplied by it
  double correctionLow = 0;   ///< yarn: the ramp's start (a pair index)
  double correctionHigh = 0;  ///< yarn: the ramp's end
};

/// The scaling from the kernels' arguments (the rope op's attributes, as
/// the plan's kernel table passes them to the CPU and CUDA kernels).
inline RopeScaling ropeScalingOf(int64_t kind, double factor,
                                 double lowFreqFactor, double highFreqFactor,
                                 int64_t originalMax, double attentionFactor,
                                 double correctionLow, double correctionHigh) {
  return {kind,
          factor,
          lowFreqFactor,
          highFreqFactor,
          double(originalMax),
          attentionFactor,
          correctionLow,
          correctionHigh};
}

/// Hugging Face's inverse frequency of pair i of a head of hs elements
/// (i < hs/2), in float as torch computes it.
FSDP_ROPE_HD inline float ropeInvFreq(float theta, int64_t i, int64_t hs,
                                      const RopeScaling &s) {
  // default: 1.0 / (base ** (arange(0, dim, 2).float() / dim))
  const float posFreq = powf(theta, float(2 * i) / float(hs));
  const float invFreq = 1.0f / posFreq;
  const float factor = float(s.factor);
  switch (RopeScalingKind(s.kind)) {
  case RopeScalingKind::Default:
    return invFreq;
  case RopeScalingKind::Linear:
    return invFreq / factor; // inv_freq /= factor
  case RopeScalingKind::Llama3: {
    const double lowFreqWavelen = s.originalMax / s.lowFreqFactor;
    const double highFreqWavelen = s.originalMax / s.highFreqFactor;
    // wavelen = 2 * math.pi / inv_freq (the reciprocal, times the scalar)
    const float wavelen = (1.0f / invFreq) * float(kRopeTwoPi);
    // wavelen < high_freq_wavelen: kept; wavelen > low_freq_wavelen:
    // divided by factor; between: smoothed (comparisons in float).
    if (wavelen > float(lowFreqWavelen))
      return invFreq / factor;
    if (wavelen < float(highFreqWavelen))
      return invFreq;
    // smooth = (old_context_len / wavelen - low) / (high - low)
    const float smooth =
        ((1.0f / wavelen) * float(s.originalMax) - float(s.lowFreqFactor)) /
        float(s.highFreqFactor - s.lowFreqFactor);
    // (1 - smooth) * inv_freq / factor + smooth * inv_freq
    return (1.0f - smooth) * invFreq / factor + smooth * invFreq;
  }
  case RopeScalingKind::Yarn: {
    const float extrapolation = 1.0f / posFreq;
    const float interpolation = 1.0f / (factor * posFreq);
    double low = s.correctionLow, high = s.correctionHigh;
    if (low == high)
      high += 0.001; // linear_ramp_factor's guard against a zero width
    float ramp = (float(i) - float(low)) / float(high - low);
    ramp = ramp < 0.0f ? 0.0f : (ramp > 1.0f ? 1.0f : ramp);
    const float extrapolationFactor = 1.0f - ramp;
    return interpolation * (1.0f - extrapolationFactor) +
           extrapolation * extrapolationFactor;
  }
  }
  return invFreq;
}

/// What cos and sin are multiplied by (transformers' attention_scaling):
/// yarn's attention factor, 1 otherwise.
FSDP_ROPE_HD inline float ropeCosSinScale(const RopeScaling &s) {
  return RopeScalingKind(s.kind) == RopeScalingKind::Yarn
             ? float(s.attentionFactor)
             : 1.0f;
}

/// Host only: what is wrong with `s` for the kernels (nullptr: nothing):
/// an unknown kind, or a value the kind divides by or scales with that is
/// not positive and finite. The plan loader and the IR verifier both ask.
inline const char *ropeScalingError(const RopeScaling &s) {
  auto positive = [](double x) { return x > 0 && std::isfinite(x); };
  if (!(s.kind >= 0 && s.kind <= int64_t(RopeScalingKind::Yarn)))
    return "has a rope scaling that is not 0 (default), 1 (linear), "
           "2 (llama3) or 3 (yarn)";
  if (s.kind == 0)
    return nullptr;
  if (!positive(s.factor))
    return "has a rope scaling factor that is not positive and finite";
  if (RopeScalingKind(s.kind) == RopeScalingKind::Llama3 &&
      !(positive(s.lowFreqFactor) && positive(s.highFreqFactor) &&
        s.highFreqFactor > s.lowFreqFactor && positive(s.originalMax)))
    return "has llama3 rope scaling without 0 < low_freq_factor < "
           "high_freq_factor and original_max_positions > 0";
  if (RopeScalingKind(s.kind) == RopeScalingKind::Yarn &&
      !(positive(s.attentionFactor) && std::isfinite(s.correctionHigh) &&
        s.correctionLow >= 0 && s.correctionHigh >= s.correctionLow))
    return "has yarn rope scaling without a positive attention_factor and "
           "0 <= correction_low <= correction_high";
  return nullptr;
}

/// Host only (the compiler's): yarn's correction range, the pair indices
/// between which the ramp runs (transformers' find_correction_range, in
/// double): for `beta` rotations over the original context,
/// dim * log(original / (beta * 2 pi)) / (2 log theta), floored (low) and
/// ceiled (high) when `truncate`, clamped to [0, dim - 1].
inline void yarnCorrectionRange(double betaFast, double betaSlow, int64_t dim,
                                double theta, double originalMax, bool truncate,
                                double &low, double &high) {
  auto correctionDim = [&](double rotations) {
    return (double(dim) * std::log(originalMax / (rotations * kRopeTwoPi))) /
           (2 * std::log(theta));
  };
  low = correctionDim(betaFast);
  high = correctionDim(betaSlow);
  if (truncate) {
    low = std::floor(low);
    high = std::ceil(high);
  }
  low = low > 0 ? low : 0;
  high = high < double(dim - 1) ? high : double(dim - 1);
}

/// Host only: yarn's mscale, 0.1 mscale log(scale) + 1 (1 for scale <= 1).
inline double yarnMscale(double scale, double mscale = 1) {
  return scale <= 1 ? 1.0 : 0.1 * mscale * std::log(scale) + 1.0;
}

} // namespace fsdp::plan

#endif // FSDP_RUNTIME_ROPESCALING_H
