//===- Module.h - the CUDA backend module's entry point ---------*- C++ -*-===//
//
// The CUDA backend is a loadable module (libfsdp-backend-cuda.so) that the
// tools dlopen() only when a run asks for CUDA (--backend cuda,
// --list-devices), so that a CPU run neither pays for cuBLAS's static
// initialisation and the CUDA libraries' mappings nor needs them installed.
// The module exports one C symbol, fsdpCudaModule, which returns this table;
// the loader (src/cuda/CudaModule.cpp) checks its version and sizes before it
// calls anything, so that a module left over from another build is refused
// with a message instead of crashing on a different layout.
//
// The module leaves the runtime core's symbols (Plan, Communicator, ...)
// undefined: they bind to the executable's copies, which fsdp-run exports
// (runtime/CMakeLists.txt says how and why).
//
//===----------------------------------------------------------------------===//

#ifndef FSDP_RUNTIME_CUDA_MODULE_H
#define FSDP_RUNTIME_CUDA_MODULE_H

#include "fsdp/runtime/exec/Backend.h"

#include <cstdint>
#include <string>

namespace fsdp::rt::cuda {
/// Bumped whenever this table, CudaBackendOptions or the Backend interface
/// changes in a way that sizeof cannot see.
/// 2: synchronize(finished); 3: kernel timing, DeviceMemory::stages.
constexpr uint32_t kModuleVersion = 3;

struct ModuleTable {
  uint32_t version;     ///< kModuleVersion of the module's build
  uint32_t tableSize;   ///< sizeof(ModuleTable) there
  uint32_t optionsSize; ///< sizeof(CudaBackendOptions) there
  uint32_t backendSize; ///< sizeof(Backend) there (its vtable pointer)
  /// createCudaBackend and listCudaDevices (Backend.h), implemented.
  Backend *(*createBackend)(const CudaBackendOptions &options,
                            std::string &error);
  std::string (*listDevices)();
};
} // namespace fsdp::rt::cuda

/// The symbol the loader looks up (unmangled, so dlsym can name it).
#define FSDP_CUDA_MODULE_ENTRY "fsdpCudaModule"
extern "C" const fsdp::rt::cuda::ModuleTable *fsdpCudaModule();

#endif // FSDP_RUNTIME_CUDA_MODULE_H
