//===- SafeTensorsJson.cpp - a safetensors header with nlohmann-json -----===//
//
// Parsed without exceptions (JSON_NOEXCEPTION, as fsdp-gen's HFConfig):
// every value's type is checked before it is read, so a type nlohmann
// would have thrown on is an error line here, and a check this file
// forgot is an abort the fuzzer sees, not an exception someone catches.
//
//===----------------------------------------------------------------------===//

#define JSON_NOEXCEPTION
#include "io/SafeTensorsHeader.h"

#include <nlohmann/json.hpp>

#include <set>

namespace fsdp::rt {
namespace {
using json = nlohmann::json;

/// A SAX consumer that only keeps the parser's message: what a header
/// that is not JSON gets (the DOM parser without exceptions says nothing).
struct ErrorOnly {
  std::string message;
  bool null() { return true; }
  bool boolean(bool) { return true; }
  bool number_integer(json::number_integer_t) { return true; }
  bool number_unsigned(json::number_unsigned_t) { return true; }
  bool number_float(json::number_float_t, const std::string &) { return true; }
  bool string(std::string &) { return true; }
  bool binary(json::binary_t &) { return true; }
  bool start_object(std::size_t) { return true; }
  bool key(std::string &) { return true; }
  bool end_object() { return true; }
  bool start_array(std::size_t) { return true; }
  bool end_array() { return true; }
  bool parse_error(std::size_t, const std::string &,
                   const nlohmann::detail::exception &e) {
    message = e.what();
    return false;
  }
};

/// The header as JSON; a repeated key in any object is an error (nlohmann
/// would keep the last silently, and two entries of one name are two
/// readings of one file).
bool parseJson(const char *text, size_t size, json &j, std::string &why) {
  std::vector<std::set<std::string>> keys;
  std::string repeated;
  json::parser_callback_t track = [&](int, json::parse_event_t event,
                                      json &parsed) {
    if (event == json::parse_event_t::object_start)
      keys.emplace_back();
    else if (event == json::parse_event_t::object_end && !keys.empty())
      keys.pop_back();
    else if (event == json::parse_event_t::key && !keys.empty() &&
             parsed.is_string() &&
             !keys.back().insert(parsed.get<std::string>()).second &&
             repeated.empty())
      repeated = parsed.get<std::string>();
    return true;
  };
  j = json::parse(text, text + size, track, /*allow_exceptions=*/false);
  if (j.is_discarded()) {
    ErrorOnly sax;
    json::sax_parse(text, text + size, &sax);
    why = "the header is not valid JSON (" +
          (sax.message.empty() ? std::string("parse error") : sax.message) +
          ")";
    return false;
  }
  if (!repeated.empty()) {
    why = "the header names '" + repeated + "' twice";
    return false;
  }
  return true;
}

/// A non-negative integer that fits int64 (nlohmann keeps those unsigned).
bool readSize(const json &value, uint64_t limit, uint64_t &out) {
  if (!value.is_number_unsigned())
    return false;
  out = value.get<uint64_t>();
  return out <= limit;
}

bool readShape(const json &value, std::vector<int64_t> &shape) {
  if (!value.is_array())
    return false;
  for (const json &dim : value) {
    uint64_t d;
    if (!readSize(dim, uint64_t(INT64_MAX), d))
      return false;
    shape.push_back(int64_t(d));
  }
  return true;
}

bool readOffsets(const json &value, TensorInfo &t) {
  return value.is_array() && value.size() == 2 &&
         readSize(value[0], UINT64_MAX, t.begin) &&
         readSize(value[1], UINT64_MAX, t.end);
}

/// One tensor's entry: exactly dtype, shape and data_offsets, each of its
/// type (any other key is refused by name: a header we would misread).
bool readEntry(const std::string &name, const json &entry, TensorInfo &t,
               std::string &why) {
  t.name = name;
  auto bad = [&](const std::string &what) {
    why = "tensor '" + name + "': " + what;
    return false;
  };
  if (!entry.is_object())
    return bad("its entry is not an object");
  for (const auto &item : entry.items())
    if (item.key() != "dtype" && item.key() != "shape" &&
        item.key() != "data_offsets")
      return bad("unknown key '" + item.key() +
                 "' (an entry has dtype, shape and data_offsets)");
  auto dtype = entry.find("dtype");
  if (dtype == entry.end() || !dtype->is_string())
    return bad("'dtype' is missing or not a string");
  if (!parseDTypeName(dtype->get<std::string>(), t.dtype))
    return bad("unknown dtype '" + dtype->get<std::string>() + "'");
  auto shape = entry.find("shape");
  if (shape == entry.end() || !readShape(*shape, t.shape))
    return bad("'shape' is missing or not a list of non-negative 64-bit "
               "integers");
  auto offsets = entry.find("data_offsets");
  if (offsets == entry.end() || !readOffsets(*offsets, t))
    return bad("'data_offsets' is missing or not two non-negative 64-bit "
               "integers");
  return true;
}

bool readMetadata(const json &value, TensorMetadata &metadata,
                  std::string &why) {
  if (!value.is_object()) {
    why = "'__metadata__' is not an object";
    return false;
  }
  for (const auto &item : value.items()) {
    if (!item.value().is_string()) {
      why = "'__metadata__' value of '" + item.key() + "' is not a string";
      return false;
    }
    metadata.push_back({item.key(), item.value().get<std::string>()});
  }
  return true;
}
} // namespace

bool parseSafeTensorsHeader(const char *text, size_t size,
                            std::vector<TensorInfo> &tensors,
                            TensorMetadata &metadata, std::string &why) {
  json j;
  if (!parseJson(text, size, j, why))
    return false;
  if (!j.is_object()) {
    why = "the header is not a JSON object";
    return false;
  }
  for (const auto &item : j.items()) {
    if (item.key() == "__metadata__") {
      if (!readMetadata(item.value(), metadata, why))
        return false;
      continue;
    }
    tensors.emplace_back();
    if (!readEntry(item.key(), item.value(), tensors.back(), why))
      return false;
  }
  return true;
}

std::string emitSafeTensorsHeader(const std::vector<TensorToWrite> &tensors,
                                  const TensorMetadata &metadata) {
  // ordered_json: the entries in data order (the reference library sorts
  // nothing on reading; a person reading the header sees the model).
  nlohmann::ordered_json header = nlohmann::ordered_json::object();
  if (!metadata.empty()) {
    nlohmann::ordered_json meta = nlohmann::ordered_json::object();
    for (const auto &[key, value] : metadata)
      meta[key] = value;
    header["__metadata__"] = meta;
  }
  uint64_t at = 0;
  for (const TensorToWrite &t : tensors) {
    uint64_t bytes = dtypeBytes(t.dtype);
    for (int64_t d : t.shape)
      bytes *= uint64_t(d);
    header[t.name] = {{"dtype", dtypeName(t.dtype)},
                      {"shape", t.shape},
                      {"data_offsets", {at, at + bytes}}};
    at += bytes;
  }
  // Invalid UTF-8 in a name becomes U+FFFD instead of an abort.
  return header.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

namespace {
/// A shard's name as an index may give it: relative, without "..", not
/// empty, no NUL.
bool plainFileName(const std::string &name) {
  if (name.empty() || name[0] == '/' || name.find('\0') != std::string::npos)
    return false;
  size_t at = 0;
  while (at <= name.size()) {
    size_t slash = name.find('/', at);
    if (slash == std::string::npos)
      slash = name.size();
    std::string part = name.substr(at, slash - at);
    if (part.empty() || part == "." || part == "..")
      return false;
    at = slash + 1;
  }
  return true;
}
} // namespace

bool parseSafeTensorsIndex(
    const char *text, size_t size,
    std::vector<std::pair<std::string, std::string>> &map, std::string &why) {
  json j;
  if (!parseJson(text, size, j, why)) {
    // parseJson speaks of "the header"; this is an index.
    if (why.rfind("the header", 0) == 0)
      why = "the index" + why.substr(10);
    return false;
  }
  if (!j.is_object()) {
    why = "the index is not a JSON object";
    return false;
  }
  for (const auto &item : j.items())
    if (item.key() != "metadata" && item.key() != "weight_map") {
      why = "unknown key '" + item.key() +
            "' (an index has metadata and weight_map)";
      return false;
    }
  auto meta = j.find("metadata");
  if (meta != j.end() && !meta->is_object() && !meta->is_null()) {
    why = "'metadata' is not an object";
    return false;
  }
  auto weights = j.find("weight_map");
  if (weights == j.end() || !weights->is_object()) {
    why = "'weight_map' is missing or not an object";
    return false;
  }
  for (const auto &item : weights->items()) {
    if (!item.value().is_string()) {
      why = "'weight_map' entry '" + item.key() + "' is not a file name";
      return false;
    }
    std::string file = item.value().get<std::string>();
    if (!plainFileName(file)) {
      why = "'weight_map' maps '" + item.key() + "' to '" + file +
            "', not a file name relative to the index's directory";
      return false;
    }
    map.emplace_back(item.key(), std::move(file));
  }
  if (map.empty()) {
    why = "'weight_map' is empty";
    return false;
  }
  return true;
}

std::string emitSafeTensorsIndex(
    uint64_t totalSize,
    const std::vector<std::pair<std::string, std::string>> &map) {
  nlohmann::ordered_json weights = nlohmann::ordered_json::object();
  for (const auto &[tensor, file] : map)
    weights[tensor] = file;
  nlohmann::ordered_json index = {{"metadata", {{"total_size", totalSize}}},
                                  {"weight_map", weights}};
  return index.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) +
         "\n";
}

bool configWithDType(const std::string &config, const std::string &dtype,
                     std::string &out, std::string &why) {
  nlohmann::ordered_json j =
      nlohmann::ordered_json::parse(config, nullptr, false);
  if (j.is_discarded() || !j.is_object()) {
    why = "the plan's Hugging Face config is not a JSON object";
    return false;
  }
  j["dtype"] = dtype;
  if (j.contains("torch_dtype"))
    j["torch_dtype"] = dtype;
  out = j.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
  return true;
}

bool safeTensorsAvailable() { return true; }

} // namespace fsdp::rt
