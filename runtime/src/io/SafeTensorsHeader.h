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

} // namespace fsdp::rt

#endif // FSDP_RUNTIME_SAFETENSORSHEADER_H
