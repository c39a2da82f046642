//===- emu_nvbf16.cpp - __float2bfloat16_rn for the emulation -------------===//
//
// The emulated kernels convert float to bf16 with this. Where the CUDA
// toolkit's cuda_bf16.h is there (EMU_NV_BF16), it is NVIDIA's own code:
// the header's host path of __float2bfloat16_rn, compiled here without the
// emulator (whose dim3 and float4 the header's vector types would clash
// with), so the test compares NVIDIA's rounding with the CPU backend's
// (BFloat16.h). The device runs one cvt.rn.bf16.f32 instead; the GPU
// parity test compares that. Without the toolkit, the same algorithm
// written out (truncate, then round the 16 dropped bits to nearest even;
// NaN to the canonical 0x7FFF), so the emulation still runs.
//
//===----------------------------------------------------------------------===//

#ifdef EMU_NV_BF16
#include <cuda_bf16.h>
#endif

#include <cstring>

namespace emu {

#ifdef EMU_NV_BF16
extern const char *const kNvBF16Source;
const char *const kNvBF16Source = "cuda_bf16.h (the CUDA toolkit's host code)";
unsigned short nvFloat2BF16(float x) {
  const __nv_bfloat16 b = __float2bfloat16_rn(x);
  unsigned short bits;
  std::memcpy(&bits, &b, sizeof bits);
  return bits;
}
#else
extern const char *const kNvBF16Source;
const char *const kNvBF16Source = "a copy of cuda_bf16.h's algorithm";
unsigned short nvFloat2BF16(float x) {
  unsigned int word;
  std::memcpy(&word, &x, sizeof word);
  if ((word & 0x7FFFFFFFu) > 0x7F800000u)
    return 0x7FFFu;
  unsigned short kept = (unsigned short)(word >> 16);
  const unsigned int dropped = word << 16;
  if (dropped > 0x80000000u || (dropped == 0x80000000u && (kept & 1u)))
    ++kept;
  return kept;
}
#endif

} // namespace emu
