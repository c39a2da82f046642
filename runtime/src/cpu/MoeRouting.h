//===- MoeRouting.h - mixture-of-experts routing on the CPU -----*- C++ -*-===//
//
// The router of a mixture-of-experts block and the sort of its (token,
// choice) pairs by expert, as docs/moe.md specifies them. These kernels
// come before the ops that will lower to them (issue 31): their
// signatures are the kernel table's form (pointers, dims, then
// parameters), so that the records added with the ops declare the same
// functions; until then this header declares them and
// fsdp-cpu-kernels-test checks them against double-precision references.
//
//===----------------------------------------------------------------------===//

#ifndef FSDP_RUNTIME_CPU_MOEROUTING_H
#define FSDP_RUNTIME_CPU_MOEROUTING_H

#include "fsdp/runtime/MoeRouter.h"

#include <cstdint>

namespace fsdp::rt::cpu {

/// Rows of E router logits (T rows) -> each row's k chosen experts, in
/// decreasing score order (ties: the lower expert index), and their
/// weights. Softmax: the choice is the top k of the logits (softmax keeps
/// their order); weights are the softmax over the chosen logits when
/// `normalize`, else the softmax probabilities over all E. Sigmoid: the
/// choice is the top k of sigmoid(z) + bias (bias: E, may be null for
/// none); weights are the chosen sigmoids, divided by their sum when
/// `normalize`. Both then times `scale` (routed_scaling_factor, 1 for
/// Mixtral and Qwen3-MoE). Computed in double, stored as float.
/// `scoring` is a moe::Scoring (MoeRouter.h, which the CUDA kernels share).
/// Requires 1 <= k <= min(E, moe::kMaxTopK).
void moeRouterForward(float *weights, int32_t *experts, const float *logits,
                      const float *bias, int64_t T, int64_t E, int64_t k,
                      int64_t scoring, int64_t normalize, double scale);

/// The gradient of moeRouterForward's weights with respect to its logits
/// (docs/moe.md, "The block, backward"), for the choice `experts` the
/// forward made; dlogits (T x E) is overwritten. The choice itself has no
/// gradient, nor has the bias.
void moeRouterBackward(float *dlogits, const float *dweights,
                       const float *logits, const int32_t *experts, int64_t T,
                       int64_t E, int64_t k, int64_t scoring, int64_t normalize,
                       double scale);

/// The T k (token, choice) pairs sorted by expert, stably: `order` (T k)
/// lists pair indices t k + j by expert, then by pair index; `position`
/// (T k) is its inverse (where pair p landed: order[position[p]] = p);
/// `offsets` (E + 1) is where each expert's run starts (offsets[E] = T k),
/// so expert e has offsets[e + 1] - offsets[e] pairs. False, with nothing
/// written past `offsets`, when an expert index is outside [0, E): the
/// caller reports it (a plan's router writes only valid ones).
bool moeSortByExpert(int32_t *order, int32_t *position, int32_t *offsets,
                     const int32_t *experts, int64_t T, int64_t k, int64_t E);

/// The auxiliary loss's statistics of one MoE layer (docs/moe.md, "Load
/// balancing"): stats (2 x E) gets each expert's sum over the T rows of
/// its softmax probability (row 0) and the number of (token, choice)
/// pairs that chose it (row 1, exact as a float up to 2^24). Sums in
/// double in row order. rowScratch: 2 T floats (each row's max and the
/// reciprocal of its sum of exps).
void moeAuxStats(float *stats, const float *logits, const int32_t *experts,
                 int64_t T, int64_t E, int64_t k, float *rowScratch);

/// loss = coef E sum_e F_e P_e over the L layers' stats (L x 2 x E), with
/// F_e = sum_l counts_le / (L T) and P_e = sum_l probSum_le / (L T):
/// transformers' load_balancing_loss_func on the layers' concatenated
/// router logits, times router_aux_loss_coef.
void moeAuxLoss(float *loss, const float *stats, int64_t L, int64_t T,
                int64_t E, double coef);

/// The auxiliary loss's gradient with respect to one layer's logits
/// (T x E, overwritten): with a_e = dloss coef E F_e / (L T) (the counts
/// are constant), dz_t = p_t (a - <p_t, a>). expertScratch: E floats.
void moeAuxLossBackward(float *dlogits, const float *dloss, const float *stats,
                        const float *logits, int64_t L, int64_t T, int64_t E,
                        double coef, float *expertScratch);

/// DeepSeek-V3's selection-bias signal (the kernel table's
/// fsdp.moe_bias_signal): result[e] = the pairs of `experts` (R x K) that
/// chose e, minus their mean R K / E.
void moeBiasSignal(float *result, const int32_t *experts, int64_t R, int64_t K,
                   int64_t E);

} // namespace fsdp::rt::cpu

#endif // FSDP_RUNTIME_CPU_MOEROUTING_H
