//===- WeightNames.cpp - our parameter names and Hugging Face's -----------===//

#include "io/WeightNames.h"

#include <cctype>
#include <cstring>

namespace fsdp::rt {
namespace {
/// A parameter name and its Hugging Face name; `transposed`: Conv1D.
struct Rename {
  const char *ours, *hf;
  bool transposed;
};

// GPT-2 (fsdp-gen's ModelBuilder.cpp; GPT2LMHeadModel without the
// "transformer." that export adds): per block, after "h.N.".
constexpr Rename kGPT2Block[] = {
    {"ln_1.w", "ln_1.weight", false},
    {"ln_1.b", "ln_1.bias", false},
    {"attn.qkv.w", "attn.c_attn.weight", true},
    {"attn.qkv.b", "attn.c_attn.bias", false},
    {"attn.proj.w", "attn.c_proj.weight", true},
    {"attn.proj.b", "attn.c_proj.bias", false},
    {"ln_2.w", "ln_2.weight", false},
    {"ln_2.b", "ln_2.bias", false},
    {"mlp.fc.w", "mlp.c_fc.weight", true},
    {"mlp.fc.b", "mlp.c_fc.bias", false},
    {"mlp.proj.w", "mlp.c_proj.weight", true},
    {"mlp.proj.b", "mlp.c_proj.bias", false},
};
constexpr Rename kGPT2Top[] = {
    {"wte", "wte.weight", false},
    {"wpe", "wpe.weight", false},
    {"ln_f.w", "ln_f.weight", false},
    {"ln_f.b", "ln_f.bias", false},
};
// Llama (LlamaForCausalLM): per block, after "layers.N." ("model.layers.N."
// in the file); the fused qkv_proj is split in llamaTensors.
constexpr Rename kLlamaBlock[] = {
    {"input_layernorm.w", "input_layernorm.weight", false},
    {"self_attn.o_proj.w", "self_attn.o_proj.weight", false},
    {"self_attn.o_proj.b", "self_attn.o_proj.bias", false}, // attention_bias
    {"post_attention_layernorm.w", "post_attention_layernorm.weight", false},
    {"mlp.gate_proj.w", "mlp.gate_proj.weight", false},
    {"mlp.up_proj.w", "mlp.up_proj.weight", false},
    {"mlp.down_proj.w", "mlp.down_proj.weight", false},
    // Qwen3's per-head norms of q and k.
    {"self_attn.q_norm.w", "self_attn.q_norm.weight", false},
    {"self_attn.k_norm.w", "self_attn.k_norm.weight", false},
};
constexpr Rename kLlamaTop[] = {
    {"embed_tokens.w", "model.embed_tokens.weight", false},
    {"norm.w", "model.norm.weight", false},
    {"lm_head.w", "lm_head.weight", false},
};
constexpr const char *kGPT2Prefix = "transformer.";

template <size_t N>
const Rename *lookup(const Rename (&table)[N], const std::string &ours) {
  for (const Rename &r : table)
    if (ours == r.ours)
      return &r;
  return nullptr;
}

/// "PREFIX<digits>.REST": the prefix with the layer ("h.12.") and REST.
bool splitLayer(const std::string &name, const std::string &prefix,
                std::string &layer, std::string &rest) {
  if (name.compare(0, prefix.size(), prefix) != 0)
    return false;
  size_t end = prefix.size();
  while (end < name.size() && std::isdigit((unsigned char)name[end]))
    ++end;
  if (end == prefix.size() || end >= name.size() || name[end] != '.')
    return false;
  layer = name.substr(0, end + 1);
  rest = name.substr(end + 1);
  return true;
}

/// Parameter `index` whole, as a file holds it (transposed: [in, out]).
WeightTensor whole(const Plan &plan, uint32_t index, std::string name,
                   bool transposed) {
  const ParamDesc &p = plan.params[index];
  WeightTensor t;
  // An expert slice's file tensor is the full parameter's (all G slices).
  const std::vector<int64_t> shape = p.fullShape();
  t.name = t.key = std::move(name);
  t.shape = shape;
  t.param = index;
  t.rows = shape.empty() ? 1 : shape[0];
  t.transposed = transposed;
  if (transposed)
    t.shape = {shape[1], shape[0]};
  return t;
}

/// GPT-2's tensor for parameter `index`; false: not a GPT-2 parameter.
bool gpt2Tensor(const Plan &plan, uint32_t index, WeightTensor &out) {
  const ParamDesc &p = plan.params[index];
  std::string layer, rest;
  const Rename *r = lookup(kGPT2Top, p.name);
  std::string hf = r ? r->hf : "";
  if (!r && splitLayer(p.name, "h.", layer, rest) &&
      (r = lookup(kGPT2Block, rest)))
    hf = layer + r->hf;
  if (!r || (r->transposed && p.shape.size() != 2))
    return false;
  out = whole(plan, index, hf, r->transposed);
  out.name = kGPT2Prefix + hf;
  return true;
}

/// The rows of q in layer `layer`'s fused projection: the input width of
/// its o_proj [C, H hs] (H hs is C but where head_dim says otherwise, as
/// in Qwen3); -1 without one.
int64_t qRows(const Plan &plan, const std::string &layer) {
  for (const ParamDesc &p : plan.params)
    if (p.name == layer + "self_attn.o_proj.w" && p.shape.size() == 2)
      return p.shape[1];
  return -1;
}

/// q, k and v of Llama's fused projection [H hs + 2 KV hs, C] or of its
/// bias [H hs + 2 KV hs] (Qwen2's): q has H hs rows (o_proj's input
/// width), k and v half the rest each.
bool splitQkv(const Plan &plan, uint32_t index, const std::string &layer,
              std::vector<WeightTensor> &out) {
  const ParamDesc &p = plan.params[index];
  bool bias = p.shape.size() == 1;
  int64_t q = qRows(plan, layer);
  if ((p.shape.size() != 2 && !bias) || q <= 0 || p.shape[0] <= q ||
      (p.shape[0] - q) % 2 != 0)
    return false;
  int64_t kv = (p.shape[0] - q) / 2, begin = 0;
  for (auto [name, rows] : {std::pair<const char *, int64_t>{"q_proj", q},
                            {"k_proj", kv},
                            {"v_proj", kv}}) {
    WeightTensor t = whole(plan, index,
                           "model." + layer + "self_attn." + name +
                               (bias ? ".bias" : ".weight"),
                           false);
    t.shape = bias ? std::vector<int64_t>{rows}
                   : std::vector<int64_t>{rows, p.shape[1]};
    t.rowBegin = begin;
    t.rows = rows;
    begin += rows;
    out.push_back(t);
  }
  return true;
}

/// A mixture-of-experts block's parameters (fsdp-gen's, docs/moe.md),
/// REST after the layer: the router `B.gate.w` ([E, C]: B.gate.weight)
/// and the stacked experts `B.experts.M.w` ([E, rows, cols]: expert e's
/// matrix is row e, the file's B.experts.e.M.weight), B Mixtral's
/// block_sparse_moe or Qwen3-MoE's mlp. False for any other name.
bool moeTensors(const Plan &plan, uint32_t index, const std::string &layer,
                const std::string &rest, std::vector<WeightTensor> &out) {
  const ParamDesc &p = plan.params[index];
  std::string block;
  for (const char *b : {"block_sparse_moe.", "mlp."})
    if (rest.compare(0, std::strlen(b), b) == 0)
      block = b;
  std::string name = rest.substr(block.size());
  if (block.empty() || name.size() < 2 ||
      name.compare(name.size() - 2, 2, ".w") != 0)
    return false;
  name.resize(name.size() - 2);
  std::string prefix = "model." + layer + block;
  if (name == "gate" && p.shape.size() == 2) {
    out.push_back(whole(plan, index, prefix + "gate.weight", false));
    return true;
  }
  const std::string experts = "experts.";
  if (name.compare(0, experts.size(), experts) != 0 || p.shape.size() != 3 ||
      name.find('.', experts.size()) != std::string::npos)
    return false;
  std::string matrix = name.substr(experts.size());
  // Expert e is row e of the full stacked parameter (of every slice).
  for (int64_t e = 0; e < p.fullShape()[0]; ++e) {
    WeightTensor t = whole(
        plan, index,
        prefix + experts + std::to_string(e) + "." + matrix + ".weight", false);
    t.shape = {p.shape[1], p.shape[2]};
    t.rowBegin = e;
    t.rows = 1;
    out.push_back(std::move(t));
  }
  return true;
}

/// Llama's tensors for parameter `index`; false: not a Llama parameter.
bool llamaTensors(const Plan &plan, uint32_t index,
                  std::vector<WeightTensor> &out) {
  const ParamDesc &p = plan.params[index];
  if (const Rename *r = lookup(kLlamaTop, p.name)) {
    out.push_back(whole(plan, index, r->hf, false));
    return true;
  }
  std::string layer, rest;
  if (!splitLayer(p.name, "layers.", layer, rest))
    return false;
  if (rest == "self_attn.qkv_proj.w" || rest == "self_attn.qkv_proj.b")
    return splitQkv(plan, index, layer, out);
  const Rename *r = lookup(kLlamaBlock, rest);
  if (r)
    out.push_back(whole(plan, index, "model." + layer + r->hf, false));
  return r != nullptr || moeTensors(plan, index, layer, rest, out);
}

bool hfTensors(const Plan &plan, ModelFamily family,
               std::vector<WeightTensor> &tensors) {
  for (uint32_t i = 0; i < plan.params.size(); ++i) {
    if (family == ModelFamily::GPT2) {
      tensors.emplace_back();
      if (!gpt2Tensor(plan, i, tensors.back()))
        return false;
    } else if (family != ModelFamily::Llama || !llamaTensors(plan, i, tensors))
      return false;
  }
  return true;
}

bool hasParam(const Plan &plan, const std::string &name) {
  for (const ParamDesc &p : plan.params)
    if (p.name == name)
      return true;
  return false;
}

/// An MLP's parameters: layers.N.w and layers.N.b (fsdp-gen mlp).
bool isMlp(const Plan &plan) {
  for (const ParamDesc &p : plan.params) {
    std::string layer, rest;
    if (!splitLayer(p.name, "layers.", layer, rest) ||
        (rest != "w" && rest != "b"))
      return false;
  }
  return !plan.params.empty();
}
} // namespace

const char *familyName(ModelFamily family) {
  switch (family) {
  case ModelFamily::GPT2:
    return "gpt2";
  case ModelFamily::Llama:
    return "llama";
  case ModelFamily::MLP:
    return "mlp";
  case ModelFamily::Unknown:
    return "unknown";
  }
  return "unknown";
}

ModelFamily detectFamily(const Plan &plan) {
  std::vector<WeightTensor> tensors;
  if (hasParam(plan, "wte") && hasParam(plan, "wpe") &&
      hfTensors(plan, ModelFamily::GPT2, tensors))
    return ModelFamily::GPT2;
  tensors.clear();
  if (hasParam(plan, "embed_tokens.w") && hasParam(plan, "norm.w") &&
      hfTensors(plan, ModelFamily::Llama, tensors))
    return ModelFamily::Llama;
  return isMlp(plan) ? ModelFamily::MLP : ModelFamily::Unknown;
}

bool weightTensors(const Plan &plan, ModelFamily family, WeightNaming naming,
                   std::vector<WeightTensor> &tensors, std::string &why) {
  tensors.clear();
  if (naming == WeightNaming::Ours) {
    for (uint32_t i = 0; i < plan.params.size(); ++i)
      tensors.push_back(whole(plan, i, plan.params[i].name, false));
    return true;
  }
  if ((family == ModelFamily::GPT2 || family == ModelFamily::Llama) &&
      hfTensors(plan, family, tensors))
    return true;
  why =
      std::string("the plan's parameters are ") +
      (family == ModelFamily::MLP ? "an MLP's (layers.N.w, layers.N.b)"
                                  : "neither fsdp-gen's GPT-2 nor its Llama") +
      ", which have no Hugging Face names: use our names (--export-names "
      "ours)";
  return false;
}

std::string hfKey(ModelFamily family, const std::string &name) {
  const std::string prefix = kGPT2Prefix;
  if (family == ModelFamily::GPT2 &&
      name.compare(0, prefix.size(), prefix) == 0)
    return name.substr(prefix.size());
  return name;
}

bool isHFBuffer(const Plan &plan, ModelFamily family, const std::string &key,
                const std::vector<int64_t> &shape) {
  std::string layer, rest;
  if (family == ModelFamily::GPT2)
    return key == "lm_head.weight" ||
           (splitLayer(key, "h.", layer, rest) &&
            ((rest == "attn.bias" && shape.size() == 4) ||
             rest == "attn.masked_bias"));
  if (family == ModelFamily::Llama)
    return (key == "lm_head.weight" && !hasParam(plan, "lm_head.w")) ||
           (splitLayer(key, "model.layers.", layer, rest) &&
            rest == "self_attn.rotary_emb.inv_freq");
  return false;
}

bool chooseExportNaming(const Plan &plan, const std::string &requested,
                        WeightNaming &naming, std::string &error) {
  ModelFamily family = detectFamily(plan);
  bool hasHF = family == ModelFamily::GPT2 || family == ModelFamily::Llama;
  if (requested == "ours" || (requested.empty() && !hasHF)) {
    naming = WeightNaming::Ours;
    return true;
  }
  naming = WeightNaming::HuggingFace;
  std::vector<WeightTensor> tensors;
  if (weightTensors(plan, family, naming, tensors, error))
    return true;
  error = "--export-names hf: " + error;
  return false;
}

} // namespace fsdp::rt
