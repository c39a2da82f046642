//===- ModelBuilder.h - fsdp-dialect models built from a config -*- C++ -*-===//

#ifndef FSDP_TOOLS_FSDP_GEN_MODELBUILDER_H
#define FSDP_TOOLS_FSDP_GEN_MODELBUILDER_H

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/OwningOpRef.h"

#include <cstdint>
#include <string>

namespace fsdp_gen {

/// GPT-2 as in llm.c: token + position embedding, pre-norm blocks of causal
/// attention and a GELU MLP, final layer norm, and a head tied to the token
/// table.
struct GPT2Config {
  int64_t layers = 2, dim = 64, heads = 4, vocab = 256, seq = 64, batch = 4;
  /// Rows of the position table (Hugging Face's n_positions): 0 for seq.
  int64_t positions = 0;
  /// The weights' initial std (Hugging Face's initializer_range).
  double initStd = 0.02;
};

/// Rotary embeddings' frequency scaling (Hugging Face's rope_scaling /
/// rope_parameters; fsdp.rope's scaling attributes).
struct RopeScalingConfig {
  std::string type = "default"; ///< default, linear, llama3 or yarn
  double factor = 1, lowFreqFactor = 1, highFreqFactor = 4;
  int64_t originalMax = 0; ///< original_max_position_embeddings
  /// yarn: cos and sin's factor (computed from factor, mscale and
  /// mscale_all_dim when the config leaves it out), the ramp's betas and
  /// whether its range is truncated to integers.
  double attentionFactor = 1, betaFast = 32, betaSlow = 1;
  bool truncate = true;
  bool operator==(const RopeScalingConfig &o) const {
    return type == o.type && factor == o.factor &&
           lowFreqFactor == o.lowFreqFactor &&
           highFreqFactor == o.highFreqFactor && originalMax == o.originalMax &&
           attentionFactor == o.attentionFactor && betaFast == o.betaFast &&
           betaSlow == o.betaSlow && truncate == o.truncate;
  }
};

/// yarn's attention factor from its factor alone (transformers'
/// yarn_get_mscale: 0.1 ln(factor) + 1, 1 for a factor up to 1), and from
/// mscale and mscale_all_dim (the ratio of the two mscales).
double yarnAttentionFactor(double factor, double mscale = 0,
                           double mscaleAllDim = 0);

/// A mixture of experts in place of every block's MLP (Hugging Face's
/// MixtralConfig and Qwen3MoeConfig): a router (a C -> experts linear, no
/// bias) scores each token, the top `topK` experts (SwiGLU MLPs of width
/// `expertFfn`) run on it and their outputs are summed, weighted by the
/// scores (buildLlama's MoE block, docs/moe.md).
struct MoeConfig {
  /// Whose checkpoint names the block's parameters: "mixtral"
  /// (block_sparse_moe.experts.N.w1, w3, w2), "qwen3_moe" or "deepseek_v3"
  /// (mlp.experts.N.gate_proj, up_proj, down_proj).
  std::string family = "mixtral";
  /// Routed experts per layer: 0 for a dense model (no MoE).
  int64_t experts = 0;
  /// Experts each token is sent to (num_experts_per_tok).
  int64_t topK = 0;
  /// Each expert's SwiGLU width (Mixtral's intermediate_size, Qwen3-MoE's
  /// moe_intermediate_size).
  int64_t expertFfn = 0;
  /// Whether the top-k scores are divided by their sum (Mixtral always;
  /// Qwen3-MoE's norm_topk_prob) or used as the softmax gave them.
  bool normTopK = false;
  /// How the router's logits become scores: a softmax over all experts,
  /// before the top k are picked (both families; DeepSeek V3 would be
  /// "sigmoid").
  std::string scoring = "softmax";
  /// The load-balancing loss: added to the training loss, times
  /// `auxLossCoef`, only when `auxLoss` (output_router_logits): the
  /// published configs leave it off.
  bool auxLoss = false;
  double auxLossCoef = 0.001;
  /// DeepSeek-V3's: shared experts applied to every token (one SwiGLU of
  /// width sharedExperts x expertFfn, as DeepseekV3MoE builds them), the
  /// routed weights' scale (routed_scaling_factor), a per-expert selection
  /// bias for the sigmoid router (e_score_correction_bias: chooses, never
  /// weighs; moved after each step against the sign of its expert's
  /// load, outside the gradient), and
  /// the first `denseLayers` blocks with a dense MLP of LlamaConfig::ffn
  /// (first_k_dense_replace).
  int64_t sharedExperts = 0;
  double routedScale = 1.0;
  bool selectionBias = false;
  /// The selection bias's update speed (DeepSeek-V3's gamma: 0.001 for
  /// most of its training).
  double biasUpdateRate = 0.001;
  int64_t denseLayers = 0;
  /// Whether block `layer` has the experts.
  bool isMoeLayer(int64_t layer) const {
    return experts > 0 && layer >= denseLayers;
  }
};

/// The Llama architecture (Hugging Face's LlamaConfig): RMSNorm, rotary
/// embeddings, a SwiGLU MLP, grouped-query attention, no biases. Mistral
/// is the same with a sliding window on every layer's attention.
struct LlamaConfig {
  int64_t layers = 0, dim = 0, heads = 0, kvHeads = 0, ffn = 0, vocab = 0;
  int64_t seq = 0, batch = 1;
  /// Mistral's sliding_window: query i sees keys i - window < j <= i; 0
  /// for none (full causal attention).
  int64_t window = 0;
  double ropeTheta = 10000.0, normEps = 1e-6, initStd = 0.02;
  bool tiedHead = false;
  RopeScalingConfig ropeScaling;
  /// The head size (Hugging Face's head_dim): 0 for dim / heads. Qwen3's
  /// differs (128 at hidden 2560 and 32 heads, say): the q projection is
  /// then heads x headDim wide, not dim.
  int64_t headDim = 0;
  /// Qwen2's biases on q, k and v (fused into self_attn.qkv_proj.b; o_proj
  /// has none).
  bool qkvBias = false;
  /// o_proj's bias (attention_bias true in a llama or qwen3 config: q, k,
  /// v and o all have biases).
  bool oBias = false;
  /// Qwen3's q_norm and k_norm: RMSNorm per q and k head before rope.
  bool qkNorm = false;
  /// Mixtral's and Qwen3-MoE's experts in place of the MLP (`ffn` is then
  /// 0: no layer has a dense MLP; DeepSeek-V3's first layers keep one).
  MoeConfig moe;
  int64_t headSize() const { return headDim ? headDim : dim / heads; }
};

/// A classifier: `layers` linear layers with ReLU between them.
struct MLPConfig {
  int64_t layers = 3, width = 64, inFeatures = 64, classes = 10, batch = 8;
};

/// Builds the parameters and `@forward` (no units: fsdp-wrap forms them).
mlir::OwningOpRef<mlir::ModuleOp> buildGPT2(mlir::MLIRContext &context,
                                            const GPT2Config &config,
                                            mlir::Type elementType);
/// Llama as Hugging Face's LlamaForCausalLM: token embedding, pre-norm
/// blocks of rotary grouped-query attention and a SwiGLU MLP, no biases,
/// a final RMSNorm and an untied head (or tied).
mlir::OwningOpRef<mlir::ModuleOp> buildLlama(mlir::MLIRContext &context,
                                             const LlamaConfig &config,
                                             mlir::Type elementType);
mlir::OwningOpRef<mlir::ModuleOp> buildMLP(mlir::MLIRContext &context,
                                           const MLPConfig &config,
                                           mlir::Type elementType);

} // namespace fsdp_gen

#endif // FSDP_TOOLS_FSDP_GEN_MODELBUILDER_H
