//===- MoeGroupedLinear.cu - the grouped linear over experts' rows ---------===//
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
std::vector<std::pair<int64_t, int64_t>>
expertRows(const Context &ctx, const int32_t *offsets, int64_t E, int64_t P,
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

template <typename Elem>
void moeGroupedLinear(const Context &ctx, Elem *out, const Elem *in,
                      const Elem *w, const int32_t *offsets, int64_t E,
                      int64_t P, int64_t I, int64_t O) {
  auto rows = expertRows(ctx, offsets, E, P, "moeGroupedLinear");
  for (size_t e = 0; e < rows.size(); ++e)
    if (rows[e].second > 0)
      detail::rowGemm(ctx, "moeGroupedLinear", /*transA=*/false,
                      /*transB=*/true, rows[e].second, O, I, 1.0f,
                      in + rows[e].first * I, I, w + int64_t(e) * O * I, I,
                      0.0f, out + rows[e].first * O, O);
}

template <typename Elem>
void moeGroupedLinearGradInput(const Context &ctx, Elem *din,
                               const Elem *dout, const Elem *w,
                               const int32_t *offsets, int64_t E, int64_t P,
                               int64_t I, int64_t O) {
  auto rows = expertRows(ctx, offsets, E, P, "moeGroupedLinearGradInput");
  for (size_t e = 0; e < rows.size(); ++e)
    if (rows[e].second > 0)
      detail::rowGemm(ctx, "moeGroupedLinearGradInput", /*transA=*/false,
                      /*transB=*/false, rows[e].second, I, O, 1.0f,
                      dout + rows[e].first * O, O, w + int64_t(e) * O * I, I,
                      0.0f, din + rows[e].first * I, I);
}

template <typename Elem>
void moeGroupedLinearGradWeight(const Context &ctx, Elem *dw,
                                const Elem *dout, const Elem *in,
                                const int32_t *offsets, int64_t E, int64_t P,
                                int64_t I, int64_t O) {
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
