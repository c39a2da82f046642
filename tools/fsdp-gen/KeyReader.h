//===- KeyReader.h - one config.json's keys, read by name -------*- C++ -*-===//
//
// The discipline of every family's reader (HFConfig.cpp, HFMoeConfig.cpp):
// each key is read, refused with one line naming it and why, or ignored
// by name; a key none of them took is refused by rejectOthers.
//
//===----------------------------------------------------------------------===//

#ifndef FSDP_TOOLS_FSDP_GEN_KEYREADER_H
#define FSDP_TOOLS_FSDP_GEN_KEYREADER_H

// LLVM builds without exceptions: nlohmann-json's no-exception mode, and
// every value's type checked before it is read.
#ifndef JSON_NOEXCEPTION
#define JSON_NOEXCEPTION
#endif
#include "HFConfig.h"

#include <nlohmann/json.hpp>

#include <cmath>
#include <set>
#include <string>
#include <vector>

namespace fsdp_gen {
using json = nlohmann::json;

/// Keys that describe the checkpoint or the tokenizer, not the network.
inline const std::set<std::string> kBookkeeping = {
    "_name_or_path", "architectures",        "bos_token_id",
    "eos_token_id",  "pad_token_id",         "model_type",
    "torch_dtype",   "transformers_version",
    "dtype", // transformers 5's name for torch_dtype
    "use_cache",     "task_specific_params", "id2label",
    "label2id"};

/// Reads one config's keys, remembering which were read; the first
/// problem wins and names the key.
class KeyReader {
public:
  KeyReader(const json &j, std::string path) : j(j), path(std::move(path)) {}

  /// A positive integer; `required` or left at `out`.
  void positive(const char *key, int64_t &out, bool required = true) {
    const json *v = find(key, required);
    if (!v)
      return;
    if (!v->is_number_integer() || v->get<int64_t>() <= 0)
      return bad(key, "must be a positive integer");
    out = v->get<int64_t>();
  }
  /// A positive number that a positive, finite f32 holds (the IR keeps
  /// rope's theta and the norm's epsilon in f32 attributes).
  void number(const char *key, double &out) {
    const json *v = find(key, false);
    if (!v)
      return;
    if (!v->is_number() || !(v->get<double>() > 0.0))
      return bad(key, "must be a positive number");
    float rounded = float(v->get<double>());
    if (!(rounded > 0.0f) || std::isinf(rounded))
      return bad(key, "is " + v->dump() +
                          ": it must be positive and finite as an f32 (the "
                          "IR keeps it in one)");
    out = v->get<double>();
  }
  void boolean(const char *key, bool &out) {
    const json *v = find(key, false);
    if (!v)
      return;
    if (!v->is_boolean())
      return bad(key, "must be true or false");
    out = v->get<bool>();
  }
  /// A key that may be absent or hold `allowed` (or null, when
  /// `nullOk`): anything else is an architecture we do not build.
  void only(const char *key, const json &allowed, bool nullOk = false) {
    const json *v = find(key, false);
    if (v && *v != allowed && !(nullOk && v->is_null()))
      bad(key, "is " + v->dump() + "; fsdp-gen builds only " + allowed.dump());
  }
  /// A dropout probability: accepted, and noted when not 0 (the step
  /// trains without dropout).
  void dropout(const char *key, std::vector<std::string> &notes) {
    const json *v = find(key, false);
    if (v && (!v->is_number() || !(v->get<double>() >= 0.0) ||
              v->get<double>() > 1.0))
      return bad(key, "must be a probability (from 0 to 1)");
    if (v && v->get<double>() != 0.0)
      notes.push_back(std::string(key) + " = " + v->dump() +
                      " is not modelled: the step trains without dropout");
  }
  /// A key about something the language model does not have.
  void ignore(const char *key) { read.insert(key); }
  /// The value of `key` (marked read), or null when absent.
  const json *value(const char *key) { return find(key, false); }
  /// Fails on the first key neither read nor bookkeeping.
  void rejectOthers() {
    for (auto it = j.begin(); it != j.end(); ++it)
      if (!read.count(it.key()) && !kBookkeeping.count(it.key()))
        return bad(it.key().c_str(), "is not supported by fsdp-gen");
  }
  void bad(const char *key, const std::string &why) {
    if (error.empty())
      error = path + ": '" + key + "' " + why;
  }
  std::string error;

private:
  const json *find(const char *key, bool required) {
    read.insert(key);
    auto it = j.find(key);
    if (it == j.end()) {
      if (required)
        bad(key, "is missing");
      return nullptr;
    }
    return &*it;
  }
  const json &j;
  std::string path;
  std::set<std::string> read;
};

/// Mixtral's and Qwen3-MoE's expert keys into `m.llama.moe`, after
/// readLlama has read their attention (HFMoeConfig.cpp).
void readMoe(KeyReader &r, HFModel &m);

} // namespace fsdp_gen

#endif // FSDP_TOOLS_FSDP_GEN_KEYREADER_H
