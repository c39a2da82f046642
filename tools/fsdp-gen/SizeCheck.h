//===- SizeCheck.h - the sizes of a model must fit int64 --------*- C++ -*-===//
//
// Every element count and byte size the compiler computes is an int64_t:
// a tensor's elements, its bytes, a unit's flat parameter, the training
// state of the whole model. fsdp-gen checks them from the options before
// building anything, so that an option too large for them gets an error
// that names it instead of a wrapped size that fails much later.
//
//===----------------------------------------------------------------------===//

#ifndef FSDP_TOOLS_FSDP_GEN_SIZECHECK_H
#define FSDP_TOOLS_FSDP_GEN_SIZECHECK_H

#include "ModelBuilder.h"

#include <optional>
#include <string>

namespace fsdp_gen {

/// What the errors call each size: fsdp-gen's options by default, or a
/// config.json's keys (`names.seq` is the positions key unless --seq gave
/// the length). `batch` is always the option.
struct SizeNames {
  const char *layers = "--layers", *dim = "--dim", *heads = "--heads",
             *kvHeads = "--kv-heads", *ffn = "--ffn-dim", *vocab = "--vocab",
             *seq = "--seq", *batch = "--batch", *positions = "n_positions",
             *headDim = "head_dim";
};
/// The keys of a gpt2 or llama config.json.
SizeNames gpt2ConfigNames(bool seqGiven);
SizeNames llamaConfigNames(bool seqGiven);

/// The most ops fsdp-gen builds. The IR is proportional to the layers
/// (types and attributes are uniqued, so the tensors' sizes cost nothing):
/// measured, an op of a generated model takes under kBytesPerOp bytes of
/// fsdp-gen's memory (about 490 for a GPT-2 block's, 400 for a Llama's),
/// so a model at the bound takes at most kMaxOps x kBytesPerOp = 512 MiB
/// there. fsdp-opt's training step of it takes about four times as much
/// (docs/models.md), which a machine of a few GB still compiles.
constexpr int64_t kMaxOps = int64_t(1) << 20;
constexpr int64_t kBytesPerOp = 512;

/// The most token ids an i32 holds: the vocabulary's bound.
constexpr int64_t kMaxVocab = 2147483647;

/// An error naming the options (`--dim 4000000000 is too large: ...`) when
/// the model would not fit fsdp-gen's memory (kMaxOps), a size of it does
/// not fit int64, or the vocabulary has ids no i32 holds; nullopt when all
/// fit. `elementBytes` is the size of one parameter element (4 for f32).
std::optional<std::string> checkSizes(const GPT2Config &config,
                                      int64_t elementBytes,
                                      const SizeNames &names = {});
std::optional<std::string> checkSizes(const MLPConfig &config,
                                      int64_t elementBytes);
std::optional<std::string> checkSizes(const LlamaConfig &config,
                                      int64_t elementBytes,
                                      const SizeNames &names = {});

} // namespace fsdp_gen

#endif // FSDP_TOOLS_FSDP_GEN_SIZECHECK_H
