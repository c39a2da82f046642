//===- fsdp-gen.cpp - print models as fsdp-dialect MLIR -------------------===//
//
//   fsdp-gen mlp --layers 3 --width 64 --batch 8
//   fsdp-gen gpt2 --layers 2 --dim 64 --heads 4 --vocab 256 --seq 64 --batch 4
//   fsdp-gen llama --layers 4 --dim 128 --heads 4 --kv-heads 2 --ffn-dim 344
//                  --vocab 256 --seq 64 --batch 4 [--rope-theta] [--norm-eps]
//                  [--sliding-window N]
//   fsdp-gen mistral ... (llama's options; --sliding-window defaults to
//                  4096, transformers' MistralConfig default)
//   fsdp-gen --preset mistral-7b [--batch 1 --seq 4096]
//   fsdp-gen --preset gpt2-124m [--batch 4 --seq 64]
//   fsdp-gen --preset llama3-8b [--batch 1 --seq 2048]
//   fsdp-gen --preset llama3.1-8b (llama3 rope scaling; or fsdp-gen llama
//            --rope-scaling llama3 --rope-factor 8 ...)
//   fsdp-gen --config config.json [--batch 4 --seq 64] [--describe]
//
// The model is built with the dialect's builders, wrapped into units by the
// same fsdp-wrap pass fsdp-opt runs (one unit per block, the rest in @root;
// a Llama's embedding and head in units of their own, as torchtitan wraps
// it), verified, and only then written: bad options never leave a partial
// file.
//
//===----------------------------------------------------------------------===//

#include "HFConfig.h"
#include "ModelBuilder.h"
#include "SizeCheck.h"

#include "fsdp/Dialect/FSDP/IR/FSDP.h"
#include "fsdp/Dialect/FSDP/IR/ModelConfig.h"
#include "fsdp/Dialect/FSDP/Transforms/Passes.h"

#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/Verifier.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Support/FileUtilities.h"
#include "llvm/ADT/StringSwitch.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/ToolOutputFile.h"
#include "llvm/Support/raw_ostream.h"

#include <cmath>
#include <cstdio>
#include <optional>

using namespace mlir;
namespace cl = llvm::cl;

namespace {
cl::OptionCategory genCategory("fsdp-gen options");

cl::opt<std::string> modelKind(cl::Positional,
                               cl::desc("<mlp|gpt2|llama|mistral>"),
                               cl::cat(genCategory));
cl::opt<std::string> preset(
    "preset",
    cl::desc("Published architecture: llama-13b, llama2-7b, llama3-8b, "
             "llama3.1-8b, llama3.1-70b, mistral-7b, qwen2.5-7b, qwen3-8b; or "
             "GPT-shaped: gpt2-124m, llama-13b-shape, gpt3-175b-shape "
             "(explicit options override its values)"),
    cl::cat(genCategory));
cl::opt<int64_t> layers(
    "layers",
    cl::desc("Number of blocks (gpt2, llama) or linear layers (mlp); the IR "
             "is bounded to 1048576 ops (at most 28339 gpt2 blocks, 36157 "
             "llama blocks, 116508 mlp layers)"),
    cl::cat(genCategory));
cl::opt<int64_t> dim("dim", cl::desc("gpt2, llama: model width C"),
                     cl::cat(genCategory));
cl::opt<int64_t> heads("heads", cl::desc("gpt2, llama: attention heads"),
                       cl::cat(genCategory));
cl::opt<int64_t> kvHeads("kv-heads",
                         cl::desc("llama: key/value heads (default: --heads; "
                                  "fewer is grouped-query attention)"),
                         cl::cat(genCategory));
cl::opt<int64_t> ffnDim("ffn-dim", cl::desc("llama: SwiGLU width"),
                        cl::cat(genCategory));
cl::opt<double> ropeTheta("rope-theta",
                          cl::desc("llama: rotary base (default 10000)"),
                          cl::cat(genCategory));
cl::opt<std::string> ropeScaling(
    "rope-scaling",
    cl::desc("llama: rope scaling, as Hugging Face's rope_type: default, "
             "linear, llama3 or yarn (with --rope-factor; llama3 also takes "
             "--rope-low-freq-factor, --rope-high-freq-factor and "
             "--rope-original-max-positions, yarn the last)"),
    cl::cat(genCategory));
cl::opt<double> ropeFactor("rope-factor",
                           cl::desc("llama: the rope scaling's factor"),
                           cl::cat(genCategory));
cl::opt<double>
    ropeLowFreqFactor("rope-low-freq-factor",
                      cl::desc("llama3 rope scaling: low_freq_factor "
                               "(default 1)"),
                      cl::cat(genCategory));
cl::opt<double>
    ropeHighFreqFactor("rope-high-freq-factor",
                       cl::desc("llama3 rope scaling: high_freq_factor "
                                "(default 4)"),
                       cl::cat(genCategory));
cl::opt<int64_t> ropeOriginalMax(
    "rope-original-max-positions",
    cl::desc("llama3, yarn rope scaling: original_max_position_embeddings "
             "(default: the preset's, else --seq)"),
    cl::cat(genCategory));
cl::opt<double> normEps("norm-eps",
                        cl::desc("llama: RMSNorm epsilon (default 1e-6)"),
                        cl::cat(genCategory));
cl::opt<int64_t> slidingWindow(
    "sliding-window",
    cl::desc("llama, mistral: attention's sliding window, Mistral's: query i "
             "sees keys i - N < j <= i; 0 for none (llama's default; "
             "mistral's is 4096, transformers' MistralConfig default)"),
    cl::value_desc("N"), cl::cat(genCategory));
cl::opt<int64_t> vocab("vocab", cl::desc("gpt2, llama: vocabulary size"),
                       cl::cat(genCategory));
cl::opt<int64_t> seq("seq", cl::desc("gpt2, llama: sequence length"),
                     cl::cat(genCategory));
cl::opt<int64_t> batch("batch", cl::desc("Global batch size"),
                       cl::cat(genCategory));
cl::opt<int64_t> width("width", cl::desc("mlp: hidden width"),
                       cl::cat(genCategory));
cl::opt<int64_t> inFeatures("in-features", cl::desc("mlp: input features"),
                            cl::cat(genCategory));
cl::opt<int64_t> classes("classes", cl::desc("mlp: output classes"),
                         cl::cat(genCategory));
cl::opt<std::string>
    dtype("dtype",
          cl::desc("Compute type: f32, or bf16 (mixed precision: f32 master "
                   "parameters, and fsdp.param_dtype = bf16 on the module, "
                   "which fsdp-opt's --fsdp-train-pipeline takes as "
                   "param-dtype=bf16)"),
          cl::init("f32"), cl::cat(genCategory));
cl::opt<bool> noUnits("no-units",
                      cl::desc("Emit a flat @forward without FSDP units"),
                      cl::cat(genCategory));
cl::opt<std::string> configPath(
    "config",
    cl::desc("A Hugging Face config.json (model_type gpt2, llama, "
             "mistral, qwen2, qwen3, mixtral or qwen3_moe): the same model; "
             "--seq and --batch set the step's shape"),
    cl::value_desc("file"), cl::cat(genCategory));
cl::opt<bool>
    describe("describe",
             cl::desc("With --config: print the architecture and its parameter "
                      "count (and active per token, with experts), emit "
                      "nothing"),
             cl::cat(genCategory));
cl::opt<std::string> outputFilename("o", cl::desc("Output file (default: -)"),
                                    cl::value_desc("filename"), cl::init("-"),
                                    cl::cat(genCategory));

[[noreturn]] void fail(const llvm::Twine &message) {
  llvm::errs() << "fsdp-gen: error: " << message << "\n";
  std::exit(1);
}

/// `value` as errors print it (%g).
std::string gText(double value) {
  char text[32];
  std::snprintf(text, sizeof(text), "%g", value);
  return text;
}

/// Whether `value` rounds to a positive, finite f32 (the IR's attributes
/// of rope's theta and the norms' epsilon are f32).
bool isPositiveF32(double value) {
  float rounded = float(value);
  return value > 0 && rounded > 0.0f && std::isfinite(rounded);
}

/// Takes an explicit option over the preset's value; every size must be
/// positive.
void apply(cl::opt<int64_t> &option, int64_t &field) {
  if (option.getNumOccurrences()) {
    if (option <= 0)
      fail("--" + option.ArgStr + " must be positive, got " +
           llvm::Twine(int64_t(option)));
    field = option;
  }
}

void rejectOptionsOf(StringRef kind, ArrayRef<cl::opt<int64_t> *> options) {
  for (cl::opt<int64_t> *option : options)
    if (option->getNumOccurrences())
      fail("--" + option->ArgStr + " does not apply to " + kind + " models");
}

/// The published Llamas (their Hugging Face configs, which
/// test/fsdp-gen/Inputs ships): seq is max_position_embeddings.
std::optional<fsdp_gen::LlamaConfig> llamaPreset(StringRef name) {
  fsdp_gen::LlamaConfig c;
  c.batch = 1;
  if (name == "llama-13b") { // LLaMA 1 13B
    c.layers = 40, c.dim = 5120, c.heads = c.kvHeads = 40, c.ffn = 13824;
    c.vocab = 32000, c.seq = 2048, c.normEps = 1e-6;
  } else if (name == "llama2-7b") {
    c.layers = 32, c.dim = 4096, c.heads = c.kvHeads = 32, c.ffn = 11008;
    c.vocab = 32000, c.seq = 4096, c.normEps = 1e-5;
  } else if (name == "llama3-8b") {
    c.layers = 32, c.dim = 4096, c.heads = 32, c.kvHeads = 8, c.ffn = 14336;
    c.vocab = 128256, c.seq = 8192, c.normEps = 1e-5, c.ropeTheta = 500000;
  } else if (name == "llama3.1-8b" || name == "llama3.1-70b") {
    // Llama 3.1: Llama 3's architecture, a 131072-position context and
    // the llama3 rope scaling of its config.json.
    if (name == "llama3.1-8b")
      c.layers = 32, c.dim = 4096, c.heads = 32, c.ffn = 14336;
    else
      c.layers = 80, c.dim = 8192, c.heads = 64, c.ffn = 28672;
    c.kvHeads = 8, c.vocab = 128256, c.seq = 131072, c.normEps = 1e-5;
    c.ropeTheta = 500000;
    c.ropeScaling.type = "llama3";
    c.ropeScaling.factor = 8, c.ropeScaling.lowFreqFactor = 1;
    c.ropeScaling.highFreqFactor = 4, c.ropeScaling.originalMax = 8192;
  } else if (name == "mistral-7b") { // Mistral 7B v0.3: no sliding window
    c.layers = 32, c.dim = 4096, c.heads = 32, c.kvHeads = 8, c.ffn = 14336;
    c.vocab = 32768, c.seq = 32768, c.normEps = 1e-5, c.ropeTheta = 1e6;
  } else if (name == "qwen2.5-7b") { // Qwen2: q, k and v biases
    c.layers = 28, c.dim = 3584, c.heads = 28, c.kvHeads = 4, c.ffn = 18944;
    c.vocab = 152064, c.seq = 131072, c.normEps = 1e-6, c.ropeTheta = 1e6;
    c.qkvBias = true;
  } else if (name == "qwen3-8b") { // Qwen3: q_norm, k_norm, head_dim 128
    c.layers = 36, c.dim = 4096, c.heads = 32, c.kvHeads = 8, c.ffn = 12288;
    c.vocab = 151936, c.seq = 40960, c.normEps = 1e-6, c.ropeTheta = 1e6;
    c.headDim = 128, c.qkNorm = true;
  } else if (name == "mixtral-8x7b") { // its config.json's sizes
    c.layers = 32, c.dim = 4096, c.heads = 32, c.kvHeads = 8, c.ffn = 0;
    c.vocab = 32000, c.seq = 32768, c.normEps = 1e-5, c.ropeTheta = 1e6;
    c.moe.family = "mixtral", c.moe.experts = 8, c.moe.topK = 2;
    c.moe.expertFfn = 14336, c.moe.normTopK = true;
  } else if (name == "qwen3-30b-a3b") { // its config.json's sizes
    c.layers = 48, c.dim = 2048, c.heads = 32, c.kvHeads = 4, c.ffn = 0;
    c.vocab = 151936, c.seq = 40960, c.normEps = 1e-6, c.ropeTheta = 1e6;
    c.headDim = 128, c.qkNorm = true;
    c.moe.family = "qwen3_moe", c.moe.experts = 128, c.moe.topK = 8;
    c.moe.expertFfn = 768, c.moe.normTopK = true;
  } else if (name == "deepseek-v3-style" || name == "deepseek-v3-tiny") {
    // DeepSeek-V3's mixture of experts (sigmoid router with a selection
    // bias, top-k renormalised then scaled by 2.5, one shared expert, the
    // first 3 blocks dense) over grouped-query attention in place of its
    // multi-head latent attention (not modelled), and a tiny one of the
    // same form for tests.
    fsdp_gen::MoeConfig &m = c.moe;
    m.family = "deepseek_v3", m.scoring = "sigmoid", m.normTopK = true;
    m.selectionBias = true, m.routedScale = 2.5, m.sharedExperts = 1;
    if (name == "deepseek-v3-style") {
      c.layers = 61, c.dim = 7168, c.heads = 128, c.kvHeads = 8;
      c.headDim = 128, c.ffn = 18432, c.vocab = 129280, c.seq = 4096;
      m.experts = 256, m.topK = 8, m.expertFfn = 2048, m.denseLayers = 3;
    } else {
      c.layers = 3, c.dim = 64, c.heads = 4, c.kvHeads = 2, c.ffn = 128;
      c.vocab = 256, c.seq = 64, c.batch = 4;
      m.experts = 8, m.topK = 2, m.expertFfn = 32, m.denseLayers = 1;
    }
  } else {
    return std::nullopt;
  }
  return c;
}

std::optional<fsdp_gen::GPT2Config> presetConfig(StringRef name) {
  fsdp_gen::GPT2Config c;
  if (name == "gpt2-124m")
    c = {/*layers=*/12, /*dim=*/768, /*heads=*/12, /*vocab=*/50257,
         /*seq=*/1024,  /*batch=*/4};
  else if (name == "llama-13b-shape")
    c = {40, 5120, 40, 32000, 2048, 1};
  else if (name == "gpt3-175b-shape")
    c = {96, 12288, 96, 50257, 2048, 1};
  else
    return std::nullopt;
  return c;
}

/// Rejects the Llama-only options for other models.
void rejectLlamaOptions(StringRef kind) {
  rejectOptionsOf(kind, {&kvHeads, &ffnDim, &slidingWindow});
  for (cl::opt<double> *option : {&ropeTheta, &normEps, &ropeFactor,
                                  &ropeLowFreqFactor, &ropeHighFreqFactor})
    if (option->getNumOccurrences())
      fail("--" + option->ArgStr + " does not apply to " + kind + " models");
  rejectOptionsOf(kind, {&ropeOriginalMax});
  if (ropeScaling.getNumOccurrences())
    fail("--rope-scaling does not apply to " + kind + " models");
}

/// Shape rules of a Llama, whatever gave its sizes (`source` names it).
void checkLlamaShape(const fsdp_gen::LlamaConfig &c, const Twine &source) {
  if (c.headDim == 0 && c.dim % c.heads != 0)
    fail(source + ": the heads (" + Twine(c.heads) +
         ") must divide the width (" + Twine(c.dim) + ")");
  if (c.heads % c.kvHeads != 0)
    fail(source + ": the kv heads (" + Twine(c.kvHeads) +
         ") must divide the heads (" + Twine(c.heads) + ")");
  if (c.headSize() % 2 != 0)
    fail(source + ": the head size (" + Twine(c.headSize()) +
         ") must be even for rotary embeddings");
}

/// `module` with its Hugging Face config attached (fsdp.hf_config): the
/// plan carries it, and fsdp-run --export DIR writes it as config.json.
OwningOpRef<ModuleOp> withHFConfig(OwningOpRef<ModuleOp> module,
                                   const std::string &config) {
  // None for a model transformers has no class of (a DeepSeek-V3-style
  // preset: its attention is not DeepSeek's).
  if (!config.empty())
    (*module)->setAttr(fsdp::kHFConfigAttrName,
                       StringAttr::get(module->getContext(), config));
  return module;
}

/// The rope scaling options over the preset's (or the default) scaling.
void applyRopeScaling(fsdp_gen::LlamaConfig &c) {
  fsdp_gen::RopeScalingConfig &r = c.ropeScaling;
  if (ropeScaling.getNumOccurrences()) {
    if (ropeScaling != "default" && ropeScaling != "linear" &&
        ropeScaling != "llama3" && ropeScaling != "yarn")
      fail("--rope-scaling must be default, linear, llama3 or yarn, got '" +
           ropeScaling + "'");
    if (ropeScaling != r.type)
      r = fsdp_gen::RopeScalingConfig(), r.type = ropeScaling;
  }
  auto positive = [](cl::opt<double> &option, double &to) {
    if (!option.getNumOccurrences())
      return;
    if (!(option > 0) || !std::isfinite(option))
      fail("--" + option.ArgStr + " must be positive, got " + gText(option));
    to = option;
  };
  auto reads = [&](cl::opt<double> &option,
                   std::initializer_list<StringRef> kinds) {
    if (option.getNumOccurrences() && !llvm::is_contained(kinds, r.type))
      fail("--" + option.ArgStr + " does not apply to --rope-scaling " +
           r.type);
  };
  reads(ropeFactor, {"linear", "llama3", "yarn"});
  reads(ropeLowFreqFactor, {"llama3"});
  reads(ropeHighFreqFactor, {"llama3"});
  if (ropeOriginalMax.getNumOccurrences() && r.type != "llama3" &&
      r.type != "yarn")
    fail("--rope-original-max-positions does not apply to --rope-scaling " +
         r.type);
  positive(ropeFactor, r.factor);
  positive(ropeLowFreqFactor, r.lowFreqFactor);
  positive(ropeHighFreqFactor, r.highFreqFactor);
  if (ropeOriginalMax.getNumOccurrences()) {
    if (ropeOriginalMax <= 0)
      fail("--rope-original-max-positions must be positive");
    r.originalMax = ropeOriginalMax;
  }
  if ((r.type == "llama3" || r.type == "yarn") && r.originalMax == 0)
    r.originalMax = c.seq;
  if (r.type == "llama3" && !(r.highFreqFactor > r.lowFreqFactor))
    fail("--rope-high-freq-factor (" + gText(r.highFreqFactor) +
         ") must exceed --rope-low-freq-factor (" + gText(r.lowFreqFactor) +
         ")");
  if (r.type == "yarn")
    r.attentionFactor = fsdp_gen::yarnAttentionFactor(r.factor);
}

/// The Llama (or Mistral: `kind` "mistral", whose window defaults to
/// transformers' 4096) the preset and the size options describe, sizes
/// checked.
OwningOpRef<ModuleOp> llamaFromOptions(MLIRContext &context, Type element,
                                       int64_t elementBytes, StringRef kind) {
  rejectOptionsOf(kind, {&width, &inFeatures, &classes});
  fsdp_gen::LlamaConfig c;
  if (!preset.empty()) {
    std::optional<fsdp_gen::LlamaConfig> fromPreset = llamaPreset(preset);
    if (!fromPreset)
      fail("unknown " + kind + " preset '" + preset +
           "', expected llama-13b, llama2-7b, llama3-8b, llama3.1-8b, "
           "llama3.1-70b, mistral-7b, qwen2.5-7b, qwen3-8b, mixtral-8x7b, "
           "qwen3-30b-a3b, deepseek-v3-style or deepseek-v3-tiny");
    c = *fromPreset;
  } else {
    // A small Llama by default, like gpt2's defaults.
    c.layers = 2, c.dim = 64, c.heads = c.kvHeads = 4, c.ffn = 172;
    c.vocab = 256, c.seq = 64, c.batch = 4;
    if (kind == "mistral")
      c.window = 4096;
  }
  if (slidingWindow.getNumOccurrences()) {
    if (slidingWindow < 0)
      fail("--sliding-window must be 0 (none) or a positive key count, got " +
           Twine(int64_t(slidingWindow)));
    c.window = slidingWindow;
  }
  bool kvGiven = kvHeads.getNumOccurrences();
  apply(layers, c.layers);
  apply(dim, c.dim);
  apply(heads, c.heads);
  if (!kvGiven && heads.getNumOccurrences())
    c.kvHeads = c.heads;
  apply(kvHeads, c.kvHeads);
  apply(ffnDim, c.ffn);
  apply(vocab, c.vocab);
  apply(seq, c.seq);
  apply(batch, c.batch);
  if (ropeTheta.getNumOccurrences()) {
    if (!isPositiveF32(ropeTheta))
      fail("--rope-theta must be positive and finite as an f32 (the IR "
           "keeps it in one), got " +
           gText(ropeTheta));
    c.ropeTheta = ropeTheta;
  }
  applyRopeScaling(c);
  if (normEps.getNumOccurrences()) {
    if (!isPositiveF32(normEps))
      fail("--norm-eps must be positive and finite as an f32 (the IR keeps "
           "it in one), got " +
           gText(normEps));
    c.normEps = normEps;
  }
  checkLlamaShape(c, kind);
  if (std::optional<std::string> error = fsdp_gen::checkSizes(c, elementBytes))
    fail(*error);
  return withHFConfig(fsdp_gen::buildLlama(context, c, element),
                      fsdp_gen::hfConfigJson(c));
}

/// The GPT-2 the preset and the size options describe, sizes checked.
OwningOpRef<ModuleOp> gpt2FromOptions(MLIRContext &context, Type element,
                                      int64_t elementBytes) {
  rejectOptionsOf("gpt2", {&width, &inFeatures, &classes});
  rejectLlamaOptions("gpt2");
  fsdp_gen::GPT2Config config;
  if (!preset.empty()) {
    std::optional<fsdp_gen::GPT2Config> fromPreset = presetConfig(preset);
    if (!fromPreset)
      fail("unknown gpt2 preset '" + preset +
           "', expected gpt2-124m, llama-13b-shape or gpt3-175b-shape");
    config = *fromPreset;
  }
  apply(layers, config.layers);
  apply(dim, config.dim);
  apply(heads, config.heads);
  apply(vocab, config.vocab);
  apply(seq, config.seq);
  apply(batch, config.batch);
  if (config.dim % config.heads != 0)
    fail("--heads (" + llvm::Twine(config.heads) + ") must divide --dim (" +
         llvm::Twine(config.dim) + ")");
  if (std::optional<std::string> error =
          fsdp_gen::checkSizes(config, elementBytes))
    fail(*error);
  return withHFConfig(fsdp_gen::buildGPT2(context, config, element),
                      fsdp_gen::hfConfigJson(config));
}

/// " sliding window N" or " no sliding window" for a Mistral or a
/// Mixtral; nothing for a Llama.
std::string windowText(const fsdp_gen::HFModel &m) {
  if (m.modelType != "mistral" && m.modelType != "mixtral")
    return "";
  return m.llama.window ? ", sliding window " + std::to_string(m.llama.window)
                        : ", no sliding window";
}

/// "8 experts of ffn 14336 (top 2, ...)": a mixture of experts' router.
std::string moeText(const fsdp_gen::MoeConfig &e) {
  std::string text =
      std::to_string(e.experts) + " experts of ffn " +
      std::to_string(e.expertFfn) + " (top " + std::to_string(e.topK) + ", " +
      e.scoring + " router" + (e.normTopK ? ", top-k renormalized" : "") +
      (e.selectionBias ? ", selection bias" : "") +
      (e.routedScale != 1.0 ? ", routed scale " + gText(e.routedScale)
                            : std::string()) +
      (e.sharedExperts ? ", " + std::to_string(e.sharedExperts) +
                             " shared expert" + (e.sharedExperts > 1 ? "s" : "")
                       : std::string()) +
      (e.denseLayers
           ? ", first " + std::to_string(e.denseLayers) + " layers dense"
           : std::string());
  // The balancing loss joins the training loss only with
  // output_router_logits (off in the published configs).
  return text +
         (e.auxLoss ? ", aux loss weight " + gText(e.auxLossCoef)
                    : std::string(", aux loss off")) +
         ")";
}

/// Prints what `m` describes, with its parameter count (and, for a mixture
/// of experts, the parameters one token runs through).
void describeModel(const fsdp_gen::HFModel &m, const std::string &source) {
  llvm::outs() << source << ": " << m.modelType << ", ";
  if (m.modelType == "gpt2") {
    const fsdp_gen::GPT2Config &c = m.gpt2;
    std::optional<int64_t> P = fsdp_gen::countParameters(c);
    if (!P)
      fail(configPath + ": the parameter count exceeds int64");
    llvm::outs() << c.layers << " layers, dim " << c.dim << ", " << c.heads
                 << " heads, vocab " << c.vocab << ", " << c.positions
                 << " positions, tied head: " << *P << " parameters\n";
    return;
  }
  const fsdp_gen::LlamaConfig &c = m.llama;
  std::optional<int64_t> P = fsdp_gen::countParameters(c);
  if (!P)
    fail(configPath + ": the parameter count exceeds int64");
  llvm::outs() << c.layers << " layers, dim " << c.dim << ", " << c.heads
               << " heads, " << c.kvHeads << " kv heads";
  if (c.headDim && c.headDim * c.heads != c.dim) // not hidden / heads
    llvm::outs() << ", head dim " << c.headDim;
  if (c.qkvBias)
    llvm::outs() << (c.oBias ? ", q/k/v/o biases" : ", q/k/v biases");
  if (c.qkNorm)
    llvm::outs() << ", q/k norms";
  if (c.moe.experts)
    llvm::outs() << ", " << moeText(c.moe);
  else
    llvm::outs() << ", ffn " << c.ffn;
  llvm::outs() << ", vocab " << c.vocab << ", rope theta " << c.ropeTheta;
  const fsdp_gen::RopeScalingConfig &r = c.ropeScaling;
  if (r.type != "default") {
    llvm::outs() << ", rope scaling " << r.type << " (factor "
                 << gText(r.factor);
    if (r.type == "llama3")
      llvm::outs() << ", low_freq_factor " << gText(r.lowFreqFactor)
                   << ", high_freq_factor " << gText(r.highFreqFactor);
    if (r.type == "llama3" || r.type == "yarn")
      llvm::outs() << ", original_max_position_embeddings " << r.originalMax;
    if (r.type == "yarn")
      llvm::outs() << ", attention_factor " << gText(r.attentionFactor);
    llvm::outs() << ")";
  }
  llvm::outs() << ", norm eps " << c.normEps << windowText(m)
               << (c.tiedHead ? ", tied head: " : ", untied head: ") << *P
               << " parameters";
  if (c.moe.experts) {
    std::optional<int64_t> active = fsdp_gen::countActiveParameters(c);
    if (!active) // not above *P: a bug if it overflows where *P did not
      fail(configPath + ": the active parameter count exceeds int64");
    llvm::outs() << ", " << *active << " active per token";
  }
  llvm::outs() << "\n";
}

/// The model a config.json describes, --seq and --batch applied; `isLlama`
/// says which family it is.
OwningOpRef<ModuleOp> modelFromConfig(MLIRContext &context, Type element,
                                      int64_t elementBytes, bool &isLlama) {
  if (!preset.empty() || !modelKind.empty())
    fail("--config names the model: no model kind or --preset with it");
  rejectOptionsOf("--config", {&layers, &dim, &heads, &vocab, &width,
                               &inFeatures, &classes});
  rejectLlamaOptions("--config");
  fsdp_gen::HFModel m;
  std::string error;
  if (!fsdp_gen::readHFConfig(configPath, m, error))
    fail(error);
  for (const std::string &note : m.notes)
    llvm::errs() << "fsdp-gen: note: " << configPath << ": " << note << "\n";
  if (describe) {
    describeModel(m, configPath);
    std::exit(0);
  }
  isLlama = m.modelType != "gpt2"; // llama, mistral, qwen2, qwen3
  if (isLlama) {
    fsdp_gen::LlamaConfig &c = m.llama;
    int64_t positions = c.seq;
    apply(seq, c.seq);
    apply(batch, c.batch);
    if (c.seq > positions)
      fail("--seq " + llvm::Twine(c.seq) +
           " exceeds the config's max_position_embeddings (" +
           llvm::Twine(positions) + ")");
    checkLlamaShape(c, configPath);
    if (std::optional<std::string> error = fsdp_gen::checkSizes(
            c, elementBytes,
            fsdp_gen::llamaConfigNames(seq.getNumOccurrences() > 0)))
      fail(configPath + ": " + *error);
    return withHFConfig(fsdp_gen::buildLlama(context, c, element), m.json);
  }
  fsdp_gen::GPT2Config &c = m.gpt2;
  apply(seq, c.seq);
  apply(batch, c.batch);
  if (c.seq > c.positions)
    fail("--seq " + llvm::Twine(c.seq) + " exceeds the config's n_positions (" +
         llvm::Twine(c.positions) + ")");
  if (std::optional<std::string> error = fsdp_gen::checkSizes(
          c, elementBytes,
          fsdp_gen::gpt2ConfigNames(seq.getNumOccurrences() > 0)))
    fail(configPath + ": " + *error);
  return withHFConfig(fsdp_gen::buildGPT2(context, c, element), m.json);
}

/// The MLP the size options describe, sizes checked.
OwningOpRef<ModuleOp> mlpFromOptions(MLIRContext &context, Type element,
                                     int64_t elementBytes) {
  if (!preset.empty())
    fail("--preset names transformers and does not apply to mlp");
  rejectOptionsOf("mlp", {&dim, &heads, &vocab, &seq});
  rejectLlamaOptions("mlp");
  fsdp_gen::MLPConfig config;
  apply(layers, config.layers);
  apply(width, config.width);
  apply(inFeatures, config.inFeatures);
  apply(classes, config.classes);
  apply(batch, config.batch);
  if (std::optional<std::string> error =
          fsdp_gen::checkSizes(config, elementBytes))
    fail(*error);
  return fsdp_gen::buildMLP(context, config, element);
}

/// Prints the module to -o (stdout by default), kept only when whole.
void writeModule(ModuleOp module) {
  std::string errorMessage;
  std::unique_ptr<llvm::ToolOutputFile> output =
      openOutputFile(outputFilename, &errorMessage);
  if (!output)
    fail(errorMessage);
  module->print(output->os());
  output->os() << "\n";
  output->os().flush();
  if (output->os().has_error())
    fail("could not write '" + outputFilename + "'");
  output->keep();
}
} // namespace

int main(int argc, char **argv) {
  llvm::InitLLVM init(argc, argv);
  cl::HideUnrelatedOptions(genCategory);
  cl::ParseCommandLineOptions(argc, argv,
                              "fsdp-gen: print models as fsdp-dialect MLIR\n");

  std::string kind = modelKind;
  if (kind.empty() && !preset.empty()) {
    if (!llamaPreset(preset) && !presetConfig(preset))
      fail("unknown preset '" + preset +
           "', expected llama-13b, llama2-7b, llama3-8b, llama3.1-8b, "
           "llama3.1-70b, mistral-7b, qwen2.5-7b, qwen3-8b, mixtral-8x7b, "
           "qwen3-30b-a3b, deepseek-v3-style, deepseek-v3-tiny, "
           "gpt2-124m, llama-13b-shape or gpt3-175b-shape");
    kind = !llamaPreset(preset)                ? "gpt2"
           : StringRef(preset) == "mistral-7b" ? "mistral"
                                               : "llama";
  }
  if (!configPath.empty()) {
    kind = "config";
  } else if (describe) {
    // A preset of the Llama form (Mixtral's, Qwen3-MoE's and the
    // DeepSeek-V3-style mixtures of experts among them) describes itself.
    std::optional<fsdp_gen::LlamaConfig> c = llamaPreset(preset);
    if (!c)
      fail("--describe needs --config or a llama-form --preset");
    fsdp_gen::HFModel m;
    m.modelType = c->moe.experts ? c->moe.family : "llama";
    m.llama = *c;
    describeModel(m, "preset " + preset);
    return 0;
  } else if (kind != "mlp" && kind != "gpt2" && kind != "llama" &&
             kind != "mistral")
    fail(kind.empty() ? llvm::Twine("name a model: mlp, gpt2, llama or "
                                    "mistral (or --preset)")
                      : "unknown model '" + kind +
                            "', expected mlp, gpt2, llama or mistral");

  MLIRContext context;
  context.loadDialect<fsdp::FSDPDialect>();
  // The parameters are f32 whatever --dtype says: bf16 is mixed precision
  // over f32 master weights (docs/mixed-precision.md), which the module
  // asks fsdp-opt for.
  Type computeType = llvm::StringSwitch<Type>(dtype)
                         .Case("f32", Float32Type::get(&context))
                         .Case("bf16", BFloat16Type::get(&context))
                         .Default(Type());
  if (!computeType)
    fail("unknown --dtype '" + dtype + "', expected f32 or bf16");
  Type element = Float32Type::get(&context);
  int64_t elementBytes = fsdp::getElementSizeInBytes(element);

  bool isLlama = kind == "llama" || kind == "mistral";
  OwningOpRef<ModuleOp> module =
      kind == "config"
          ? modelFromConfig(context, element, elementBytes, isLlama)
      : kind == "gpt2" ? gpt2FromOptions(context, element, elementBytes)
      : isLlama        ? llamaFromOptions(context, element, elementBytes, kind)
                       : mlpFromOptions(context, element, elementBytes);
  if (!noUnits) {
    // A Llama is wrapped as torchtitan wraps it: the token embedding and
    // the final norm with the head in units of their own. GPT-2's head is
    // tied to its token table, so its ends stay together in @root.
    fsdp::FsdpWrapPassOptions wrap;
    wrap.splitEnds = isLlama;
    PassManager pm(&context);
    pm.addPass(fsdp::createFsdpWrapPass(wrap));
    if (failed(pm.run(*module)))
      fail("wrapping the generated model into units failed");
  }
  if (!computeType.isF32())
    (*module)->setAttr(fsdp::kParamDtypeAttrName, TypeAttr::get(computeType));
  if (failed(verify(*module)))
    fail("the generated model does not verify (a bug in fsdp-gen)");
  writeModule(*module);
  return 0;
}
