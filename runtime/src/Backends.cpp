//===- Backends.cpp - the backends a tool can name ------------------------===//
//
// The one place that turns a backend's options into the backend: tools
// pick a backend by name, get its options type from here, fill them and
// never compare names themselves. A new backend is its own folder and
// target, its options type in BackendOptions and one overload here.
//
//===----------------------------------------------------------------------===//

#include "fsdp/runtime/Backend.h"

#include <utility>

namespace fsdp::rt {
namespace {
// Each backend from its own options only.
std::unique_ptr<Backend> start(const CpuBackendOptions &o, std::string &error) {
  return createCpuBackend(o, error);
}

std::unique_ptr<Backend> start(const CudaBackendOptions &o,
                               std::string &error) {
  // Without CUDA, it says the build has none.
  return createCudaBackend(o, error);
}

/// Backend `name`'s default options, looked up among the variant's
/// alternatives from the I-th on (no table: a lookup allocates nothing,
/// and fsdp-run counts the heap its setup takes).
template <size_t I = 0>
bool findBackend(const std::string &name, BackendOptions &options) {
  if constexpr (I == std::variant_size_v<BackendOptions>) {
    return false;
  } else {
    if (name == std::variant_alternative_t<I, BackendOptions>::kName) {
      options.emplace<I>();
      return true;
    }
    return findBackend<I + 1>(name, options);
  }
}

/// Every backend's name, in the variant's order.
template <size_t... I>
std::vector<std::string> allNames(std::index_sequence<I...>) {
  return {std::variant_alternative_t<I, BackendOptions>::kName...};
}
} // namespace

const char *backendName(const BackendOptions &options) {
  return std::visit([](const auto &o) { return o.kName; }, options);
}

const std::vector<std::string> &backendNames() {
  static const std::vector<std::string> names =
      allNames(std::make_index_sequence<std::variant_size_v<BackendOptions>>());
  return names;
}

bool isBackend(const std::string &name) {
  BackendOptions options;
  return findBackend(name, options);
}

bool defaultBackendOptions(const std::string &name, BackendOptions &options) {
  return findBackend(name, options);
}

std::unique_ptr<Backend> createBackend(const BackendOptions &options,
                                       std::string &error) {
  return std::visit([&](const auto &o) { return start(o, error); }, options);
}

} // namespace fsdp::rt
