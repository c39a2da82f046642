//===- ModelBuilder.cpp - fsdp-dialect models built from a config ---------===//

#include "ModelBuilder.h"

#include "fsdp/Dialect/FSDP/IR/FSDP.h"
#include "fsdp/runtime/RopeScaling.h"

#include "mlir/IR/Builders.h"

#include <cassert>
#include <cmath>

using namespace mlir;
using namespace mlir::fsdp;

namespace {
/// Declares parameters at the top of the module and emits @forward's body.
class ForwardBuilder {
public:
  ForwardBuilder(MLIRContext &context, Type elementType)
      : builder(&context), loc(builder.getUnknownLoc()),
        elementType(elementType), module(ModuleOp::create(loc)) {}

  RankedTensorType tensor(ArrayRef<int64_t> shape, Type element = {}) {
    return RankedTensorType::get(shape, element ? element : elementType);
  }

  /// Declares `name` and returns a load of it at the current point in
  /// @forward. Rank-1 parameters (biases, norm gains) get no weight decay.
  /// A parameter; `selectionBias` >= 0 makes it a router's selection
  /// bias updated at that rate (fsdp.param's selection_bias).
  Value param(StringRef name, ArrayRef<int64_t> shape, InitAttr init,
              double selectionBias = -1) {
    RankedTensorType type = tensor(shape);
    {
      OpBuilder::InsertionGuard guard(builder);
      builder.setInsertionPoint(forward);
      ParamOp::create(builder, loc, name, type, init,
                      /*no_weight_decay=*/shape.size() == 1,
                      selectionBias >= 0
                          ? builder.getF64FloatAttr(selectionBias)
                          : FloatAttr());
    }
    return LoadOp::create(builder, loc, type,
                          FlatSymbolRefAttr::get(builder.getContext(), name));
  }

  InitAttr normal(double stddev) {
    return InitAttr::get(builder.getContext(), InitKind::Normal, stddev);
  }
  InitAttr zeros() {
    return InitAttr::get(builder.getContext(), InitKind::Zeros);
  }
  InitAttr ones() {
    return InitAttr::get(builder.getContext(), InitKind::Ones);
  }

  /// Starts @forward with the given inputs; returns its block arguments.
  Block::BlockArgListType begin(ArrayRef<Type> inputs) {
    builder.setInsertionPointToEnd(module->getBody());
    auto scalar = RankedTensorType::get({}, builder.getF32Type()); // loss
    forward = func::FuncOp::create(builder, loc, "forward",
                                   builder.getFunctionType(inputs, {scalar}));
    forward->setAttr(FSDPDialect::kForwardAttrName, builder.getUnitAttr());
    body = forward.addEntryBlock();
    builder.setInsertionPointToEnd(body);
    return body->getArguments();
  }

  /// Declares `<prefix>w` and `<prefix>b` (in that order) and applies them.
  Value linear(Value x, const std::string &prefix, ArrayRef<int64_t> shape,
               InitAttr init) {
    Value w = param(prefix + "w", shape, init);
    Value b = param(prefix + "b", {shape[0]}, zeros());
    return linear(x, w, b);
  }

  /// Declares `<prefix>w` (ones) and `<prefix>b` (zeros) and normalises.
  Value layerNorm(Value x, const std::string &prefix, int64_t channels) {
    Value w = param(prefix + "w", {channels}, ones());
    Value b = param(prefix + "b", {channels}, zeros());
    return layerNorm(x, w, b);
  }

  Value linear(Value x, Value w, Value b) {
    auto xt = llvm::cast<RankedTensorType>(x.getType());
    auto wt = llvm::cast<RankedTensorType>(w.getType());
    SmallVector<int64_t> shape(xt.getShape().drop_back());
    shape.push_back(wt.getDimSize(0));
    return LinearOp::create(builder, loc, tensor(shape), x, w, b);
  }

  Value layerNorm(Value x, Value w, Value b) {
    auto xt = llvm::cast<RankedTensorType>(x.getType());
    auto stats = tensor(xt.getShape().drop_back(), builder.getF32Type());
    return LayerNormOp::create(builder, loc, xt, stats, stats, x, w, b,
                               builder.getF32FloatAttr(1.0e-5f))
        .getResult();
  }

  OwningOpRef<ModuleOp> finish(Value loss) {
    func::ReturnOp::create(builder, loc, loss);
    return std::move(module);
  }

  OpBuilder builder;
  Location loc;
  Type elementType;
  OwningOpRef<ModuleOp> module;
  func::FuncOp forward;
  Block *body = nullptr;
};
} // namespace

OwningOpRef<ModuleOp> fsdp_gen::buildGPT2(MLIRContext &context,
                                          const GPT2Config &c, Type element) {
  ForwardBuilder f(context, element);
  Type i32 = f.builder.getI32Type();
  auto args = f.begin(
      {f.tensor({c.batch, c.seq}, i32), f.tensor({c.batch, c.seq}, i32)});
  Value tokens = args[0], targets = args[1];
  // GPT-2's initialisation: std initializer_range (0.02), residual
  // projections scaled by 1/sqrt(2 * layers) so the residual stream's
  // variance stays bounded.
  InitAttr weight = f.normal(c.initStd);
  InitAttr residual = f.normal(c.initStd / std::sqrt(2.0 * double(c.layers)));
  int64_t C = c.dim;

  Value wte = f.param("wte", {c.vocab, C}, weight);
  Value wpe = f.param("wpe", {c.positions ? c.positions : c.seq, C}, weight);
  Value x = EmbeddingOp::create(f.builder, f.loc, f.tensor({c.batch, c.seq, C}),
                                tokens, wte, wpe);
  for (int64_t l = 0; l < c.layers; ++l) {
    std::string p = "h." + std::to_string(l) + ".";
    Value h = f.layerNorm(x, p + "ln_1.", C);
    Value qkv = f.linear(h, p + "attn.qkv.", {3 * C, C}, weight);
    Value attn = AttentionOp::create(
                     f.builder, f.loc, f.tensor({c.batch, c.seq, C}),
                     f.tensor({c.batch, c.heads, c.seq, c.seq}), qkv,
                     f.builder.getI64IntegerAttr(c.heads),
                     /*impl=*/AttentionImplAttr(),
                     /*kv_heads=*/IntegerAttr(), /*window=*/IntegerAttr())
                     .getResult();
    Value proj = f.linear(attn, p + "attn.proj.", {C, C}, residual);
    x = AddOp::create(f.builder, f.loc, x, proj);
    h = f.layerNorm(x, p + "ln_2.", C);
    Value fc = f.linear(h, p + "mlp.fc.", {4 * C, C}, weight);
    Value gelu = GeluOp::create(f.builder, f.loc, fc);
    Value out = f.linear(gelu, p + "mlp.proj.", {C, 4 * C}, residual);
    x = AddOp::create(f.builder, f.loc, x, out);
  }
  x = f.layerNorm(x, "ln_f.", C);
  // The head is tied to the token table: a second load of @wte.
  Value head = LoadOp::create(f.builder, f.loc, wte.getType(),
                              FlatSymbolRefAttr::get(&context, "wte"));
  Value logits = f.linear(x, head, Value());
  // The loss is f32 whatever the model's type (the kernel's rule).
  Value loss = CrossEntropyOp::create(
      f.builder, f.loc, RankedTensorType::get({}, f.builder.getF32Type()),
      logits, targets);
  return f.finish(loss);
}

/// Llama's rope over the fused q, k and v with the config's scaling;
/// attributes a kind does not read are left out (their defaults). yarn's
/// correction range is computed here, in double as transformers does
/// (RopeScaling.h).
static Value llamaRope(ForwardBuilder &f, const fsdp_gen::LlamaConfig &c,
                       Value qkv) {
  const fsdp_gen::RopeScalingConfig &s = c.ropeScaling;
  auto op =
      RopeOp::create(f.builder, f.loc, qkv.getType(), qkv,
                     f.builder.getI64IntegerAttr(c.heads),
                     f.builder.getI64IntegerAttr(c.kvHeads),
                     f.builder.getF32FloatAttr(float(c.ropeTheta)),
                     RopeScalingAttr(), FloatAttr(), FloatAttr(), FloatAttr(),
                     IntegerAttr(), FloatAttr(), FloatAttr(), FloatAttr());
  auto f64 = [&](double v) { return f.builder.getF64FloatAttr(v); };
  RopeScaling kind = *symbolizeRopeScaling(s.type);
  if (kind == RopeScaling::Default)
    return op;
  op.setScalingAttr(RopeScalingAttr::get(f.builder.getContext(), kind));
  op.setFactorAttr(f64(s.factor));
  if (kind == RopeScaling::Llama3) {
    op.setLowFreqFactorAttr(f64(s.lowFreqFactor));
    op.setHighFreqFactorAttr(f64(s.highFreqFactor));
    op.setOriginalMaxPositionsAttr(f.builder.getI64IntegerAttr(s.originalMax));
  }
  if (kind == RopeScaling::Yarn) {
    double low = 0, high = 0;
    ::fsdp::plan::yarnCorrectionRange(s.betaFast, s.betaSlow, c.headSize(),
                                      c.ropeTheta, double(s.originalMax),
                                      s.truncate, low, high);
    op.setAttentionFactorAttr(f64(s.attentionFactor));
    op.setCorrectionLowAttr(f64(low));
    op.setCorrectionHighAttr(f64(high));
  }
  return op;
}

/// One layer's attention sublayer on the normed `h`, up to o_proj's output:
/// fused q, k, v (Qwen2's biases), Qwen3's per-head q/k norm, rope,
/// attention (Mistral's window), o_proj. The head size is head_dim where
/// the config gives one (Qwen3): the attention's output is heads x hs
/// wide, which o_proj takes back to C.
static Value llamaAttention(ForwardBuilder &f, const fsdp_gen::LlamaConfig &c,
                            Value h, const std::string &p, InitAttr weight) {
  Type f32 = f.builder.getF32Type();
  int64_t C = c.dim, hs = c.headSize(), qWidth = c.heads * hs,
          qkvWidth = qWidth + 2 * c.kvHeads * hs;
  IntegerAttr heads = f.builder.getI64IntegerAttr(c.heads);
  IntegerAttr kvHeads = f.builder.getI64IntegerAttr(c.kvHeads);
  // Qwen2's q, k and v biases: one bias of the fused rows (zeros, as
  // Hugging Face initialises them).
  Value qkvW = f.param(p + "self_attn.qkv_proj.w", {qkvWidth, C}, weight);
  Value qkvB = c.qkvBias
                   ? f.param(p + "self_attn.qkv_proj.b", {qkvWidth}, f.zeros())
                   : Value();
  Value qkv = f.linear(h, qkvW, qkvB);
  if (c.qkNorm) {
    // Qwen3: RMSNorm over each q and k head, then rope.
    Value qn = f.param(p + "self_attn.q_norm.w", {hs}, f.ones());
    Value kn = f.param(p + "self_attn.k_norm.w", {hs}, f.ones());
    qkv = QkNormOp::create(f.builder, f.loc, qkv.getType(),
                           f.tensor({c.batch, c.seq, c.heads + c.kvHeads}, f32),
                           qkv, qn, kn, heads, kvHeads,
                           f.builder.getF32FloatAttr(float(c.normEps)))
              .getResult();
  }
  // Mistral's sliding window; none (no attribute) for a Llama. A window
  // of seq or more is kept: the kernels run it as full causal attention.
  IntegerAttr window =
      c.window > 0 ? f.builder.getI64IntegerAttr(c.window) : IntegerAttr();
  Value attn =
      AttentionOp::create(f.builder, f.loc, f.tensor({c.batch, c.seq, qWidth}),
                          f.tensor({c.batch, c.heads, c.seq, c.seq}),
                          llamaRope(f, c, qkv), heads, AttentionImplAttr(),
                          kvHeads, window)
          .getResult();
  Value oW = f.param(p + "self_attn.o_proj.w", {C, qWidth}, weight);
  Value oB =
      c.oBias ? f.param(p + "self_attn.o_proj.b", {C}, f.zeros()) : Value();
  return f.linear(attn, oW, oB);
}

/// Llama's MLP on `h`: down(silu(gate(h)) * up(h)), linears of width
/// `ffn` without bias named PREFIX{gate,up,down}_proj.w.
static Value swigluMlp(ForwardBuilder &f, Value h, const std::string &prefix,
                       int64_t C, int64_t ffn, InitAttr weight) {
  auto proj = [&](Value x, const char *name, int64_t out, int64_t in) {
    return f.linear(x, f.param(prefix + name, {out, in}, weight), Value());
  };
  Value gate = proj(h, "gate_proj.w", ffn, C);
  Value up = proj(h, "up_proj.w", ffn, C);
  Value act = SwiGluOp::create(f.builder, f.loc, gate.getType(), gate, up);
  return proj(act, "down_proj.w", C, ffn);
}

/// A mixture-of-experts block in place of the MLP (docs/moe.md), on the
/// normed `h` (B x S x C): the router (`gate`, a linear to E logits, f32
/// from there), the sort of the (token, choice) pairs by expert, the rows
/// in expert order through each expert's SwiGLU as three grouped linears
/// over stacked weights (E x F x C, E x F x C, E x C x F: transformers 5's
/// in-memory layout; a checkpoint's per-expert tensors map to their rows),
/// and the weighted combine. Names follow the family's checkpoint:
/// Mixtral's block_sparse_moe.{gate, experts.w1, w3, w2}, Qwen3-MoE's
/// mlp.{gate, experts.gate_proj, up_proj, down_proj}.
static Value moeBlock(ForwardBuilder &f, const fsdp_gen::LlamaConfig &c,
                      Value h, const std::string &p, InitAttr weight,
                      Value &auxStats) {
  const fsdp_gen::MoeConfig &m = c.moe;
  Type f32 = f.builder.getF32Type(), i32 = f.builder.getI32Type();
  int64_t C = c.dim, E = m.experts, K = m.topK, F = m.expertFfn,
          P = c.batch * c.seq * K;
  bool mixtral = m.family == "mixtral";
  std::string block = p + (mixtral ? "block_sparse_moe." : "mlp.");
  Value logits =
      f.linear(h, f.param(block + "gate.w", {E, C}, weight), Value());
  // DeepSeek-V3's selection bias: zeros, f32, no weight decay, updated by
  // the sign of its experts' load at bias_update_speed (docs/moe.md).
  Value bias = m.selectionBias ? f.param(block + "gate.e_score_correction_bias",
                                         {E}, f.zeros(), m.biasUpdateRate)
                               : Value();
  // The router computes in f32, as transformers' softmax(dtype=float) does.
  if (llvm::cast<RankedTensorType>(logits.getType()).getElementType() != f32)
    logits = CastOp::create(f.builder, f.loc,
                            f.tensor({c.batch, c.seq, E}, f32), logits);
  auto router = MoeRouterOp::create(
      f.builder, f.loc, f.tensor({c.batch, c.seq, K}, f32),
      f.tensor({c.batch, c.seq, K}, i32), logits, bias,
      MoeScoringAttr::get(f.builder.getContext(),
                          *symbolizeMoeScoring(m.scoring)),
      f.builder.getBoolAttr(m.normTopK),
      m.routedScale == 1.0 ? FloatAttr()
                           : f.builder.getF64FloatAttr(m.routedScale));
  // The load-balancing statistics, summed over the layers (their loss is
  // added after the last: moe_aux_loss).
  if (m.auxLoss)
    auxStats = MoeAuxStatsOp::create(f.builder, f.loc, f.tensor({2, E}, f32),
                                     logits, router.getExperts(), auxStats);
  auto pairs = f.tensor({c.batch, c.seq, K}, i32);
  auto sort =
      MoeSortOp::create(f.builder, f.loc, pairs, pairs, f.tensor({E + 1}, i32),
                        router.getExperts(), f.builder.getI64IntegerAttr(E));
  Value rows = MoePermuteOp::create(f.builder, f.loc, f.tensor({P, C}), h,
                                    sort.getOrder());
  auto grouped = [&](Value in, const char *name, int64_t out, int64_t width) {
    Value w =
        f.param(block + "experts." + name + ".w", {E, out, width}, weight);
    return MoeGroupedLinearOp::create(f.builder, f.loc, f.tensor({P, out}), in,
                                      w, sort.getOffsets())
        .getResult();
  };
  Value gate = grouped(rows, mixtral ? "w1" : "gate_proj", F, C);
  Value up = grouped(rows, mixtral ? "w3" : "up_proj", F, C);
  Value act = SwiGluOp::create(f.builder, f.loc, gate.getType(), gate, up);
  Value down = grouped(act, mixtral ? "w2" : "down_proj", C, F);
  Value y = MoeCombineOp::create(f.builder, f.loc, h.getType(), down,
                                 router.getWeights(), sort.getPosition());
  if (m.sharedExperts == 0)
    return y;
  // DeepSeek-V3's shared experts: one SwiGLU over every token.
  return AddOp::create(f.builder, f.loc, y,
                       swigluMlp(f, h, block + "shared_experts.", C,
                                 m.sharedExperts * F, weight));
}

OwningOpRef<ModuleOp> fsdp_gen::buildLlama(MLIRContext &context,
                                           const LlamaConfig &c, Type element) {
  ForwardBuilder f(context, element);
  Type i32 = f.builder.getI32Type(), f32 = f.builder.getF32Type();
  auto args = f.begin(
      {f.tensor({c.batch, c.seq}, i32), f.tensor({c.batch, c.seq}, i32)});
  // Hugging Face's initialisation: every weight normal(initializer_range),
  // norm gains one. Names follow a checkpoint's (q, k and v fused).
  InitAttr weight = f.normal(c.initStd);
  int64_t C = c.dim;
  auto rmsNorm = [&](Value x, const std::string &name) {
    Value w = f.param(name, {C}, f.ones());
    auto xt = llvm::cast<RankedTensorType>(x.getType());
    return RmsNormOp::create(f.builder, f.loc, xt,
                             f.tensor(xt.getShape().drop_back(), f32), x, w,
                             f.builder.getF32FloatAttr(float(c.normEps)))
        .getResult();
  };
  Value wte = f.param("embed_tokens.w", {c.vocab, C}, weight);
  Value x = EmbeddingOp::create(f.builder, f.loc, f.tensor({c.batch, c.seq, C}),
                                args[0], wte, Value());
  Value auxStats;
  for (int64_t l = 0; l < c.layers; ++l) {
    std::string p = "layers." + std::to_string(l) + ".";
    Value h = rmsNorm(x, p + "input_layernorm.w");
    x = AddOp::create(f.builder, f.loc, x, llamaAttention(f, c, h, p, weight));
    h = rmsNorm(x, p + "post_attention_layernorm.w");
    Value mlp = c.moe.isMoeLayer(l)
                    ? moeBlock(f, c, h, p, weight, auxStats)
                    : swigluMlp(f, h, p + "mlp.", C, c.ffn, weight);
    x = AddOp::create(f.builder, f.loc, x, mlp);
  }
  x = rmsNorm(x, "norm.w");
  Value head =
      c.tiedHead
          ? LoadOp::create(f.builder, f.loc, wte.getType(),
                           FlatSymbolRefAttr::get(&context, "embed_tokens.w"))
                .getResult()
          : f.param("lm_head.w", {c.vocab, C}, weight);
  Value logits = f.linear(x, head, Value());
  Value loss = CrossEntropyOp::create(
      f.builder, f.loc, RankedTensorType::get({}, f32), logits, args[1]);
  // transformers adds router_aux_loss_coef times the balancing loss
  // (output_router_logits).
  if (auxStats)
    loss = MoeAuxLossOp::create(f.builder, f.loc, loss.getType(), auxStats,
                                loss, f.builder.getI64IntegerAttr(c.moe.topK),
                                f.builder.getF64FloatAttr(c.moe.auxLossCoef));
  return f.finish(loss);
}

OwningOpRef<ModuleOp> fsdp_gen::buildMLP(MLIRContext &context,
                                         const MLPConfig &c, Type element) {
  ForwardBuilder f(context, element);
  auto args = f.begin({f.tensor({c.batch, c.inFeatures}),
                       f.tensor({c.batch}, f.builder.getI32Type())});
  Value x = args[0];
  int64_t in = c.inFeatures;
  for (int64_t l = 0; l < c.layers; ++l) {
    bool last = l + 1 == c.layers;
    int64_t out = last ? c.classes : c.width;
    std::string p = "layers." + std::to_string(l) + ".";
    // Kaiming-style std for ReLU layers keeps activations at unit scale.
    InitAttr init = f.normal(std::sqrt(2.0 / double(in)));
    x = f.linear(x, p, {out, in}, init);
    if (!last)
      x = ReluOp::create(f.builder, f.loc, x);
    in = out;
  }
  Value loss = CrossEntropyOp::create(
      f.builder, f.loc, RankedTensorType::get({}, f.builder.getF32Type()), x,
      args[1]);
  return f.finish(loss);
}

double fsdp_gen::yarnAttentionFactor(double factor, double mscale,
                                     double mscaleAllDim) {
  if (mscale != 0 && mscaleAllDim != 0)
    return ::fsdp::plan::yarnMscale(factor, mscale) /
           ::fsdp::plan::yarnMscale(factor, mscaleAllDim);
  return ::fsdp::plan::yarnMscale(factor);
}
