//===- NoCuda.cpp - the CUDA backend of a build without CUDA --------------===//

#include "fsdp/runtime/exec/Backend.h"

namespace fsdp::rt {
std::unique_ptr<Backend> createCudaBackend(const CudaBackendOptions &,
                                           std::string &error) {
  error = "this fsdp-run was built without CUDA (no CUDA toolkit was found "
          "at build time, or FSDP_ENABLE_CUDA=OFF)";
  return nullptr;
}
std::string listCudaDevices() {
  return "no CUDA device: this fsdp-run was built without CUDA";
}
} // namespace fsdp::rt
