//===- Communicator.cpp - what every communicator shares ------------------===//

#include "fsdp/runtime/comm/Communicator.h"

#include "comm/CollectiveMath.h"
#include "fsdp/runtime/support/BFloat16.h"

#include <cstring>

// As FSDP_CPU_KERNEL in cpu/Kernels.h: one clone per x86-64 level, picked
// by the dynamic loader for the CPU at hand.
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define FSDP_VECTOR_LOOP                                                       \
  __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#else
#define FSDP_VECTOR_LOOP
#endif

namespace fsdp::rt {

FSDP_VECTOR_LOOP
void roundShardToBF16(uint16_t *out, const float *in, int64_t n) {
  roundToBF16(out, in, n);
}

FSDP_VECTOR_LOOP
void addBF16(uint16_t *sum, const uint16_t *a, const uint16_t *b, int64_t n) {
  for (int64_t i = 0; i < n; ++i)
    sum[i] = roundToBF16(widenBF16(a[i]) + widenBF16(b[i]));
}

FSDP_VECTOR_LOOP
void scaleBF16(uint16_t *x, float scale, int64_t n) {
  for (int64_t i = 0; i < n; ++i)
    x[i] = roundToBF16(widenBF16(x[i]) * scale);
}

void Communicator::allGatherFrom(const void *shard, plan::DType shardType,
                                 void *full, plan::DType type, int64_t total) {
  plan::ShardRange range = plan::shardRange(total, rank(), size());
  int64_t count = range.end - range.begin;
  // The shard's slot. A plan's shard (a persistent param buffer) never
  // shares memory with its gathered buffer; memmove all the same where
  // that costs nothing.
  void *slot =
      static_cast<unsigned char *>(full) + range.begin * plan::dtypeSize(type);
  if (shardType == type)
    std::memmove(slot, shard, uint64_t(count) * plan::dtypeSize(type));
  else if (type == plan::DType::BF16)
    roundShardToBF16(static_cast<uint16_t *>(slot),
                     static_cast<const float *>(shard), count);
  else
    widenBF16(static_cast<float *>(slot), static_cast<const uint16_t *>(shard),
              count);
  allGather(full, total, type);
}

} // namespace fsdp::rt
