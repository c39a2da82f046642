//===- ModelConfig.h - a model's Hugging Face config ------------*- C++ -*-===//
//
// The module attribute fsdp-gen sets on a GPT-2 or Llama: the model's
// Hugging Face config (config.json's text: the one `--config` read, every
// key kept, or one written from the size options). The dialect's verifier
// accepts it on a module as a string; the plan writer carries it into the
// plan (version 14), and `fsdp-run --export DIR` writes it as
// DIR/config.json (docs/runtime.md, "Hugging Face checkpoints both ways").
//
//===----------------------------------------------------------------------===//

#ifndef FSDP_DIALECT_FSDP_IR_MODELCONFIG_H
#define FSDP_DIALECT_FSDP_IR_MODELCONFIG_H

#include "llvm/ADT/StringRef.h"

namespace mlir::fsdp {
constexpr llvm::StringLiteral kHFConfigAttrName = "fsdp.hf_config";
} // namespace mlir::fsdp

#endif // FSDP_DIALECT_FSDP_IR_MODELCONFIG_H
