//===- CheckpointNoJson.cpp - manifests in a build without nlohmann-json --===//
//
// The runtime builds without the JSON library (a GPU machine without the
// package); --checkpoint-dir and --resume then say so before any step.
//
//===----------------------------------------------------------------------===//

#include "fsdp/runtime/io/Checkpoint.h"

#include "io/PreparedJson.h"

namespace fsdp::rt {

bool checkpointsAvailable() { return false; }

std::string emitManifest(const Manifest &) { return ""; }

bool parseManifest(const std::string &, Manifest &, std::string &why) {
  why = "this fsdp-run was built without nlohmann-json, which manifests need";
  return false;
}

// Nothing prepares (checkpoints are refused before any step).
struct PreparedJson::Impl {
  std::string text;
};
PreparedJson::PreparedJson() : impl(std::make_unique<Impl>()) {}
PreparedJson::~PreparedJson() = default;
bool PreparedJson::prepare(const std::string &, int, bool) { return false; }
int PreparedJson::slot(const std::string &) { return -1; }
void PreparedJson::setNumber(int, uint64_t) {}
void PreparedJson::setString(int, const char *) {}
void PreparedJson::reserve(size_t) {}
const std::string &PreparedJson::print(size_t) { return impl->text; }

} // namespace fsdp::rt
