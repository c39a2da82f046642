//===- SizeCheck.cpp - the sizes of a model must fit int64 ----------------===//
//
// The sizes below mirror the tensors ModelBuilder.cpp creates; a size is a
// product (or sum of products) of option values that remembers which
// options it grows with, so that the error names exactly those.
//
//===----------------------------------------------------------------------===//

#include "SizeCheck.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/ADT/Twine.h"
#include "llvm/Support/CheckedArithmetic.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/FormatVariadic.h"

#include <limits>

using namespace fsdp_gen;

namespace {
/// An element count or byte size computed from option values; `value` is
/// empty once it has overflowed int64.
struct Size {
  Size(int64_t constant) : value(constant) {}
  static Size option(llvm::StringRef name, int64_t value) {
    Size size(value);
    size.options.push_back({name, value});
    return size;
  }

  std::optional<int64_t> value;
  /// The options the size depends on (name as the user wrote it, "--dim"
  /// or a config.json key, and value), in the order they were first used.
  llvm::SmallVector<std::pair<llvm::StringRef, int64_t>, 4> options;
};

Size combine(const Size &a, const Size &b,
             std::optional<int64_t> (*op)(int64_t, int64_t)) {
  Size result(0);
  result.value = a.value && b.value ? op(*a.value, *b.value) : std::nullopt;
  result.options = a.options;
  for (const auto &option : b.options)
    if (!llvm::is_contained(result.options, option))
      result.options.push_back(option);
  return result;
}

Size operator*(const Size &a, const Size &b) {
  return combine(a, b, llvm::checkedMul<int64_t>);
}
Size operator+(const Size &a, const Size &b) {
  return combine(a, b, llvm::checkedAdd<int64_t>);
}

/// "--dim 64 and --heads 4": the options a size grows with.
std::string optionNames(const Size &size) {
  std::string names;
  for (auto [i, option] : llvm::enumerate(size.options)) {
    if (i > 0)
      names += i + 1 == size.options.size() ? " and " : ", ";
    names += (option.first + " " + llvm::Twine(option.second)).str();
  }
  return names;
}

/// Records the first size that does not fit, with a message naming its
/// options and what it is the size of.
class Checker {
public:
  /// A step's activations (the backward keeps them) and one rank's whole
  /// memory at world size 1: the training state, the activations and
  /// their gradients.
  void requireStep(const Size &state, const Size &activations) {
    requireBytes("the forward's activations (the backward keeps them)",
                 activations);
    requireBytes("one rank's memory at world size 1 (training state, "
                 "activations and their gradients)",
                 state + Size(2) * activations);
  }
  void requireBytes(llvm::StringRef what, const Size &bytes) {
    if (error || bytes.value)
      return;
    std::string names = optionNames(bytes);
    bool one = bytes.options.size() == 1;
    error = (names + (one ? " is too large: " : " are too large together: ") +
             what + " would take more than " +
             llvm::Twine(std::numeric_limits<int64_t>::max()) +
             " bytes, the most the compiler can count (int64)")
                .str();
  }
  /// One dimension a kernel takes (a GEMM's width, a row's length): at
  /// most 2^31 - 1, as BLAS and the CUDA grids take them as int (the
  /// kernels' shape rules, `<= INT`, refuse more).
  void requireDim(llvm::StringRef what, const Size &dim) {
    constexpr int64_t kMaxDim = std::numeric_limits<int32_t>::max();
    if (error || (dim.value && *dim.value <= kMaxDim))
      return;
    std::string names = optionNames(dim);
    error = (names + (dim.options.size() == 1 ? " is" : " are") +
             " too large: " + what + " would be " +
             (dim.value ? llvm::Twine(*dim.value).str() : "past int64") +
             ", past " + llvm::Twine(kMaxDim) +
             ", the most a kernel's dimension can be (BLAS and CUDA take "
             "them as int)")
                .str();
  }
  /// A tensor of `elements` elements of `elementBytes` bytes each.
  void requireTensor(llvm::StringRef what, const Size &elements,
                     int64_t elementBytes) {
    requireBytes(what, elements * elementBytes);
  }

  std::optional<std::string> error;
};

/// "19.9 GB" or "512.0 MB".
std::string formatBytes(double bytes) {
  return bytes >= 1e9 ? llvm::formatv("{0:f1} GB", bytes / 1e9).str()
                      : llvm::formatv("{0:f1} MB", bytes / 1e6).str();
}

/// The generated IR, `layers` (the option or key `name`) of `opsPerLayer`
/// ops and `fixedOps` others, must stay within kMaxOps.
std::optional<std::string> checkOps(llvm::StringRef name, int64_t layers,
                                    llvm::StringRef what, int64_t opsPerLayer,
                                    int64_t fixedOps) {
  int64_t most = (kMaxOps - fixedOps) / opsPerLayer;
  if (layers <= most)
    return std::nullopt;
  double ops = double(layers) * double(opsPerLayer) + double(fixedOps);
  return llvm::formatv("{0} {1} is too large: its IR ({2} ops, {3} per {4}) "
                       "would take about {5} of fsdp-gen's memory and "
                       "several times that in fsdp-opt; fsdp-gen builds at "
                       "most {6} ops ({7}): {8} {9}",
                       name, layers, llvm::format("%.0f", ops), opsPerLayer,
                       what.drop_back(), formatBytes(ops * kBytesPerOp),
                       kMaxOps, formatBytes(double(kMaxOps * kBytesPerOp)),
                       most, what)
      .str();
}

/// A vocabulary's ids are i32 (the token and target tensors).
std::optional<std::string> checkVocab(llvm::StringRef name, int64_t vocab) {
  if (vocab <= kMaxVocab)
    return std::nullopt;
  return (name + " " + llvm::Twine(vocab) +
          " is too large: token ids are i32, so a vocabulary has at most " +
          llvm::Twine(kMaxVocab) + " entries")
      .str();
}
} // namespace

SizeNames fsdp_gen::gpt2ConfigNames(bool seqGiven) {
  SizeNames n;
  n.layers = "n_layer", n.dim = "n_embd", n.heads = "n_head";
  n.vocab = "vocab_size", n.positions = "n_positions";
  if (!seqGiven)
    n.seq = "n_positions";
  return n;
}

SizeNames fsdp_gen::llamaConfigNames(bool seqGiven) {
  SizeNames n;
  n.layers = "num_hidden_layers", n.dim = "hidden_size";
  n.heads = "num_attention_heads", n.kvHeads = "num_key_value_heads";
  n.ffn = "intermediate_size", n.vocab = "vocab_size";
  if (!seqGiven)
    n.seq = "max_position_embeddings";
  return n;
}

std::optional<std::string> fsdp_gen::checkSizes(const GPT2Config &c, int64_t eb,
                                                const SizeNames &n) {
  // Per block: 12 params and their loads, 2 layer norms, 4 linears,
  // attention, gelu, 2 adds, the unit, its compute and yield; around them
  // the ends' params, loads and ops, @root's unit and the function.
  if (auto error = checkOps(n.layers, c.layers, "blocks", 37, 21))
    return error;
  Size L = Size::option(n.layers, c.layers), C = Size::option(n.dim, c.dim),
       H = Size::option(n.heads, c.heads), V = Size::option(n.vocab, c.vocab),
       T = Size::option(n.seq, c.seq), B = Size::option(n.batch, c.batch);
  Checker check;
  // Parameters; the others of a block (norms, biases, the C x C and
  // C x 4C projections) are no larger than the two weights checked.
  check.requireTensor("the token table wte (vocab x dim elements)", V * C, eb);
  Size positions =
      c.positions > c.seq ? Size::option(n.positions, c.positions) : T;
  check.requireTensor("the position table wpe (positions x dim elements)",
                      positions * C, eb);
  check.requireTensor("a block's weight attn.qkv.w (3 dim x dim elements)",
                      Size(3) * C * C, eb);
  check.requireTensor("a block's weight mlp.fc.w (4 dim x dim elements)",
                      Size(4) * C * C, eb);
  // Activations; layer_norm statistics (batch x seq, f32) are no larger
  // than the token ids.
  check.requireTensor("the token ids (batch x seq i32 elements)", B * T, 4);
  check.requireTensor("a block's activations (batch x seq x 4 dim elements)",
                      B * T * Size(4) * C, eb);
  check.requireTensor("the attention probabilities (batch x heads x seq x "
                      "seq elements)",
                      B * H * T * T, eb);
  check.requireTensor("the logits (batch x seq x vocab elements)", B * T * V,
                      eb);
  // Whole-model totals. A unit's flat parameter is at most all of them.
  Size params = V * C + positions * C + L * (Size(12) * C * C + Size(13) * C) +
                Size(2) * C;
  Size state = Size(4) * params * eb;
  check.requireBytes("the parameters with their gradients and two AdamW "
                     "moments (4 x (vocab dim + positions dim + layers (12 "
                     "dim^2 + 13 dim) + 2 dim) elements)",
                     state);
  // Every value of the forward, which the backward keeps: per block
  // 18 batch x seq x dim values, the attention probabilities and four
  // f32 statistics of batch x seq; around the blocks the embedding, the
  // final norm (with statistics), the logits and the two id tensors.
  Size BT = B * T, BTC = BT * C;
  Size activations =
      (BTC * Size(2) + BT * V + L * (Size(18) * BTC + B * H * T * T)) * eb +
      (L * Size(4) * BT + Size(4) * BT) * Size(4);
  check.requireStep(state, activations);
  check.requireDim("the MLP's width (4 dim)", Size(4) * C);
  if (check.error)
    return check.error;
  return checkVocab(n.vocab, c.vocab);
}

std::optional<std::string> fsdp_gen::checkSizes(const MLPConfig &c,
                                                int64_t eb) {
  // Per layer: 2 params and their loads, a linear, a ReLU, the unit, its
  // compute and yield; the function, its return and the loss.
  if (auto error = checkOps("--layers", c.layers, "layers", 9, 3))
    return error;
  Size L = Size::option("--layers", c.layers),
       W = Size::option("--width", c.width),
       I = Size::option("--in-features", c.inFeatures),
       K = Size::option("--classes", c.classes),
       B = Size::option("--batch", c.batch);
  Checker check;
  Size params(0);
  if (c.layers == 1) {
    check.requireTensor("the weight layers.0.w (classes x in-features "
                        "elements)",
                        K * I, eb);
    params = K * I + K;
  } else {
    check.requireTensor("the weight layers.0.w (width x in-features elements)",
                        W * I, eb);
    check.requireTensor("a hidden weight (width x width elements)", W * W, eb);
    check.requireTensor("the last weight (classes x width elements)", K * W,
                        eb);
    // The middle layers: layers - 2 of them, written so that it stays a
    // product of options.
    params = W * I + W + K * W + K + (L + Size(-2)) * (W * W + W);
  }
  check.requireTensor("the input (batch x in-features elements)", B * I, eb);
  check.requireTensor("a hidden activation (batch x width elements)", B * W,
                      eb);
  check.requireTensor("the logits (batch x classes elements)", B * K, eb);
  Size state = Size(4) * params * eb;
  check.requireBytes("the parameters with their gradients and two AdamW "
                     "moments",
                     state);
  // The input, a linear and a ReLU result per hidden layer, the logits.
  Size activations = B * I + B * K;
  if (c.layers > 1)
    activations = activations + Size(2) * (L + Size(-1)) * B * W;
  activations = activations * eb;
  check.requireStep(state, activations);
  check.requireDim("the width", W);
  check.requireDim("the input's width", I);
  check.requireDim("the classes", K);
  return check.error;
}

/// The ops fsdp-gen builds per Llama block. 29: 7 params and their loads,
/// 2 RMS norms, 5 linears, rope, attention, swiglu, 2 adds, the unit, its
/// compute and yield; around them the ends' and the function. Qwen2's qkv
/// bias adds a param and its load (o's bias another), Qwen3's q_norm and
/// k_norm two of each and the qk_norm. A mixture of experts in place of
/// the MLP: 4 params and loads, the router's linear (and its cast),
/// router, sort, permute, 3 grouped linears, swiglu and combine for the
/// MLP's 3 of each and swiglu; DeepSeek-V3's shared expert and selection
/// bias, an MLP's 10 and 2 more; the balancing statistics 1.
static int64_t llamaOpsPerBlock(const LlamaConfig &c) {
  const MoeConfig &m = c.moe;
  return 29 + (c.qkvBias ? 2 : 0) + (c.oBias ? 2 : 0) + (c.qkNorm ? 5 : 0) +
         (m.experts ? 9 + (m.sharedExperts ? 11 : 0) +
                          (m.selectionBias ? 2 : 0) + (m.auxLoss ? 1 : 0)
                    : 0);
}

/// A mixture of experts' tensors (docs/moe.md): the E stacked experts and
/// the shared ones, each token's k choices as P rows through them.
static void requireExperts(Checker &check, const MoeConfig &m, Size C, Size P,
                           int64_t eb) {
  Size experts(m.experts + m.sharedExperts), Fe(m.expertFfn);
  check.requireTensor("a block's stacked experts (experts x expert width x "
                      "dim elements)",
                      experts * Fe * C, eb);
  check.requireTensor("a block's routed rows (batch x seq x experts per "
                      "token x expert width elements)",
                      P * (Fe + C), eb);
  check.requireDim("the routed pairs (batch x seq x experts per token)", P);
}

std::optional<std::string>
fsdp_gen::checkSizes(const LlamaConfig &c, int64_t eb, const SizeNames &n) {
  if (auto error =
          checkOps(n.layers, c.layers, "blocks", llamaOpsPerBlock(c), 19))
    return error;
  Size L = Size::option(n.layers, c.layers), C = Size::option(n.dim, c.dim),
       H = Size::option(n.heads, c.heads),
       K = Size::option(n.kvHeads, c.kvHeads), F = Size::option(n.ffn, c.ffn),
       V = Size::option(n.vocab, c.vocab), T = Size::option(n.seq, c.seq),
       B = Size::option(n.batch, c.batch);
  // The head size: C / H (at most C, so K x C bounds the kv projections),
  // or head_dim (a size of its own); q is H heads of it (C when C / H).
  Size hs =
      c.headDim ? Size::option(n.headDim, c.headDim) : Size(c.dim / c.heads);
  Size kv = K * hs, q = c.headDim ? H * hs : C;
  // The experts (docs/moe.md): E stacked SwiGLUs of width Fe (and the
  // shared ones), each token's k choices as P = B T k rows.
  const MoeConfig &m = c.moe;
  Size E(m.experts + m.sharedExperts), Fe(m.expertFfn),
      P = B * T * Size(m.topK);
  Checker check;
  check.requireTensor("the token table embed_tokens.w (vocab x dim elements)",
                      V * C, eb);
  requireExperts(check, m, C, P, eb);
  check.requireTensor("a block's qkv_proj.w ((heads + 2 kv-heads) x head "
                      "size x dim elements)",
                      (q + Size(2) * kv) * C, eb);
  check.requireTensor("a block's gate_proj.w (ffn-dim x dim elements)", F * C,
                      eb);
  check.requireTensor("the token ids (batch x seq i32 elements)", B * T, 4);
  check.requireTensor("a block's MLP activations (batch x seq x ffn-dim "
                      "elements)",
                      B * T * F, eb);
  check.requireTensor("a block's qkv (batch x seq x (heads + 2 kv-heads) x "
                      "head size elements)",
                      B * T * (q + Size(2) * kv), eb);
  check.requireTensor("the attention probabilities (batch x heads x seq x "
                      "seq elements)",
                      B * H * T * T, eb);
  check.requireTensor("the logits (batch x seq x vocab elements)", B * T * V,
                      eb);
  // Per block: q and o, k and v, gate, up and down, two norm gains; the
  // table, the head (unless tied) and the final norm.
  Size block = Size(2) * q * C + Size(2) * kv * C + Size(3) * C * F + E * C +
               Size(3) * E * Fe * C + Size(2) * C +
               (c.qkvBias ? q + Size(2) * kv : Size(0)) +
               (c.oBias ? C : Size(0)) + (c.qkNorm ? Size(2) * hs : Size(0));
  Size params = L * block + Size(c.tiedHead ? 1 : 2) * V * C + C;
  Size state = Size(4) * params * eb;
  check.requireBytes("the parameters with their gradients and two AdamW "
                     "moments",
                     state);
  // Every value of the forward: per block some 8 batch x seq x dim values
  // (norms, attention, residuals), qkv twice (projected and rotated), the
  // MLP's three ffn-wide values and the probabilities; f32 statistics; the
  // embedding, the final norm and the logits.
  Size BT = B * T, BTC = BT * C;
  Size activations =
      (BTC * Size(2) + BT * V +
       L * (Size(8) * BTC + Size(c.qkNorm ? 3 : 2) * BT * (q + Size(2) * kv) +
            Size(3) * BT * F + B * H * T * T + BT * E +
            P * (Size(3) * Fe + Size(2) * C))) *
          eb +
      (L * Size(3) * BT + Size(2) * BT) * Size(4);
  check.requireStep(state, activations);
  // Then each dimension a kernel takes (sizes that fit int64 but not
  // int).
  check.requireDim("the width", C);
  check.requireDim("the MLP's width", F);
  check.requireDim("qkv_proj's width ((heads + 2 kv-heads) x head size)",
                   q + Size(2) * kv);
  check.requireDim("o_proj's input width (heads x head size)", q);
  if (check.error)
    return check.error;
  return checkVocab(n.vocab, c.vocab);
}
