//===- MoeGroupedLinear.cu - the grouped linear over experts' rows
//---------===//
//
// The CUDA side of cpu/MoeExperts.h's grouped linear and its gradients:
// expert e's rows offsets[e] .. offsets[e + 1] - 1 through its own matrix,
// one cuBLAS GEMM per expert with rows. The offsets are on the device
// (the sort wrote them there); cuBLAS takes sizes from the host, so they
// come back first: a copy of E + 1 integers and a synchronisation of the
// stream each call. That stalls the stream once per grouped linear (the
// choice several frameworks make; docs/moe.md weighs it against GEMMs at
// the capacity bound and a grouped kernel of our own, to decide on a GPU).
// Offsets are clamped into [0, P] as the CPU's are.
//
//===----------------------------------------------------------------------===//

#include "Common.cuh"

#include <algorithm>
#include <vector>

namespace fsdp::rt::cuda {
namespace {

/// Expert e's first row and row count for every e, from the device's
/// offsets (E + 1), each run within [0, P). Empty on a failed copy (the
/// error is recorded).
std::vector<std::pair<int64_t, int64_t>> expertRows(const Context &ctx,
                                                    const int32_t *offsets,
                                                    int64_t E, int64_t P,
                                                    const char *where) {
  std::vector<int32_t> host(static_cast<size_t>(E + 1));
  cudaError_t err =
      cudaMemcpyAsync(host.data(), offsets, sizeof(int32_t) * host.size(),
                      cudaMemcpyDeviceToHost, ctx.stream);
  if (err == cudaSuccess)
    err = cudaStreamSynchronize(ctx.stream);
  if (err != cudaSuccess) {
    detail::checkCuda(err, where);
    return {};
  }
  std::vector<std::pair<int64_t, int64_t>> rows(static_cast<size_t>(E));
  int64_t end = 0;
  for (int64_t e = 0; e < E; ++e) {
    int64_t begin = std::clamp<int64_t>(host[size_t(e)], end, P);
    end = std::clamp<int64_t>(host[size_t(e + 1)], begin, P);
    rows[size_t(e)] = {begin, end - begin};
  }
  return rows;
}

} // namespace

/// Each expert's rows of `a` (P x K) times its matrix of `w` (E x O x I;
/// transposed for the forward), into its rows of `c` (P x N): the forward
/// (K = I, N = O) and the input gradient (K = O, N = I).
template <typename Elem>
void rowsTimesExperts(const Context &ctx, const char *where, bool transposed,
                      Elem *c, const Elem *a, const Elem *w,
                      const int32_t *offsets, int64_t E, int64_t P, int64_t I,
                      int64_t O) {
  const int64_t K = transposed ? I : O, N = transposed ? O : I;
  auto rows = expertRows(ctx, offsets, E, P, where);
  for (size_t e = 0; e < rows.size(); ++e)
    if (rows[e].second > 0)
      detail::rowGemm(ctx, where, /*transA=*/false, transposed, rows[e].second,
                      N, K, 1.0f, a + rows[e].first * K, K,
                      w + int64_t(e) * O * I, I, 0.0f, c + rows[e].first * N,
                      N);
}

template <typename Elem>
void moeGroupedLinear(const Context &ctx, Elem *out, const Elem *in,
                      const Elem *w, const int32_t *offsets, int64_t E,
                      int64_t P, int64_t I, int64_t O) {
  rowsTimesExperts(ctx, "moeGroupedLinear", /*transposed=*/true, out, in, w,
                   offsets, E, P, I, O);
}

template <typename Elem>
void moeGroupedLinearGradInput(const Context &ctx, Elem *din, const Elem *dout,
                               const Elem *w, const int32_t *offsets, int64_t E,
                               int64_t P, int64_t I, int64_t O) {
  rowsTimesExperts(ctx, "moeGroupedLinearGradInput", /*transposed=*/false, din,
                   dout, w, offsets, E, P, I, O);
}

template <typename Elem>
void moeGroupedLinearGradWeight(const Context &ctx, Elem *dw, const Elem *dout,
                                const Elem *in, const int32_t *offsets,
                                int64_t E, int64_t P, int64_t I, int64_t O) {
  auto rows = expertRows(ctx, offsets, E, P, "moeGroupedLinearGradWeight");
  // K = 0 (an expert no pair chose) writes zeros: rowGemm's empty sum.
  for (size_t e = 0; e < rows.size(); ++e)
    detail::rowGemm(ctx, "moeGroupedLinearGradWeight", /*transA=*/true,
                    /*transB=*/false, O, I, rows[e].second, 1.0f,
                    dout + rows[e].first * O, O, in + rows[e].first * I, I,
                    0.0f, dw + int64_t(e) * O * I, I);
}

#define FSDP_INSTANTIATE(E)                                                    \
  template void moeGroupedLinear<E>(const Context &, E *, const E *,           \
                                    const E *, const int32_t *, int64_t,       \
                                    int64_t, int64_t, int64_t);                \
  template void moeGroupedLinearGradInput<E>(                                  \
      const Context &, E *, const E *, const E *, const int32_t *, int64_t,    \
      int64_t, int64_t, int64_t);                                              \
  template void moeGroupedLinearGradWeight<E>(                                 \
      const Context &, E *, const E *, const E *, const int32_t *, int64_t,    \
      int64_t, int64_t, int64_t);
FSDP_CUDA_ELEMENT_TYPES(FSDP_INSTANTIATE)
#undef FSDP_INSTANTIATE

} // namespace fsdp::rt::cuda
