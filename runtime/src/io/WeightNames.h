//===- WeightNames.h - a plan's parameters as a file's tensors --*- C++ -*-===//
//
// Our names are the plan's parameter names (fsdp-gen's: `h.0.attn.qkv.w`),
// each tensor as the plan holds it. Hugging Face's are those of
// GPT2LMHeadModel and LlamaForCausalLM checkpoints: GPT-2's linear weights
// are Conv1D's, stored [in, out], the transpose of ours; Llama's q, k and
// v projections are three tensors where we fuse them along the rows (q
// then k then v, the order the rope and attention kernels read).
//
//===----------------------------------------------------------------------===//

#ifndef FSDP_RUNTIME_WEIGHTNAMES_H
#define FSDP_RUNTIME_WEIGHTNAMES_H

#include "fsdp/runtime/io/Weights.h"

namespace fsdp::rt {

/// One tensor of a weights file and where its elements are in the plan:
/// rows [rowBegin, rowBegin + rows) of parameter `param` (its first
/// dimension; all of them but for a split), stored transposed (the file
/// holds [columns, rows]) for a Conv1D weight.
struct WeightTensor {
  std::string name;           ///< as written
  std::string key;            ///< as matched (GPT-2's without "transformer.")
  std::vector<int64_t> shape; ///< in the file
  uint32_t param = 0;
  int64_t rowBegin = 0, rows = 1;
  bool transposed = false;
};

/// The file's tensors for `plan` of `family` under `naming`, in plan
/// order. False with `why` when the family has no such names.
bool weightTensors(const Plan &plan, ModelFamily family, WeightNaming naming,
                   std::vector<WeightTensor> &tensors, std::string &why);

/// The name a Hugging Face file's tensor is matched by: GPT-2 files are
/// saved with and without the "transformer." prefix.
std::string hfKey(ModelFamily family, const std::string &name);

/// A tensor a Hugging Face file of `family` carries that is no parameter:
/// GPT-2's attention masks (h.N.attn.bias of 4 dimensions,
/// h.N.attn.masked_bias), Llama's rope frequencies
/// (rotary_emb.inv_freq), the head of a model whose head is tied to its
/// token table (lm_head.weight). `key` as hfKey gives it.
bool isHFBuffer(const Plan &plan, ModelFamily family, const std::string &key,
                const std::vector<int64_t> &shape);

} // namespace fsdp::rt

#endif // FSDP_RUNTIME_WEIGHTNAMES_H
