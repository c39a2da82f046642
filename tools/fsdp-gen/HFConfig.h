//===- HFConfig.h - models from a Hugging Face config.json ------*- C++ -*-===//
//
// `fsdp-gen --config config.json` reads the architecture a Hugging Face
// model ships with and emits the same model. Every key is either used,
// known not to change the architecture (token ids, the library's version),
// or refused with its name and value: a model we cannot build exactly is
// never built approximately.
//
//===----------------------------------------------------------------------===//

#ifndef FSDP_TOOLS_FSDP_GEN_HFCONFIG_H
#define FSDP_TOOLS_FSDP_GEN_HFCONFIG_H

#include "ModelBuilder.h"

#include <optional>
#include <string>
#include <vector>

namespace fsdp_gen {

/// The parameters of a Llama: per block q and o (C x heads hs each, C x C
/// when hs = C / heads), k and v (C x kv_heads hs each), the MLP's gate,
/// up and down (C x F each) and two RMSNorm gains (C each), Qwen2's q, k
/// and v biases, Qwen3's q_norm and k_norm gains (hs each); the token
/// table, the final norm's gain and the head (V x C, unless tied).
/// With a mixture of experts the MLP is E experts (3 C F_e each) and the
/// router (E x C). None when the count overflows int64.
std::optional<int64_t> countParameters(const LlamaConfig &c);
/// The parameters one token runs through: countParameters with top_k
/// routed experts per block instead of all of them (every one for a
/// dense model). The router's E x C is counted: every token is scored by
/// every expert's row.
std::optional<int64_t> countActiveParameters(const LlamaConfig &c);
/// The parameters of a GPT-2: per block 12 C^2 + 13 C, the token and
/// position tables (V x C, positions x C) and the final norm (2 C); the
/// head is tied. None when the count overflows int64.
std::optional<int64_t> countParameters(const GPT2Config &c);

/// What a config.json describes.
struct HFModel {
  /// "gpt2", or "llama", "mistral", "qwen2", "qwen3" (a LlamaConfig:
  /// Mistral with a window, Qwen2 with qkvBias, Qwen3 with qkNorm and
  /// head_dim), or "mixtral", "qwen3_moe" (Mistral's and Qwen3's
  /// attention with LlamaConfig::moe's experts: described, not built).
  std::string modelType;
  GPT2Config gpt2;
  LlamaConfig llama;
  /// Keys accepted whose meaning the training step leaves out (dropout):
  /// said on stderr, not silently.
  std::vector<std::string> notes;
  /// The config as read, every key kept (compact JSON, the file's key
  /// order): what the plan carries and `fsdp-run --export DIR` writes back
  /// as config.json.
  std::string json;
};

/// Reads `path`; on failure returns false with `error` naming the file and,
/// where one is at fault, the key.
bool readHFConfig(const std::string &path, HFModel &model, std::string &error);

/// The config.json of the model fsdp-gen builds from size options (no
/// --config): GPT2LMHeadModel's or LlamaForCausalLM's keys for exactly
/// that architecture (no dropout, f32), which readHFConfig reads back to
/// the same model.
std::string hfConfigJson(const GPT2Config &c);
std::string hfConfigJson(const LlamaConfig &c);

} // namespace fsdp_gen

#endif // FSDP_TOOLS_FSDP_GEN_HFCONFIG_H
