//===- Kernels.h - the CUDA backend's kernels -------------------*- C++ -*-===//
//
// The same kernels as src/cpu/Kernels.h, with the same semantics, shapes and
// argument order, on the GPU: row-major, every output overwritten (never
// accumulated into). All pointers are device pointers. Nothing here
// synchronises with the host or allocates: every launch, memset and cuBLAS
// call goes on ctx.stream, in order.
//
// Element types. Each kernel is a template over E, the element type of its
// activations, parameters and gradients (the plan's Float operands): float
// or __nv_bfloat16, instantiated for both in the .cu files (callers name
// E, or pass pointers that deduce it; T is the sequence length). A bf16 kernel
// computes what the CPU backend computes for it (its fp32 kernel on widened
// copies, results rounded to nearest even): it loads bf16, computes and
// accumulates in float, and rounds once where it stores. Statistics (layer
// norm's mean and rstd, attention's log-sum-exp), the loss and its per-row
// terms are float always, and so is AdamW (fp32 master weights and moments).
//
// Errors are not reported by return value (a launch error would surface
// only at the next synchronisation anyway): the first launch error, CUDA
// error or non-successful cuBLAS status is recorded process-wide, and the
// backend collects it with takeError() (e.g. after each step or before it
// synchronises).
//
// This header is plain C++ (the backend's .cpp files include it); the
// kernels live in the .cu files next to it.
//
//===----------------------------------------------------------------------===//

#ifndef FSDP_RUNTIME_CUDA_KERNELS_KERNELS_H
#define FSDP_RUNTIME_CUDA_KERNELS_KERNELS_H

#include "fsdp/runtime/exec/AdamWTensors.h"

#include <cstddef>
#include <cstdint>
#include <string>

#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_runtime_api.h>

namespace fsdp::rt::cuda {

/// Where the kernels run. The caller owns both and has bound `blas` to
/// `stream` (cublasSetStream) and chosen its math mode: CUBLAS_DEFAULT_MATH
/// or CUBLAS_PEDANTIC_MATH for fp32 GEMMs, CUBLAS_TF32_TENSOR_OP_MATH for
/// TF32. The handle must be in host pointer mode (the default).
struct Context {
  cudaStream_t stream;
  cublasHandle_t blas;
  /// Whether our own kernels may round fp32 operands to TF32 for tensor
  /// cores, as `blas`'s math mode lets cuBLAS (fsdp-run --tf32 on): the
  /// blocked attention's products then run on them, for fp32 and bf16
  /// operands alike. False: every product of ours in fp32 FMAs.
  bool tf32 = false;
};

/// Returns the first error recorded since the last call (launch errors,
/// failed CUDA calls, cuBLAS statuses), as "<kernel>: <reason>", and clears
/// it. False when none. Thread-safe; the record is process-wide.
bool takeError(std::string &message);

/// The name of a cuBLAS status, e.g. "CUBLAS_STATUS_INVALID_VALUE".
const char *cublasStatusName(cublasStatus_t status);

/// The element types every template below is instantiated for, for an
/// X-macro.
#define FSDP_CUDA_ELEMENT_TYPES(X) X(float) X(__nv_bfloat16)

/// The kernels the plan's instructions run, declared from the kernel table
/// (each kernel's `call` in include/fsdp/Dialect/FSDP/IR/FSDPKernels.td:
/// the Context first, then the call's operands, E for a Float one, dims
/// and parameters). What each computes is documented at its definition
/// (the .cu files); one that differs from its declaration leaves the
/// declared function undefined, and the link fails.
#define FSDP_KERNEL_CUDA_DECLS
#include "fsdp/runtime/KernelDecls.inc"

// The kernels bound or run by hand.

/// *loss = mean over N rows of -log softmax(logits[row])[targets[row]],
/// deterministic. Without `rowScratch` the whole loss is computed by ONE
/// thread block (the only way to fix the summation order without memory to
/// hold partial sums): correct, but it runs on one SM, several milliseconds
/// at N = 4096, V = 50257. With `rowScratch` (N floats of device memory the
/// caller does not need afterwards) one block per row writes the row's loss
/// there and a second, one-block kernel sums them in order: as fast as the
/// memory allows, and equally deterministic (not bitwise the same value as
/// the one-block path).
template <typename E>
void crossEntropyForward(const Context &ctx, float *loss, const E *logits,
                         const int32_t *targets, int64_t N, int64_t V,
                         float *rowScratch = nullptr);

/// AdamW step t >= 1, the update of cpu::adamw up to fused multiply-adds
/// (bias corrections computed on the host from `step`). fp32 master
/// weights and moments. With `gradScale` (a device scalar, gradient
/// clipping's coefficient) on grad x scale. With `copy` (a unit's shard
/// copy, bf16 bits), each updated element rounded into it too, as
/// cpu::adamw does.
void adamw(const Context &ctx, float *param, float *m, float *v,
           const float *grad, int64_t n, float lr, float beta1, float beta2,
           float eps, float weightDecay, int64_t step,
           const float *gradScale = nullptr, uint16_t *copy = nullptr);
/// The same from a bf16 gradient (its bits), widened as it is read.
void adamw(const Context &ctx, float *param, float *m, float *v,
           const uint16_t *grad, int64_t n, float lr, float beta1, float beta2,
           float eps, float weightDecay, int64_t step,
           const float *gradScale = nullptr, uint16_t *copy = nullptr);

/// As cpu::adamwTensors: adamw on each tensor of the list (its own
/// gradient type, hyperparameters, scale and copy), in one launch per 24
/// tensors.
void adamwTensors(const Context &ctx, const AdamWTensor *tensors, size_t count,
                  int64_t step);

/// As cpu::moeSelectionBiasUpdate (f32: the bias and its reduced signal
/// are master-precision shards; `copy`, where given, bf16 bits).
void moeSelectionBiasUpdate(const Context &ctx, float *bias,
                            const float *signal, int64_t n, double rate,
                            uint16_t *copy = nullptr);

/// Gradient clipping, as cpu::gradSqSum and cpu::clipCoefficient. The sum
/// of squares is in double and in an order fixed by n alone: up to
/// kGradSqSumBlocks blocks of kGradSqSumThreads threads (one per that many
/// elements) stride over grad, each block leaves its sum in `partials`
/// (one double per block: at most plan::kGradSqSumScratch floats), and one
/// block adds them, with *acc (when given), into *out. The coefficient is
/// computed on the device: nothing waits for the host.
inline constexpr int kGradSqSumBlocks = 256, kGradSqSumThreads = 256;
inline constexpr double kClipEpsilon = 1e-6;
template <typename E>
void gradSqSum(const Context &ctx, float *out, const E *grad, const float *acc,
               int64_t n, float *partials);

/// data[i] *= scale for n elements, in place.
template <typename E>
void scale(const Context &ctx, E *data, int64_t n, float scale);

/// The cast kernel: n elements widened (exact) or rounded to nearest even
/// (bit for bit runtime/include/fsdp/runtime/support/BFloat16.h's roundToBF16,
/// NaN included).
void cast(const Context &ctx, __nv_bfloat16 *out, const float *in, int64_t n);
void cast(const Context &ctx, float *out, const __nv_bfloat16 *in, int64_t n);

// Mixture of experts, ahead of the ops that will lower to them (issue 31;
// docs/moe.md): runtime/src/cpu/MoeRouting.h and MoeExperts.h say what
// each computes, with the same arguments after the Context. Logits and
// rows are E; router weights and their gradient are float. Expert indices
// must be in [0, NE) (the router writes only such): the sort places a
// pair only under its expert.

template <typename E>
void moeRouterForward(const Context &ctx, float *weights, int32_t *experts,
                      const E *logits, const float *bias, int64_t T, int64_t NE,
                      int64_t k, int64_t scoring, int64_t normalize,
                      double scale);
template <typename E>
void moeRouterBackward(const Context &ctx, E *dlogits, const float *dweights,
                       const E *logits, const int32_t *experts, int64_t T,
                       int64_t NE, int64_t k, int64_t scoring,
                       int64_t normalize, double scale);
void moeSortByExpert(const Context &ctx, int32_t *order, int32_t *position,
                     int32_t *offsets, const int32_t *experts, int64_t T,
                     int64_t k, int64_t NE);
template <typename E>
void moePermute(const Context &ctx, E *xs, const E *x, const int32_t *order,
                int64_t T, int64_t k, int64_t C);
template <typename E>
void moePermuteBackward(const Context &ctx, E *dx, const E *dxs,
                        const int32_t *position, int64_t T, int64_t k,
                        int64_t C);
template <typename E>
void moeCombine(const Context &ctx, E *y, const E *ys, const float *weights,
                const int32_t *position, int64_t T, int64_t k, int64_t C);
template <typename E>
void moeCombineBackward(const Context &ctx, E *dys, float *dweights,
                        const E *dy, const E *ys, const float *weights,
                        const int32_t *position, int64_t T, int64_t k,
                        int64_t C);
template <typename E>
void moeAuxStats(const Context &ctx, float *stats, const E *logits,
                 const int32_t *experts, int64_t T, int64_t NE, int64_t k,
                 float *rowScratch);
void moeAuxLoss(const Context &ctx, float *loss, const float *stats, int64_t L,
                int64_t T, int64_t NE, double coef);
template <typename E>
void moeAuxLossBackward(const Context &ctx, E *dlogits, const float *dloss,
                        const float *stats, const E *logits, int64_t L,
                        int64_t T, int64_t NE, double coef,
                        float *expertScratch);

} // namespace fsdp::rt::cuda

#endif // FSDP_RUNTIME_CUDA_KERNELS_KERNELS_H
