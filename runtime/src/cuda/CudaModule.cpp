//===- CudaModule.cpp - the CUDA backend, loaded when asked for -----------===//
//
// createCudaBackend and listCudaDevices of a build with CUDA: they dlopen()
// the CUDA backend module (cuda/Module.h) the first time a run asks for it
// and call its table. Loading it on demand keeps cuBLAS's static
// initialisation (5.6 MB of heap before main), the CUDA libraries' mappings
// and their presence on the machine out of every CPU run.
//
// The module is FSDP_CUDA_MODULE_FILE in FSDP_CUDA_MODULE_DIR relative to
// the executable's own directory (bin/ -> lib/, as CMake lays out both the
// full and the standalone build), or the file FSDP_CUDA_MODULE names. With
// FSDP_CUDA_EMULATOR=1 it is FSDP_CUDA_EMULATOR_FILE instead: the same
// backend built against the CPU emulator of the device
// (runtime/test/cuda-emulation/), never loaded unless asked for, and it
// says so in every description it gives.
//
//===----------------------------------------------------------------------===//

#include "fsdp/runtime/comm/Communicator.h"
#include "fsdp/runtime/exec/Backend.h"

#include "cuda/Module.h"

#include <dlfcn.h>
#include <limits.h>
#include <unistd.h>

#include <cstdlib>
#include <string>

namespace fsdp::rt {
namespace {
/// Whether the run asks for the emulated device (FSDP_CUDA_EMULATOR set,
/// not "0").
bool emulatorAsked() {
  const char *value = std::getenv("FSDP_CUDA_EMULATOR");
  return value && *value && std::string(value) != "0";
}

/// Where the module is: $FSDP_CUDA_MODULE, else next to the executable;
/// empty with `error` where this build has none.
std::string modulePath(std::string &error) {
  if (const char *path = std::getenv("FSDP_CUDA_MODULE"); path && *path)
    return path;
  const bool emulated = emulatorAsked();
  const std::string file =
      emulated ? FSDP_CUDA_EMULATOR_FILE : FSDP_CUDA_MODULE_FILE;
  if (file.empty()) {
    error = emulated ? "this fsdp-run was built without the CUDA emulator "
                       "(FSDP_BUILD_CUDA_EMULATOR=OFF, or no Python at build "
                       "time)"
                     : "this fsdp-run was built without CUDA (no CUDA toolkit "
                       "was found at build time, or FSDP_ENABLE_CUDA=OFF); "
                       "FSDP_CUDA_EMULATOR=1 runs the CUDA backend on the "
                       "CPU's emulation of a device";
    return {};
  }
  std::string dir = ".";
  char self[PATH_MAX];
  ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
  if (n > 0) {
    std::string exe(self, size_t(n));
    size_t slash = exe.rfind('/');
    dir = slash == std::string::npos ? "." : exe.substr(0, slash);
  }
  return dir + "/" FSDP_CUDA_MODULE_DIR "/" + file;
}

/// The module's table, loaded once (and never unloaded: backends it made
/// and the CUDA libraries' state outlive any caller); null with `error`.
const cuda::ModuleTable *loadModule(std::string &error) {
  static std::string loadError;
  static const cuda::ModuleTable *table = [] {
    std::string path = modulePath(loadError);
    if (path.empty())
      return static_cast<const cuda::ModuleTable *>(nullptr);
    // RTLD_NOW: a core symbol the executable does not export fails here,
    // with its name, not at the first call that needs it.
    void *handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!handle) {
      // dlerror() names the file itself, mostly: once is enough.
      const char *dl = dlerror();
      std::string why = dl ? dl : "unknown error";
      if (why.compare(0, path.size() + 2, path + ": ") == 0)
        why.erase(0, path.size() + 2);
      loadError = "cannot load the CUDA backend module " + path + ": " + why;
      return static_cast<const cuda::ModuleTable *>(nullptr);
    }
    using Entry = const cuda::ModuleTable *(*)();
    auto entry = reinterpret_cast<Entry>(dlsym(handle, FSDP_CUDA_MODULE_ENTRY));
    const cuda::ModuleTable *t = entry ? entry() : nullptr;
    if (!t) {
      loadError = path + " is not a CUDA backend module (no " +
                  FSDP_CUDA_MODULE_ENTRY + ")";
      return t;
    }
    if (t->version != cuda::kModuleVersion ||
        t->tableSize != sizeof(cuda::ModuleTable) ||
        t->optionsSize != sizeof(CudaBackendOptions) ||
        t->backendSize != sizeof(Backend)) {
      loadError = path + " is from another build of the runtime (module " +
                  "version " + std::to_string(t->version) + ", expected " +
                  std::to_string(cuda::kModuleVersion) +
                  "): rebuild it with this fsdp-run";
      return static_cast<const cuda::ModuleTable *>(nullptr);
    }
    return t;
  }();
  if (!table)
    error = loadError;
  return table;
}
} // namespace

std::unique_ptr<Backend> createCudaBackend(const CudaBackendOptions &options,
                                           std::string &error) {
  const cuda::ModuleTable *module = loadModule(error);
  // The module's set-up is collective (NCCL): a rank that cannot load it
  // must not leave the others waiting there.
  bool loaded = module != nullptr;
  if (options.comm && options.comm->allReduceMax(loaded ? 0 : 1) != 0) {
    if (loaded)
      error = "another rank cannot load the CUDA backend module";
    return nullptr;
  }
  if (!module)
    return nullptr;
  return std::unique_ptr<Backend>(module->createBackend(options, error));
}

std::string listCudaDevices() {
  std::string error;
  const cuda::ModuleTable *module = loadModule(error);
  return module ? module->listDevices() : "no CUDA device: " + error;
}

} // namespace fsdp::rt
