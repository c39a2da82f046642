//===- OneDnnGemm.cpp - f32 GEMMs through oneDNN's matmul -----------------===//

#include "OneDnnGemm.h"

#include <cstdio>
#include <cstdlib>
#include <dlfcn.h>
#include <map>
#include <mutex>
#include <tuple>

#if FSDP_HAVE_ONEDNN
#include <oneapi/dnnl/dnnl.h>
#endif

namespace fsdp::rt::cpu {

#if FSDP_HAVE_ONEDNN
namespace {

/// One GEMM shape: what a primitive is made for.
struct Shape {
  bool transA, transB;
  int64_t M, N, K, lda, ldb, ldc;
  float alpha, beta;
  bool bf16; ///< every operand bf16 (the products accumulate in f32)
  bool operator<(const Shape &o) const {
    return std::tie(transA, transB, M, N, K, lda, ldb, ldc, alpha, beta, bf16) <
           std::tie(o.transA, o.transB, o.M, o.N, o.K, o.lda, o.ldb, o.ldc,
                    o.alpha, o.beta, o.bf16);
  }
};

/// A made primitive with its operands' descriptors and its scratchpad's
/// (bytes 0: it needs none).
struct Made {
  dnnl_primitive_t primitive = nullptr;
  dnnl_memory_desc_t a, b, c, scratchpad;
  size_t scratchpadBytes = 0;
};

/// The C API of oneDNN 2.x that --blas onednn calls, each name once.
#define FSDP_DNNL_FUNCTIONS(X)                                                 \
  X(dnnl_version)                                                              \
  X(dnnl_get_effective_cpu_isa)                                                \
  X(dnnl_engine_create)                                                        \
  X(dnnl_stream_create)                                                        \
  X(dnnl_memory_desc_init_by_strides)                                          \
  X(dnnl_matmul_desc_init)                                                     \
  X(dnnl_primitive_attr_create)                                                \
  X(dnnl_primitive_attr_destroy)                                               \
  X(dnnl_primitive_attr_set_output_scales)                                     \
  X(dnnl_primitive_attr_set_post_ops)                                          \
  X(dnnl_primitive_attr_set_scratchpad_mode)                                   \
  X(dnnl_post_ops_create)                                                      \
  X(dnnl_post_ops_destroy)                                                     \
  X(dnnl_post_ops_append_sum)                                                  \
  X(dnnl_primitive_desc_create)                                                \
  X(dnnl_primitive_desc_destroy)                                               \
  X(dnnl_primitive_desc_query)                                                 \
  X(dnnl_primitive_desc_query_md)                                              \
  X(dnnl_memory_desc_get_size)                                                 \
  X(dnnl_primitive_create)                                                     \
  X(dnnl_primitive_execute)                                                    \
  X(dnnl_primitive_destroy)                                                    \
  X(dnnl_memory_create)                                                        \
  X(dnnl_memory_destroy)                                                       \
  X(dnnl_stream_wait)                                                          \
  X(dnnl_stream_destroy)                                                       \
  X(dnnl_engine_destroy)

/// Those functions, resolved with dlsym (the header gives the types only:
/// nothing links against the library).
struct Api {
#define FSDP_DNNL_MEMBER(name) decltype(&::name) name = nullptr;
  FSDP_DNNL_FUNCTIONS(FSDP_DNNL_MEMBER)
#undef FSDP_DNNL_MEMBER

  /// Every entry point, or the name of the first missing one.
  const char *resolve(void *handle) {
#define FSDP_DNNL_RESOLVE(name)                                                \
  if (!(name = reinterpret_cast<decltype(name)>(dlsym(handle, #name))))        \
    return #name;
    FSDP_DNNL_FUNCTIONS(FSDP_DNNL_RESOLVE)
#undef FSDP_DNNL_RESOLVE
    return nullptr;
  }
};

const char *isaName(dnnl_cpu_isa_t isa) {
  switch (isa) {
  case dnnl_cpu_isa_avx2:
    return "avx2";
  case dnnl_cpu_isa_avx512_core:
    return "avx512_core";
  case dnnl_cpu_isa_avx512_core_vnni:
    return "avx512_core_vnni";
  case dnnl_cpu_isa_avx512_core_bf16:
    return "avx512_core_bf16";
  case dnnl_cpu_isa_avx512_core_amx:
    return "avx512_core_amx";
  default:
    return "other";
  }
}

[[noreturn]] void fatal(const Shape &s, const char *what, dnnl_status_t code) {
  std::fprintf(stderr,
               "fsdp-run: error: oneDNN %s failed (status %d) for a GEMM of "
               "%lld x %lld x %lld\n",
               what, int(code), (long long)s.M, (long long)s.N, (long long)s.K);
  std::abort();
}

} // namespace

struct OneDnnGemm::Impl {
  Api api;
  dnnl_engine_t engine = nullptr;
  dnnl_stream_t stream = nullptr;
  std::string description;
  std::mutex mutex; ///< the cache, and one stream
  std::map<Shape, Made> made;
  /// One scratchpad that every primitive shares (they run one at a time,
  /// under the mutex): the user-managed mode, so that it is allocated
  /// where fsdp-run can count it (prepareBF16, before the first step), not
  /// inside the library at its first use.
  void *scratchpad = nullptr;
  size_t scratchpadBytes = 0;

  void reserveScratchpad(size_t bytes) {
    if (bytes <= scratchpadBytes)
      return;
    std::free(scratchpad);
    size_t rounded = (bytes + 63) / 64 * 64;
    scratchpad = std::aligned_alloc(64, rounded);
    if (!scratchpad) {
      std::fprintf(stderr,
                   "fsdp-run: error: cannot allocate oneDNN's %zu-byte "
                   "scratchpad\n",
                   rounded);
      std::abort();
    }
    scratchpadBytes = rounded;
  }

  ~Impl() {
    std::free(scratchpad);
    for (auto &[shape, m] : made)
      api.dnnl_primitive_destroy(m.primitive);
    if (stream)
      api.dnnl_stream_destroy(stream);
    if (engine)
      api.dnnl_engine_destroy(engine);
  }

  /// A strided matrix of rows x cols (f32, or bf16 for a bf16 shape), row
  /// stride ld, transposed in memory when `trans` (then ld is the stride
  /// of its columns).
  dnnl_memory_desc_t matrix(const Shape &s, int64_t rows, int64_t cols,
                            int64_t ld, bool trans) {
    dnnl_memory_desc_t md;
    dnnl_dims_t dims = {rows, cols};
    dnnl_dims_t strides = {trans ? 1 : ld, trans ? ld : 1};
    if (dnnl_status_t code = api.dnnl_memory_desc_init_by_strides(
            &md, 2, dims, s.bf16 ? dnnl_bf16 : dnnl_f32, strides))
      fatal(s, "dnnl_memory_desc_init_by_strides", code);
    return md;
  }

  /// The implementation oneDNN picks for a bf16 matmul on this CPU, or
  /// empty when it has none but its reference kernel (a CPU without
  /// AVX-512: far slower than widening to the f32 GEMM).
  std::string bf16Impl;
  void probeBF16() {
    const Shape s{false, true, 64, 64, 64, 64, 64, 64, 1.0f, 0.0f, true};
    dnnl_memory_desc_t a = matrix(s, 64, 64, 64, false),
                       b = matrix(s, 64, 64, 64, true),
                       c = matrix(s, 64, 64, 64, false);
    dnnl_matmul_desc_t desc;
    dnnl_primitive_desc_t pd = nullptr;
    const char *name = nullptr;
    if (!api.dnnl_matmul_desc_init(&desc, &a, &b, nullptr, &c) &&
        !api.dnnl_primitive_desc_create(&pd, &desc, nullptr, engine, nullptr) &&
        !api.dnnl_primitive_desc_query(pd, dnnl_query_impl_info_str, 0,
                                       &name) &&
        name && std::string(name).rfind("ref", 0) != 0)
      bf16Impl = name;
    if (pd)
      api.dnnl_primitive_desc_destroy(pd);
  }

  /// Runs shape `s` on these operands (A M x K, B K x N, C M x N).
  void run(const Shape &s, const void *A, const void *B, void *C);

  const Made &primitiveFor(const Shape &s) {
    auto it = made.find(s);
    if (it != made.end())
      return it->second;
    Made m;
    m.a = matrix(s, s.M, s.K, s.lda, s.transA);
    m.b = matrix(s, s.K, s.N, s.ldb, s.transB);
    m.c = matrix(s, s.M, s.N, s.ldc, /*trans=*/false);
    dnnl_matmul_desc_t desc;
    if (dnnl_status_t code =
            api.dnnl_matmul_desc_init(&desc, &m.a, &m.b, nullptr, &m.c))
      fatal(s, "dnnl_matmul_desc_init", code);
    dnnl_primitive_attr_t attr = nullptr;
    dnnl_post_ops_t ops = nullptr;
    dnnl_status_t code = api.dnnl_primitive_attr_create(&attr);
    if (!code)
      code = api.dnnl_primitive_attr_set_scratchpad_mode(
          attr, dnnl_scratchpad_mode_user);
    if (!code && s.alpha != 1.0f)
      code = api.dnnl_primitive_attr_set_output_scales(attr, 1, 0, &s.alpha);
    if (!code && s.beta != 0.0f) {
      code = api.dnnl_post_ops_create(&ops);
      if (!code)
        code = api.dnnl_post_ops_append_sum(ops, s.beta);
      if (!code)
        code = api.dnnl_primitive_attr_set_post_ops(attr, ops);
    }
    if (code)
      fatal(s, "primitive attributes", code);
    dnnl_primitive_desc_t pd = nullptr;
    code = api.dnnl_primitive_desc_create(&pd, &desc, attr, engine, nullptr);
    if (!code)
      code = api.dnnl_primitive_create(&m.primitive, pd);
    if (!code) {
      const dnnl_memory_desc_t *scratch =
          api.dnnl_primitive_desc_query_md(pd, dnnl_query_scratchpad_md, 0);
      if (scratch &&
          (m.scratchpadBytes = api.dnnl_memory_desc_get_size(scratch)))
        m.scratchpad = *scratch;
    }
    if (pd)
      api.dnnl_primitive_desc_destroy(pd);
    if (ops)
      api.dnnl_post_ops_destroy(ops);
    api.dnnl_primitive_attr_destroy(attr);
    if (code)
      fatal(s, "matmul primitive", code);
    reserveScratchpad(m.scratchpadBytes);
    return made.emplace(s, m).first->second;
  }
};

std::unique_ptr<OneDnnGemm> OneDnnGemm::open(std::string &error) {
  const char *soname = "libdnnl.so.2";
  void *handle = dlopen(soname, RTLD_NOW | RTLD_LOCAL);
  if (!handle) {
    error = std::string("cannot load ") + soname + ": " + dlerror() +
            " (Debian's libdnnl2; scripts/setup.sh installs it)";
    return nullptr;
  }
  auto impl = std::make_unique<Impl>();
  if (const char *missing = impl->api.resolve(handle)) {
    error = std::string(soname) + " has no " + missing +
            " (oneDNN 2.x's C API is what --blas onednn binds)";
    return nullptr;
  }
  const dnnl_version_t *v = impl->api.dnnl_version();
  if (v->major != 2) {
    error = std::string(soname) + " is oneDNN " + std::to_string(v->major) +
            "." + std::to_string(v->minor) + ", not 2.x";
    return nullptr;
  }
  if (impl->api.dnnl_engine_create(&impl->engine, dnnl_cpu, 0) ||
      impl->api.dnnl_stream_create(&impl->stream, impl->engine,
                                   dnnl_stream_default_flags)) {
    error = "oneDNN could not make its CPU engine and stream";
    return nullptr;
  }
  impl->probeBF16();
  impl->description =
      "onednn " + std::to_string(v->major) + "." + std::to_string(v->minor) +
      "." + std::to_string(v->patch) + " (isa " +
      isaName(impl->api.dnnl_get_effective_cpu_isa()) + "; bf16 GEMMs " +
      (impl->bf16Impl.empty() ? std::string("widened to f32")
                              : "on " + impl->bf16Impl) +
      "; " + soname + ")";
  return std::unique_ptr<OneDnnGemm>(new OneDnnGemm(std::move(impl)));
}

void OneDnnGemm::sgemm(bool transA, bool transB, int64_t M, int64_t N,
                       int64_t K, float alpha, const float *A, int64_t lda,
                       const float *B, int64_t ldb, float beta, float *C,
                       int64_t ldc) const {
  if (M == 0 || N == 0)
    return;
  if (K == 0) { // C = beta C: no product (oneDNN has no empty dimension)
    for (int64_t i = 0; i < M; ++i)
      for (int64_t j = 0; j < N; ++j)
        C[i * ldc + j] = beta == 0.0f ? 0.0f : beta * C[i * ldc + j];
    return;
  }
  impl->run({transA, transB, M, N, K, lda, ldb, ldc, alpha, beta, false}, A, B,
            C);
}

void OneDnnGemm::gemmBF16(bool transA, bool transB, int64_t M, int64_t N,
                          int64_t K, const uint16_t *A, int64_t lda,
                          const uint16_t *B, int64_t ldb, float beta,
                          uint16_t *C, int64_t ldc) const {
  if (M == 0 || N == 0 || K == 0)
    return; // Blas::gemmBF16 never sends these
  impl->run({transA, transB, M, N, K, lda, ldb, ldc, 1.0f, beta, true}, A, B,
            C);
}

void OneDnnGemm::Impl::run(const Shape &s, const void *A, const void *B,
                           void *C) {
  std::lock_guard<std::mutex> lock(mutex);
  const Made &m = primitiveFor(s);
  dnnl_memory_t a = nullptr, b = nullptr, c = nullptr, pad = nullptr;
  dnnl_status_t code =
      api.dnnl_memory_create(&a, &m.a, engine, const_cast<void *>(A));
  if (!code)
    code = api.dnnl_memory_create(&b, &m.b, engine, const_cast<void *>(B));
  if (!code)
    code = api.dnnl_memory_create(&c, &m.c, engine, C);
  if (!code && m.scratchpadBytes)
    code = api.dnnl_memory_create(&pad, &m.scratchpad, engine, scratchpad);
  if (code)
    fatal(s, "dnnl_memory_create", code);
  const dnnl_exec_arg_t args[] = {{DNNL_ARG_SRC, a},
                                  {DNNL_ARG_WEIGHTS, b},
                                  {DNNL_ARG_DST, c},
                                  {DNNL_ARG_SCRATCHPAD, pad}};
  code = api.dnnl_primitive_execute(m.primitive, stream, pad ? 4 : 3, args);
  if (!code)
    code = api.dnnl_stream_wait(stream);
  for (dnnl_memory_t mem : {a, b, c, pad})
    if (mem)
      api.dnnl_memory_destroy(mem);
  if (code)
    fatal(s, "matmul", code);
}

#else // !FSDP_HAVE_ONEDNN

struct OneDnnGemm::Impl {
  std::string description;
};

std::unique_ptr<OneDnnGemm> OneDnnGemm::open(std::string &error) {
  error = "this fsdp-run was built without oneDNN's headers (libdnnl-dev): "
          "--blas onednn is not available";
  return nullptr;
}

void OneDnnGemm::sgemm(bool, bool, int64_t, int64_t, int64_t, float,
                       const float *, int64_t, const float *, int64_t, float,
                       float *, int64_t) const {}

void OneDnnGemm::gemmBF16(bool, bool, int64_t, int64_t, int64_t,
                          const uint16_t *, int64_t, const uint16_t *, int64_t,
                          float, uint16_t *, int64_t) const {}

#endif // FSDP_HAVE_ONEDNN

OneDnnGemm::OneDnnGemm(std::unique_ptr<Impl> impl) : impl(std::move(impl)) {}

// The library itself stays loaded until exit, like the CBLAS libraries
// (its OpenMP threads are the process's).
OneDnnGemm::~OneDnnGemm() = default;

bool OneDnnGemm::hasBF16() const {
#if FSDP_HAVE_ONEDNN
  return !impl->bf16Impl.empty();
#else
  return false;
#endif
}

void OneDnnGemm::prepareBF16(bool transA, bool transB, int64_t M, int64_t N,
                             int64_t K, int64_t lda, int64_t ldb, int64_t ldc,
                             float beta) {
#if FSDP_HAVE_ONEDNN
  if (M == 0 || N == 0 || K == 0)
    return;
  std::lock_guard<std::mutex> lock(impl->mutex);
  impl->primitiveFor(
      {transA, transB, M, N, K, lda, ldb, ldc, 1.0f, beta, true});
#endif
}

uint64_t OneDnnGemm::scratchpadBytes() const {
#if FSDP_HAVE_ONEDNN
  std::lock_guard<std::mutex> lock(impl->mutex);
  return impl->scratchpadBytes;
#else
  return 0;
#endif
}

bool OneDnnGemm::hasBF16Units() const {
#if FSDP_HAVE_ONEDNN
  // The ISA values are bit sets, each holding the ones below it: AMX's
  // holds AVX512-BF16's.
  auto isa = unsigned(impl->api.dnnl_get_effective_cpu_isa());
  return hasBF16() && (isa & dnnl_cpu_isa_avx512_core_bf16) ==
                          unsigned(dnnl_cpu_isa_avx512_core_bf16);
#else
  return false;
#endif
}

const std::string &OneDnnGemm::description() const { return impl->description; }

} // namespace fsdp::rt::cpu
