//===- MoeExperts.h - MoE rows and experts on the CPU -----------*- C++ -*-===//
//
// What runs between the router and the block's output (docs/moe.md, "As
// computed"): the tokens' rows gathered in expert order, one grouped
// linear per expert matrix over ragged row counts, and the weighted
// combine back into token order, with their gradients. As MoeRouting.h:
// kernels in the kernel table's form ahead of the ops that will lower to
// them (issue 31). P = T k pairs; `order`, `position` and `offsets` are
// moeSortByExpert's.
//
//===----------------------------------------------------------------------===//

#ifndef FSDP_RUNTIME_CPU_MOEEXPERTS_H
#define FSDP_RUNTIME_CPU_MOEEXPERTS_H

#include <cstdint>

namespace fsdp::rt::cpu {

class Blas;

/// xs (P x C): row i is x's row of the token of pair order[i] (token
/// order[i] / k).
void moePermute(float *xs, const float *x, const int32_t *order, int64_t T,
                int64_t k, int64_t C);

/// The gradient of moePermute: dx (T x C), row t the sum of its k pairs'
/// rows of dxs, in choice order j (the same sum for any expert grouping).
void moePermuteBackward(float *dx, const float *dxs, const int32_t *position,
                        int64_t T, int64_t k, int64_t C);

/// y (T x C): y_t = sum_j weights_tj ys[position[t k + j]], the sum in f32
/// over j in order.
void moeCombine(float *y, const float *ys, const float *weights,
                const int32_t *position, int64_t T, int64_t k, int64_t C);

/// The gradients of moeCombine: dys (P x C), row position[t k + j] =
/// weights_tj dy_t; dweights (T x k) = <dy_t, ys[position[t k + j]]>
/// (a sum in double).
void moeCombineBackward(float *dys, float *dweights, const float *dy,
                        const float *ys, const float *weights,
                        const int32_t *position, int64_t T, int64_t k,
                        int64_t C);

/// out (P x O): expert e's rows offsets[e] .. offsets[e + 1] - 1 of in
/// (P x I) times its weight w_e^T (w: E x O x I, as a linear's weight).
void moeGroupedLinear(const Blas &blas, float *out, const float *in,
                      const float *w, const int32_t *offsets, int64_t E,
                      int64_t P, int64_t I, int64_t O);

/// din (P x I) = dout (P x O) w_e per expert's rows.
void moeGroupedLinearGradInput(const Blas &blas, float *din, const float *dout,
                               const float *w, const int32_t *offsets,
                               int64_t E, int64_t P, int64_t I, int64_t O);

/// dw (E x O x I): dw_e = dout_e^T in_e over expert e's rows; zero for an
/// expert no pair chose.
void moeGroupedLinearGradWeight(const Blas &blas, float *dw, const float *dout,
                                const float *in, const int32_t *offsets,
                                int64_t E, int64_t P, int64_t I, int64_t O);

} // namespace fsdp::rt::cpu

#endif // FSDP_RUNTIME_CPU_MOEEXPERTS_H
