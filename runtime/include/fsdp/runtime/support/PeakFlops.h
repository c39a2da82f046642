//===- PeakFlops.h - the dense peak of the devices we know ------*- C++ -*-===//
//
// MFU divides the model's FLOPs per second by the device's peak. A peak is
// a datasheet figure, not a measurement: these are NVIDIA's dense (no
// sparsity) tensor-core rates, by the device name CUDA reports. A device
// not listed has no known peak; fsdp-run --peak-tflops gives one (CPUs
// always need it: their peak depends on the cores, the clock and the
// vector width in use).
//
//===----------------------------------------------------------------------===//

#ifndef FSDP_RUNTIME_PEAKFLOPS_H
#define FSDP_RUNTIME_PEAKFLOPS_H

#include <string>

namespace fsdp::rt {

/// FLOP/s of `device` (CUDA's name for it) for GEMMs in bf16 (`bf16`), or
/// in f32 with TF32 tensor cores (`tf32`) or without; 0 when unknown.
inline double knownPeakFlops(const std::string &device, bool bf16, bool tf32) {
  struct Row {
    const char *name;        ///< a substring of the device name
    double bf16, tf32, fp32; ///< TFLOP/s, dense
  };
  // Datasheet figures; the PCIe H100 first, as "H100" also matches it.
  static const Row rows[] = {
      {"H100 PCIe", 756.0, 378.0, 51.2},
      {"H100", 989.4, 494.7, 66.9},
      {"H200", 989.4, 494.7, 66.9},
      {"A100", 312.0, 156.0, 19.5},
  };
  for (const Row &row : rows)
    if (device.find(row.name) != std::string::npos)
      return 1e12 * (bf16 ? row.bf16 : tf32 ? row.tf32 : row.fp32);
  return 0.0;
}

} // namespace fsdp::rt

#endif // FSDP_RUNTIME_PEAKFLOPS_H
