//===- Errors.cu - the first recorded CUDA or cuBLAS error ----------------===//
//
// Kernels launch asynchronously and return nothing; a failed launch or
// cuBLAS call is recorded here (the first one wins, later ones are dropped
// until the backend takes it) and the backend reports it. The record is
// process-wide and guarded by a mutex; the flag keeps the no-error path of
// takeError() free of locking.
//
//===----------------------------------------------------------------------===//

#include "Common.cuh"

#include <atomic>
#include <mutex>
#include <string>

namespace fsdp::rt::cuda {
namespace {

std::mutex gErrorMutex;
std::atomic<bool> gHasError{false};
std::string gError;

} // namespace

void detail::recordError(const char *where, const char *what) {
  std::lock_guard<std::mutex> lock(gErrorMutex);
  if (gHasError.load(std::memory_order_relaxed))
    return;
  gError = std::string(where) + ": " + (what ? what : "unknown error");
  gHasError.store(true, std::memory_order_release);
}

bool takeError(std::string &message) {
  if (!gHasError.load(std::memory_order_acquire))
    return false;
  std::lock_guard<std::mutex> lock(gErrorMutex);
  if (!gHasError.load(std::memory_order_relaxed))
    return false;
  message = gError;
  gError.clear();
  gHasError.store(false, std::memory_order_release);
  return true;
}

const char *cublasStatusName(cublasStatus_t status) {
  switch (status) {
  case CUBLAS_STATUS_SUCCESS:
    return "CUBLAS_STATUS_SUCCESS";
  case CUBLAS_STATUS_NOT_INITIALIZED:
    return "CUBLAS_STATUS_NOT_INITIALIZED";
  case CUBLAS_STATUS_ALLOC_FAILED:
    return "CUBLAS_STATUS_ALLOC_FAILED";
  case CUBLAS_STATUS_INVALID_VALUE:
    return "CUBLAS_STATUS_INVALID_VALUE";
  case CUBLAS_STATUS_ARCH_MISMATCH:
    return "CUBLAS_STATUS_ARCH_MISMATCH";
  case CUBLAS_STATUS_MAPPING_ERROR:
    return "CUBLAS_STATUS_MAPPING_ERROR";
  case CUBLAS_STATUS_EXECUTION_FAILED:
    return "CUBLAS_STATUS_EXECUTION_FAILED";
  case CUBLAS_STATUS_INTERNAL_ERROR:
    return "CUBLAS_STATUS_INTERNAL_ERROR";
  case CUBLAS_STATUS_NOT_SUPPORTED:
    return "CUBLAS_STATUS_NOT_SUPPORTED";
  case CUBLAS_STATUS_LICENSE_ERROR:
    return "CUBLAS_STATUS_LICENSE_ERROR";
  }
  return "CUBLAS_STATUS_<unknown>";
}

} // namespace fsdp::rt::cuda
