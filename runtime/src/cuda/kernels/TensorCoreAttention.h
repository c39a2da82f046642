//===- TensorCoreAttention.h - attention on tensor cores ---*- C++ -*-===//
//
// The blocked attention's kernels with their products on TF32 tensor cores,
// called by blockedAttentionForward/Backward (BlockedAttention.cu) when the
// Context allows TF32: the forward in TensorCoreForward.cu, the backward's
// two passes in TensorCoreBackward.cu, their shared pieces (and why they
// are pipelined) in TensorCoreTiles.cuh. `bucket` is the head size rounded
// up to 32, 64 or 128 (BlockedAttention.cu's headBucket has checked the
// shape); the contracts are blockedAttentionForward's and
// blockedAttentionBackward's.
//
//===----------------------------------------------------------------------===//

#ifndef FSDP_RUNTIME_CUDA_KERNELS_TENSORCOREATTENTION_H
#define FSDP_RUNTIME_CUDA_KERNELS_TENSORCOREATTENTION_H

#include "Kernels.h"

#include <cstdint>

namespace fsdp::rt::cuda::detail {

template <typename E>
void tensorCoreAttentionForward(const Context &ctx, int bucket, E *out,
                                float *lse, const E *qkv, int64_t B, int64_t T,
                                int64_t C, int64_t NH, int64_t KV, int64_t W);

template <typename E>
void tensorCoreAttentionBackward(const Context &ctx, int bucket, E *dqkv,
                                 const E *dout, const E *qkv, const E *out,
                                 const float *lse, int64_t B, int64_t T,
                                 int64_t C, int64_t NH, int64_t KV, int64_t W);

} // namespace fsdp::rt::cuda::detail

#endif // FSDP_RUNTIME_CUDA_KERNELS_TENSORCOREATTENTION_H
