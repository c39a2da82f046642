//===- HFMoeConfig.cpp - Mixtral's and Qwen3-MoE's experts ----------------===//
//
// The expert keys of transformers' MixtralConfig and Qwen3MoeConfig, read
// into LlamaConfig::moe with the discipline of the other families: every
// key read, refused with one line naming it and why, or ignored by name.
// What the router does at random (jitter) or what leaves some layers
// dense (decoder_sparse_step, mlp_only_layers) is refused: fsdp-gen
// describes one model, experts in every block.
//
//===----------------------------------------------------------------------===//

#include "KeyReader.h"

namespace fsdp_gen {
namespace {

/// router_aux_loss_coef: a finite number, 0 or more (transformers
/// multiplies the balancing loss by it).
void readAuxLossCoef(KeyReader &r, MoeConfig &e) {
  const json *v = r.value("router_aux_loss_coef");
  if (!v)
    return;
  if (!v->is_number() || !(v->get<double>() >= 0.0) ||
      std::isinf(v->get<double>()))
    return r.bad("router_aux_loss_coef",
                 "is " + v->dump() + ": it must be a number, 0 or more");
  e.auxLossCoef = v->get<double>();
}

/// The expert count into `e.experts`, returning the key that gave it.
/// The Hub's configs (transformers 4.x) name it num_local_experts
/// (Mixtral) or num_experts (Qwen3-MoE); transformers 5 maps num_experts
/// to num_local_experts in both families and writes the latter. Both
/// given, they must agree.
const char *readExpertCount(KeyReader &r, MoeConfig &e, bool mixtral) {
  const json *local = r.value("num_local_experts");
  const json *plain = r.value("num_experts");
  if (local && plain && *local != *plain) {
    r.bad("num_experts", "is " + plain->dump() + " and num_local_experts " +
                             local->dump() + ": they name the same count");
    return "num_experts";
  }
  const char *key = local     ? "num_local_experts"
                    : plain   ? "num_experts"
                    : mixtral ? "num_local_experts"
                              : "num_experts";
  r.positive(key, e.experts);
  return key;
}

/// Mixtral: experts of intermediate_size each (readLlama read it as the
/// MLP's width), and the top k's weights always divided by their sum
/// (MixtralSparseMoeBlock has no switch for it).
void readMixtral(KeyReader &r, LlamaConfig &c) {
  MoeConfig &e = c.moe;
  e.expertFfn = c.ffn;
  e.normTopK = true;
  // Jitter multiplies the router's input by uniform noise in training:
  // a random step, which a compiled one does not reproduce.
  const json *jitter = r.value("router_jitter_noise");
  if (jitter && (!jitter->is_number() || jitter->get<double>() != 0.0))
    r.bad("router_jitter_noise",
          "is " + jitter->dump() +
              ": jitter scales the router's input by random noise in "
              "training, which fsdp-gen does not model; only 0");
}

/// Qwen3-MoE: experts of moe_intermediate_size each, in every layer.
/// decoder_sparse_step and mlp_only_layers would give some layers a dense
/// MLP of intermediate_size instead, which is not modelled yet.
void readQwen3Moe(KeyReader &r, LlamaConfig &c) {
  MoeConfig &e = c.moe;
  r.positive("moe_intermediate_size", e.expertFfn);
  r.boolean("norm_topk_prob", e.normTopK);
  int64_t step = 1;
  r.positive("decoder_sparse_step", step, false);
  if (step != 1)
    r.bad("decoder_sparse_step",
          "is " + std::to_string(step) +
              ": layers i with (i + 1) % step != 0 would have a dense MLP; "
              "fsdp-gen reads only 1 (experts in every layer)");
  const json *dense = r.value("mlp_only_layers");
  if (dense && !dense->is_null() && !dense->is_array())
    r.bad("mlp_only_layers",
          "is " + dense->dump() + ": it must be a list of layer indices");
  else if (dense && dense->is_array() && !dense->empty())
    r.bad("mlp_only_layers",
          "is " + dense->dump() +
              ": those layers would have a dense MLP; fsdp-gen reads only "
              "[] (experts in every layer)");
  // Qwen2-MoE's shared expert: Qwen3MoeSparseMoeBlock has none, so
  // transformers would ignore a size given here; refused, not ignored.
  const json *shared = r.value("shared_expert_intermediate_size");
  if (shared && !shared->is_null() && *shared != json(0))
    r.bad("shared_expert_intermediate_size",
          "is " + shared->dump() +
              ": qwen3_moe has no shared expert (transformers ignores the "
              "key); only 0 or null");
}
} // namespace

void readMoe(KeyReader &r, HFModel &m) {
  LlamaConfig &c = m.llama;
  MoeConfig &e = c.moe;
  bool mixtral = m.modelType == "mixtral";
  e.family = m.modelType;
  const char *expertsKey = readExpertCount(r, e, mixtral);
  if (mixtral)
    readMixtral(r, c);
  else
    readQwen3Moe(r, c);
  // No layer has a dense MLP: its width is not the model's.
  c.ffn = 0;
  r.positive("num_experts_per_tok", e.topK);
  if (r.error.empty() && e.topK > e.experts)
    r.bad("num_experts_per_tok",
          "is " + std::to_string(e.topK) + ", more than the " +
              std::to_string(e.experts) + " experts (" + expertsKey + ")");
  r.boolean("output_router_logits", e.auxLoss);
  readAuxLossCoef(r, e);
}

} // namespace fsdp_gen
