//===- Blas.cpp - a CBLAS library loaded at run time ----------------------===//

#include "Blas.h"
#include "OneDnnGemm.h"

#include <cstdio>
#include <cstdlib>
#include <dlfcn.h>
#include <string>
#include <strings.h>
#include <vector>

namespace fsdp::rt::cpu {
namespace {
// CBLAS enum values (cblas.h), fixed by the CBLAS standard.
constexpr int kRowMajor = 101, kNoTrans = 111, kTrans = 112;

template <typename Fn> Fn lookup(void *handle, const char *name) {
  return reinterpret_cast<Fn>(dlsym(handle, name));
}

bool cpuHasAvx512() {
#if defined(__x86_64__)
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx512f");
#else
  return false;
#endif
}

/// A note for the start-up line when the environment holds OpenBLAS to a
/// kernel without AVX-512 on a CPU that has it (OPENBLAS_CORETYPE, which
/// the project never overrides): there `--blas onednn`'s f32 GEMMs ran
/// 1.7x as fast (docs/cpu-step.md, the Zen 5 with Haswell's kernel).
std::string belowTheCpu(const std::string &core) {
  const char *forced = std::getenv("OPENBLAS_CORETYPE");
  if (!forced || !cpuHasAvx512())
    return "";
  for (const char *avx512 : {"skylakex", "cooperlake", "sapphirerapids"})
    if (strcasecmp(core.c_str(), avx512) == 0)
      return "";
  return "; note: OPENBLAS_CORETYPE=" + std::string(forced) +
         " holds OpenBLAS below this CPU's AVX-512 (--blas onednn is not)";
}
} // namespace

/// FSDP_ONEDNN_MIN_FLOPS, or kOneDnnMinFlops without it; false with
/// `error` when it is not a number of FLOPs.
static bool oneDnnBound(double &bound, std::string &error) {
  bound = Blas::kOneDnnMinFlops;
  const char *text = std::getenv("FSDP_ONEDNN_MIN_FLOPS");
  if (!text)
    return true;
  char *end = nullptr;
  double value = std::strtod(text, &end);
  if (end == text || *end || !(value >= 0.0)) {
    error = std::string("FSDP_ONEDNN_MIN_FLOPS='") + text +
            "' is not a number of FLOPs >= 0";
    return false;
  }
  bound = value;
  return true;
}

/// --blas onednn: oneDNN for the GEMMs of at least dnnlMinFlops_, OpenBLAS
/// (opened as --blas openblas is) for the rest.
std::unique_ptr<Blas> Blas::openOneDnn(int threads, std::string &error) {
  std::unique_ptr<OneDnnGemm> dnnl = OneDnnGemm::open(error);
  double bound = 0.0;
  std::unique_ptr<Blas> blas =
      dnnl ? open("openblas", threads, error) : nullptr;
  if (!blas || !oneDnnBound(bound, error))
    return nullptr;
  char below[64];
  std::snprintf(below, sizeof(below), "%g FLOPs", bound);
  blas->library_ = "onednn";
  blas->description_ =
      dnnl->description() + ", below " + below + " " + blas->description_;
  blas->dnnlF32_ = true;
  blas->dnnlMinFlops_ = bound;
  blas->dnnl_ = std::move(dnnl); // its threads: the OpenMP runtime's
  return blas;
}

/// --blas auto: OpenBLAS now; oneDNN for the bf16 GEMMs once a plan has
/// one of at least the bound (openAutoBF16), so that an f32 run never
/// loads it.
std::unique_ptr<Blas> Blas::openAuto(int threads, std::string &error) {
  double bound = 0.0;
  std::unique_ptr<Blas> blas = open("openblas", threads, error);
  if (!blas || !oneDnnBound(bound, error))
    return nullptr;
  blas->library_ = "auto";
  blas->autoBF16Pending_ = true;
  blas->dnnlMinFlops_ = bound;
  return blas;
}

/// Opens oneDNN for --blas auto's bf16 GEMMs, where the CPU has bf16 units
/// (AVX512-BF16 or AMX); otherwise they stay widened to OpenBLAS's f32
/// GEMM, and the description says why.
void Blas::openAutoBF16() {
  autoBF16Pending_ = false;
  std::string error;
  std::unique_ptr<OneDnnGemm> dnnl = OneDnnGemm::open(error);
  if (!dnnl || !dnnl->hasBF16Units()) {
    description_ += "; bf16 GEMMs widened to f32 (" +
                    (dnnl ? "no bf16 units: " + dnnl->description() : error) +
                    ")";
    return;
  }
  char from[64];
  std::snprintf(from, sizeof(from), "%g FLOPs", dnnlMinFlops_);
  description_ +=
      "; bf16 GEMMs from " + std::string(from) + " on " + dnnl->description();
  dnnl_ = std::move(dnnl);
}

std::unique_ptr<Blas> Blas::open(const std::string &library, int threads,
                                 std::string &error) {
  // Candidates in order of preference. Debian's OpenMP build of OpenBLAS
  // shares the OpenMP thread pool with our kernels; the pthreads build
  // (the default libopenblas.so.0) keeps its own threads, which spin
  // against the OpenMP ones on a machine with as many cores as threads.
  std::vector<const char *> candidates;
  if (library == "onednn")
    return openOneDnn(threads, error);
  if (library == "auto")
    return openAuto(threads, error);
  if (library == "openblas") {
    candidates = {"/usr/lib/x86_64-linux-gnu/openblas-openmp/libopenblas.so.0",
                  "libopenblas.so.0"};
    // Both must be set before the library's constructor reads them. A short
    // thread timeout stops the pthreads fallback's idle workers from
    // spinning against the OpenMP threads of our kernels.
    setenv("OPENBLAS_THREAD_TIMEOUT", "4", /*overwrite=*/0);
    if (cpuHasAvx512())
      setenv("OPENBLAS_CORETYPE", "SkylakeX", /*overwrite=*/0);
  } else if (library == "blis") {
    candidates = {"libblis.so.4"};
  } else {
    error = "unknown BLAS library '" + library +
            "', expected auto, openblas, blis or onednn";
    return nullptr;
  }
  void *handle = nullptr;
  std::string soname;
  for (const char *candidate : candidates)
    if ((handle = dlopen(candidate, RTLD_NOW | RTLD_LOCAL))) {
      soname = candidate;
      break;
    }
  if (!handle) {
    error = std::string("cannot load ") + candidates.back() + ": " + dlerror();
    return nullptr;
  }
  std::unique_ptr<Blas> blas(new Blas());
  blas->handle_ = handle;
  blas->library_ = library;
  blas->sgemm_ = lookup<SgemmFn>(handle, "cblas_sgemm");
  if (!blas->sgemm_) {
    error = soname + " has no cblas_sgemm";
    return nullptr;
  }
  if (library == "openblas") {
    if (auto setThreads =
            lookup<void (*)(int)>(handle, "openblas_set_num_threads"))
      setThreads(threads);
    auto corename = lookup<const char *(*)()>(handle, "openblas_get_corename");
    auto config = lookup<const char *(*)()>(handle, "openblas_get_config");
    const std::string core = corename ? corename() : "?";
    blas->description_ = std::string("openblas (") + (config ? config() : "?") +
                         "; core " + core + "; " + soname + ")" +
                         belowTheCpu(core);
  } else {
    if (auto setThreads =
            lookup<void (*)(long)>(handle, "bli_thread_set_num_threads"))
      setThreads(threads);
    auto version =
        lookup<const char *(*)()>(handle, "bli_info_get_version_str");
    auto archId = lookup<int (*)()>(handle, "bli_arch_query_id");
    auto archName = lookup<const char *(*)(int)>(handle, "bli_arch_string");
    blas->description_ = std::string("blis ") + (version ? version() : "?") +
                         " (arch " +
                         (archId && archName ? archName(archId()) : "?") + ")";
  }
  return blas;
}

Blas::~Blas() {
  // Libraries with worker threads must stay loaded until exit.
}

void Blas::sgemm(bool transA, bool transB, int64_t M, int64_t N, int64_t K,
                 float alpha, const float *A, int64_t lda, const float *B,
                 int64_t ldb, float beta, float *C, int64_t ldc) const {
  if (dnnlF32_ && 2.0 * double(M) * double(N) * double(K) >= dnnlMinFlops_)
    return dnnl_->sgemm(transA, transB, M, N, K, alpha, A, lda, B, ldb, beta, C,
                        ldc);
  sgemm_(kRowMajor, transA ? kTrans : kNoTrans, transB ? kTrans : kNoTrans,
         int(M), int(N), int(K), alpha, A, int(lda), B, int(ldb), beta, C,
         int(ldc));
}

} // namespace fsdp::rt::cpu

namespace fsdp::rt::cpu {

bool Blas::takesBF16(int64_t M, int64_t N, int64_t K) const {
  return dnnl_ && dnnl_->hasBF16() && M > 0 && N > 0 && K > 0 &&
         2.0 * double(M) * double(N) * double(K) >= dnnlMinFlops_;
}

bool Blas::gemmBF16(bool transA, bool transB, int64_t M, int64_t N, int64_t K,
                    const uint16_t *A, int64_t lda, const uint16_t *B,
                    int64_t ldb, float beta, uint16_t *C, int64_t ldc) const {
  if (!takesBF16(M, N, K))
    return false;
  dnnl_->gemmBF16(transA, transB, M, N, K, A, lda, B, ldb, beta, C, ldc);
  return true;
}

void Blas::prepareBF16(const GemmShape &g) {
  if (autoBF16Pending_ &&
      2.0 * double(g.M) * double(g.N) * double(g.K) >= dnnlMinFlops_)
    openAutoBF16();
  if (takesBF16(g.M, g.N, g.K))
    dnnl_->prepareBF16(g.transA, g.transB, g.M, g.N, g.K, g.lda, g.ldb, g.ldc,
                       g.beta);
}

uint64_t Blas::mappedBytes() const { return dnnl_ ? kOneDnnMappedBytes : 0; }

uint64_t Blas::heapBytes() const {
  return dnnl_ ? dnnl_->scratchpadBytes() : 0;
}

} // namespace fsdp::rt::cpu
