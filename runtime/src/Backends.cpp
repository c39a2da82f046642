//===- Backends.cpp - the backends a tool can name ------------------------===//
//
// The one place that lists the backends: tools pick one by name and never
// compare names themselves. A new backend is its own folder and target
// plus one entry here.
//
//===----------------------------------------------------------------------===//

#include "fsdp/runtime/exec/Backend.h"

namespace fsdp::rt {
namespace {
struct Registration {
  const char *name;
  std::unique_ptr<Backend> (*create)(const BackendOptions &, std::string &);
};

std::unique_ptr<Backend> startCpu(const BackendOptions &o, std::string &error) {
  return createCpuBackend({o.threads, o.blas, o.comm, o.collectiveThreads},
                          error);
}

std::unique_ptr<Backend> startCuda(const BackendOptions &o,
                                   std::string &error) {
  return createCudaBackend(
      {o.device, o.localRank, o.tf32, o.comm, o.collectiveTimeout}, error);
}

const Registration kBackends[] = {
    {"cpu", startCpu},
    {"cuda", startCuda}, // without CUDA, it says the build has none
};
} // namespace

const std::vector<std::string> &backendNames() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> list;
    for (const Registration &r : kBackends)
      list.push_back(r.name);
    return list;
  }();
  return names;
}

bool isBackend(const std::string &name) {
  for (const Registration &r : kBackends)
    if (name == r.name)
      return true;
  return false;
}

std::unique_ptr<Backend> createBackend(const std::string &name,
                                       const BackendOptions &options,
                                       std::string &error) {
  for (const Registration &r : kBackends)
    if (name == r.name)
      return r.create(options, error);
  error = "unknown backend '" + name + "'";
  return nullptr;
}

} // namespace fsdp::rt
