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

/// The most blocks (gpt2) or layers (mlp) fsdp-gen builds: each adds some
/// 30 ops to @forward and over 100 to the training step, so a deeper model
/// would not fit in memory as IR long before its sizes overflow.
constexpr int64_t kMaxLayers = int64_t(1) << 20;

/// An error naming the options (`--dim 4000000000 is too large: ...`) when a
/// size of the model does not fit int64, or nullopt when all do.
/// `elementBytes` is the size of one parameter element (4 for f32).
std::optional<std::string> checkSizes(const GPT2Config &config,
                                      int64_t elementBytes);
std::optional<std::string> checkSizes(const MLPConfig &config,
                                      int64_t elementBytes);
/// With `configKeys`, sizes are named by their config.json keys
/// (`hidden_size 5120`) instead of fsdp-gen's options.
std::optional<std::string> checkSizes(const LlamaConfig &config,
                                      int64_t elementBytes,
                                      bool configKeys = false);

} // namespace fsdp_gen

#endif // FSDP_TOOLS_FSDP_GEN_SIZECHECK_H
