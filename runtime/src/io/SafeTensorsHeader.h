//===- SafeTensorsHeader.h - the JSON half of the format --------*- C++ -*-===//
//
// What SafeTensors.cpp needs from a JSON library, in two functions:
// SafeTensorsJson.cpp has them with nlohmann-json, SafeTensorsNoJson.cpp
// (a build without it) fails them with a reason.
//
//===----------------------------------------------------------------------===//

#ifndef FSDP_RUNTIME_SAFETENSORSHEADER_H
#define FSDP_RUNTIME_SAFETENSORSHEADER_H

#include "fsdp/runtime/io/SafeTensors.h"

namespace fsdp::rt {

/// Parses the header's JSON: each entry's name, dtype, shape and offsets
/// (types checked, offsets not yet against the data), and the metadata.
/// False with `why` (without the file's name) when it is not a header.
bool parseSafeTensorsHeader(const char *text, size_t size,
                            std::vector<TensorInfo> &tensors,
                            TensorMetadata &metadata, std::string &why);

/// The compact JSON header of `tensors` laid out back to back in their
/// order, metadata first (none when empty), without padding.
std::string emitSafeTensorsHeader(const std::vector<TensorToWrite> &tensors,
                                  const TensorMetadata &metadata);

/// A sharded checkpoint's index (model.safetensors.index.json): each
/// tensor's file, in the index's order. Checked: a JSON object whose
/// "weight_map" is an object of strings (each a plain relative file name:
/// no absolute path, no ".." component, no empty name), "metadata" an
/// object if present, no other key but those. False with `why` (without
/// the index's name).
bool parseSafeTensorsIndex(
    const char *text, size_t size,
    std::vector<std::pair<std::string, std::string>> &map, std::string &why);
/// The index Hugging Face writes: {"metadata": {"total_size": N},
/// "weight_map": {tensor: file, ..}}, indented, in the order given.
std::string emitSafeTensorsIndex(
    uint64_t totalSize,
    const std::vector<std::pair<std::string, std::string>> &map);
/// `config` (a JSON object's text) with "dtype" set to `dtype`
/// ("float32", "bfloat16"), and "torch_dtype" too where it has one
/// (transformers 4's name), indented. False with `why` when `config` is
/// not a JSON object.
bool configWithDType(const std::string &config, const std::string &dtype,
                     std::string &out, std::string &why);

} // namespace fsdp::rt

#endif // FSDP_RUNTIME_SAFETENSORSHEADER_H
