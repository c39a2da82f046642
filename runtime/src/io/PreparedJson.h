//===- PreparedJson.h - JSON text reprinted without allocating --*- C++ -*-===//
//
// A checkpoint's texts (each rank file's safetensors header, rank 0's
// manifest) are the same every step but for a few values: the step, the
// files' sizes and CRCs. PreparedJson parses the text once at setup, keeps
// the tree, the printer and an output buffer reserved for the widest
// values, and reprints it with new values in place, so that writing a
// checkpoint during training allocates nothing (docs/memory.md). The
// printing is nlohmann-json's (PreparedJsonNlohmann.cpp); a build without
// it has no checkpoints, and prepare() fails there.
//
//===----------------------------------------------------------------------===//

#ifndef FSDP_RUNTIME_PREPAREDJSON_H
#define FSDP_RUNTIME_PREPAREDJSON_H

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

namespace fsdp::rt {

class PreparedJson {
public:
  PreparedJson();
  ~PreparedJson();
  PreparedJson(const PreparedJson &) = delete;
  PreparedJson &operator=(const PreparedJson &) = delete;

  /// Parses `text` (as emitted by nlohmann-json's dump with `indent`, -1:
  /// compact; `newline`: a '\n' after it). False when it is no JSON.
  bool prepare(const std::string &text, int indent, bool newline);
  /// The value at JSON pointer `pointer` ("/files/0/bytes") as a slot for
  /// setNumber or setString: -1 when there is none (or it is neither a
  /// number nor a string). A string slot keeps room for 24 characters.
  int slot(const std::string &pointer);
  void setNumber(int slot, uint64_t value);
  /// At most 24 characters (beyond that the string reallocates).
  void setString(int slot, const char *value);
  /// Reserves the output for the text as it prints now (set the slots to
  /// their widest values first) and `extra` bytes more: print() then
  /// never grows it.
  void reserve(size_t extra);
  /// The text with the slots' current values, padded with spaces to a
  /// multiple of `multiple` bytes; allocates nothing once reserve() has
  /// been called with values at least as wide and `extra` >= multiple.
  const std::string &print(size_t multiple = 1);

private:
  struct Impl;
  std::unique_ptr<Impl> impl;
};

} // namespace fsdp::rt

#endif // FSDP_RUNTIME_PREPAREDJSON_H
