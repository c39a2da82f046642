//===- SafeTensorsNoJson.cpp - a runtime built without nlohmann-json -----===//
//
// The GPU machines build the runtime alone, with CMake and CUDA but maybe
// without nlohmann-json: there fsdp-run builds all the same, and reading or
// writing safetensors fails with a reason instead of the build.
//
//===----------------------------------------------------------------------===//

#include "io/SafeTensorsHeader.h"

namespace fsdp::rt {

bool parseSafeTensorsHeader(const char *, size_t, std::vector<TensorInfo> &,
                            TensorMetadata &, std::string &why) {
  why = safeTensorsUnavailableReason();
  return false;
}

std::string emitSafeTensorsHeader(const std::vector<TensorToWrite> &,
                                  const TensorMetadata &) {
  return "";
}

bool parseSafeTensorsIndex(const char *, size_t,
                           std::vector<std::pair<std::string, std::string>> &,
                           std::string &why) {
  why = safeTensorsUnavailableReason();
  return false;
}

std::string
emitSafeTensorsIndex(uint64_t,
                     const std::vector<std::pair<std::string, std::string>> &) {
  return "";
}

bool configWithDType(const std::string &, const std::string &, std::string &,
                     std::string &why) {
  why = safeTensorsUnavailableReason();
  return false;
}

bool safeTensorsAvailable() { return false; }

} // namespace fsdp::rt
