//===- BF16Convert.cpp - bf16 <-> f32 over the OpenMP team ----------------===//
//
// Each pass splits n into blocks of kBlock elements, the blocks over the
// team; a block is one call of a vectorised leaf (FSDP_CPU_KERNEL: the
// clone for the CPU's x86-64 level), so the leaves see plain loops GCC
// vectorises: integer shifts, adds and a select, no float arithmetic,
// hence the same bits on every CPU.
//
//===----------------------------------------------------------------------===//

#include "BF16Convert.h"

#include "Kernels.h"

#include "fsdp/runtime/support/BFloat16.h"

#include <algorithm>

namespace fsdp::rt::cpu {
namespace {

/// Elements per block: 64 KiB of floats, large enough that a block's
/// call costs nothing beside its work.
constexpr int64_t kBlock = 1 << 14;
/// Below this many elements a pass stays on the calling thread: a
/// parallel region costs microseconds (and far more when a core is busy).
constexpr int64_t kTeamMin = 1 << 16;

FSDP_CPU_KERNEL void widenBlock(float *out, const uint16_t *in, int64_t n) {
  for (int64_t i = 0; i < n; ++i)
    out[i] = widenBF16(in[i]);
}

FSDP_CPU_KERNEL void roundBlock(uint16_t *out, const float *in, int64_t n) {
  for (int64_t i = 0; i < n; ++i)
    out[i] = roundToBF16(in[i]);
}

/// Calls block(begin, length) over [0, n) in kBlock pieces, across the
/// team when n is at least kTeamMin.
template <typename Block> void overTeam(int64_t n, Block block) {
  const int64_t blocks = (n + kBlock - 1) / kBlock;
#pragma omp parallel for schedule(static) if (n >= kTeamMin)
  for (int64_t k = 0; k < blocks; ++k)
    block(k * kBlock, std::min(kBlock, n - k * kBlock));
}

} // namespace

void widenBF16Team(float *out, const uint16_t *in, int64_t n) {
  overTeam(n,
           [=](int64_t i, int64_t len) { widenBlock(out + i, in + i, len); });
}

void roundToBF16Team(uint16_t *out, const float *in, int64_t n) {
  overTeam(n,
           [=](int64_t i, int64_t len) { roundBlock(out + i, in + i, len); });
}

} // namespace fsdp::rt::cpu
