//===- CheckpointNoJson.cpp - manifests in a build without nlohmann-json --===//
//
// The runtime builds without the JSON library (a GPU machine without the
// package); --checkpoint-dir and --resume then say so before any step.
//
//===----------------------------------------------------------------------===//

#include "fsdp/runtime/Checkpoint.h"

namespace fsdp::rt {

bool checkpointsAvailable() { return false; }

std::string emitManifest(const Manifest &) { return ""; }

bool parseManifest(const std::string &, Manifest &, std::string &why) {
  why = "this fsdp-run was built without nlohmann-json, which manifests need";
  return false;
}

} // namespace fsdp::rt
