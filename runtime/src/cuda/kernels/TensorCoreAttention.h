//===- TensorCoreAttention.h - attention on tensor cores ---*- C++ -*-===//
//
// The blocked attention's kernels with their products on TF32 tensor cores
// (TensorCoreAttention.cu), called by blockedAttentionForward/Backward
// (BlockedAttention.cu) when the Context allows TF32. `bucket` is the head
// size rounded up to 32, 64 or 128 (BlockedAttention.cu's headBucket has
// checked the shape); the contracts are blockedAttentionForward's and
// blockedAttentionBackward's.
//
// Two sets of kernels implement them: the pipelined ones
// (TensorCoreForward.cu, TensorCoreBackward.cu), the default, and the
// first ones (TensorCoreAttention.cu, "wmma1"), kept so that one GPU run
// can time both: the environment variable FSDP_CUDA_ATTENTION=wmma1,
// read at every call, selects them.
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

/// Whether FSDP_CUDA_ATTENTION=wmma1 asks for the first kernels.
bool firstTensorCoreKernels();

/// The first kernels; the backward runs the key pass (dk, dv) and the
/// query pass (dq) as asked.
template <typename E>
void wmma1AttentionForward(const Context &ctx, int bucket, E *out, float *lse,
                           const E *qkv, int64_t B, int64_t T, int64_t C,
                           int64_t NH, int64_t KV, int64_t W);

template <typename E>
void wmma1AttentionBackward(const Context &ctx, int bucket, E *dqkv,
                            const E *dout, const E *qkv, const E *out,
                            const float *lse, int64_t B, int64_t T, int64_t C,
                            int64_t NH, int64_t KV, int64_t W, bool keys,
                            bool queries);

/// The pipelined kernels.
template <typename E>
void pipelinedAttentionForward(const Context &ctx, int bucket, E *out,
                               float *lse, const E *qkv, int64_t B, int64_t T,
                               int64_t C, int64_t NH, int64_t KV, int64_t W);

template <typename E>
void pipelinedAttentionBackward(const Context &ctx, int bucket, E *dqkv,
                                const E *dout, const E *qkv, const E *out,
                                const float *lse, int64_t B, int64_t T,
                                int64_t C, int64_t NH, int64_t KV, int64_t W);

} // namespace fsdp::rt::cuda::detail

#endif // FSDP_RUNTIME_CUDA_KERNELS_TENSORCOREATTENTION_H
