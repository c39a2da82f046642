//===- HFConfig.cpp - models from a Hugging Face config.json --------------===//
//
// nlohmann-json parses (LLVM builds without exceptions: its no-exception
// mode, and every value's type checked before it is read). Each model type
// has a table of the keys it reads; keys known not to change the
// architecture are accepted, anything else is refused by name.
//
//===----------------------------------------------------------------------===//

#include "KeyReader.h"

#include <cerrno>
#include <cmath>
#include <cstring>
#include <fcntl.h>
#include <limits>
#include <set>
#include <sys/stat.h>
#include <unistd.h>

namespace fsdp_gen {
namespace {

void readGPT2(KeyReader &r, HFModel &m) {
  GPT2Config &c = m.gpt2;
  r.positive("n_layer", c.layers);
  r.positive("n_embd", c.dim);
  r.positive("n_head", c.heads);
  r.positive("vocab_size", c.vocab);
  r.positive("n_positions", c.positions);
  int64_t ctx = c.positions;
  r.positive("n_ctx", ctx, false);
  if (ctx != c.positions)
    r.bad("n_ctx", "differs from n_positions");
  c.seq = c.positions;
  if (c.heads > 0 && c.dim % c.heads != 0)
    r.bad("n_head", "must divide n_embd: " + std::to_string(c.dim) +
                        " is not a multiple of " + std::to_string(c.heads));
  // n_inner's only value is 4 n_embd; an n_embd that large is refused by
  // the size check (and 4 n_embd would not be an int64).
  if (c.dim <= std::numeric_limits<int64_t>::max() / 4)
    r.only("n_inner", json(4 * c.dim), /*nullOk=*/true);
  else
    r.ignore("n_inner");
  // What our GPT-2 is (llm.c's): tanh GELU, eps 1e-5, a tied head,
  // attention scaled by 1/sqrt(head size) and nothing else.
  r.only("activation_function", json("gelu_new"));
  r.only("layer_norm_epsilon", json(1e-5));
  r.number("initializer_range", c.initStd);
  r.only("tie_word_embeddings", json(true));
  r.only("scale_attn_weights", json(true));
  r.only("scale_attn_by_inverse_layer_idx", json(false));
  r.only("reorder_and_upcast_attn", json(false));
  r.only("add_cross_attention", json(false));
  for (const char *key :
       {"attn_pdrop", "embd_pdrop", "resid_pdrop", "summary_first_dropout"})
    r.dropout(key, m.notes);
  // GPT2DoubleHeadsModel's classification head: no part of the LM.
  for (const char *key : {"summary_activation", "summary_proj_to_labels",
                          "summary_type", "summary_use_proj"})
    r.ignore(key);
}

/// One rope_scaling / rope_parameters object being read: its members and
/// the errors, reported through the config's KeyReader under `key`.
struct RopeObject {
  KeyReader &r;
  const char *key;
  const json &v;
  std::string kind = "default";
  bool ok = true;

  /// The member `name`, null for absent or JSON null.
  const json *get(const char *name) const {
    auto it = v.find(name);
    return it == v.end() || it->is_null() ? nullptr : &*it;
  }
  void bad(const std::string &why) {
    r.bad(key, why);
    ok = false;
  }
  bool fail(const std::string &why) {
    bad(why);
    return false;
  }
  /// A positive, finite number into `to` (`required`: absent is an error;
  /// else `to` keeps its fallback).
  void number(const char *name, double &to, bool required) {
    const json *n = get(name);
    if (!n) {
      if (required)
        bad("has no '" + std::string(name) + "', which rope_type \"" + kind +
            "\" needs");
      return;
    }
    if (!n->is_number() || !(n->get<double>() > 0.0) ||
        std::isinf(n->get<double>()))
      return bad("has " + std::string(name) + " " + n->dump() +
                 ": it must be a positive number");
    to = n->get<double>();
  }
  /// A number `name` read only when present and not 0 (transformers'
  /// `beta_fast or 32`: a 0 means the fallback).
  void nonZeroNumber(const char *name, double &to) {
    if (const json *n = get(name); n && *n != json(0))
      number(name, to, false);
  }

  /// rope_type (or the older `type`) into `kind`: one fsdp-gen builds.
  bool readKind() {
    const json *type = get("rope_type"), *oldType = get("type");
    if (type && oldType && *type != *oldType)
      return fail("has rope_type " + type->dump() + " and type " +
                  oldType->dump());
    if (!type)
      type = oldType;
    if (type) {
      if (!type->is_string())
        return fail("has rope_type " + type->dump() + ": not a string");
      kind = type->get<std::string>();
    }
    if (kind != "default" && kind != "linear" && kind != "llama3" &&
        kind != "yarn")
      return fail("has rope_type \"" + kind +
                  "\"; fsdp-gen builds \"default\", \"linear\", \"llama3\" "
                  "and \"yarn\"");
    return true;
  }

  /// Every member is one `kind` takes, and partial_rotary_factor is 1.
  bool checkMembers() {
    std::set<std::string> takes = {"rope_type", "type", "rope_theta",
                                   "partial_rotary_factor"};
    if (kind != "default")
      takes.insert("factor");
    if (kind == "llama3" || kind == "yarn")
      takes.insert("original_max_position_embeddings");
    if (kind == "llama3")
      takes.insert({"low_freq_factor", "high_freq_factor"});
    if (kind == "yarn")
      takes.insert({"attention_factor", "beta_fast", "beta_slow", "mscale",
                    "mscale_all_dim", "truncate"});
    for (auto it = v.begin(); it != v.end(); ++it)
      if (!takes.count(it.key()))
        return fail("has '" + it.key() + "', which rope_type \"" + kind +
                    "\" does not take");
    if (const json *p = get("partial_rotary_factor"))
      if (!p->is_number() || p->get<double>() != 1.0)
        return fail("has partial_rotary_factor " + p->dump() +
                    "; fsdp-gen rotates whole heads only (1.0)");
    return true;
  }

  void readLlama3(RopeScalingConfig &out) {
    number("low_freq_factor", out.lowFreqFactor, true);
    number("high_freq_factor", out.highFreqFactor, true);
    if (ok && !(out.highFreqFactor > out.lowFreqFactor))
      bad("has high_freq_factor " + json(out.highFreqFactor).dump() +
          ", not above low_freq_factor " + json(out.lowFreqFactor).dump());
  }

  void readYarn(RopeScalingConfig &out) {
    nonZeroNumber("beta_fast", out.betaFast);
    nonZeroNumber("beta_slow", out.betaSlow);
    if (const json *t = get("truncate")) {
      if (!t->is_boolean())
        return bad("has truncate " + t->dump() + ": not a boolean");
      out.truncate = t->get<bool>();
    }
    double mscale = 0, mscaleAllDim = 0;
    nonZeroNumber("mscale", mscale);
    nonZeroNumber("mscale_all_dim", mscaleAllDim);
    if (get("attention_factor"))
      number("attention_factor", out.attentionFactor, false);
    else
      out.attentionFactor =
          yarnAttentionFactor(out.factor, mscale, mscaleAllDim);
  }
};

/// Reads one rope object: transformers 4.x's rope_scaling or 5.x's
/// rope_parameters (which also holds rope_theta), `key` naming it in
/// errors. `rope_type` (4.x also `type`) is default, linear, llama3 or yarn,
/// with the keys transformers' rope_init_fn reads for it
/// (modeling_rope_utils.py); anything else is refused by name.
/// original_max_position_embeddings defaults to max_position_embeddings
/// (`maxPositions`), as transformers' standardize_rope_params does.
void readRopeObject(KeyReader &r, const char *key, const json &v,
                    int64_t maxPositions, RopeScalingConfig &out,
                    const json *&theta) {
  if (!v.is_object())
    return r.bad(key, "must be an object or null, got " + v.dump());
  RopeObject rope{r, key, v};
  if (!rope.readKind() || !rope.checkMembers())
    return;
  out = RopeScalingConfig();
  out.type = rope.kind;
  theta = rope.get("rope_theta");
  if (rope.kind == "default")
    return;
  out.originalMax = maxPositions;
  if (const json *o = rope.get("original_max_position_embeddings");
      o && (rope.kind == "llama3" || rope.kind == "yarn")) {
    if (!o->is_number_integer() || o->get<int64_t>() <= 0)
      return rope.bad("has original_max_position_embeddings " + o->dump() +
                      ": it must be a positive integer");
    out.originalMax = o->get<int64_t>();
  }
  rope.number("factor", out.factor, rope.kind != "yarn");
  if (rope.kind == "yarn" && !rope.get("factor"))
    out.factor = double(maxPositions) / double(out.originalMax);
  if (rope.kind == "llama3")
    rope.readLlama3(out);
  if (rope.kind == "yarn")
    rope.readYarn(out);
}

/// Rotary embeddings' theta and scaling: transformers 4.x's top-level
/// rope_theta and rope_scaling, and 5.x's rope_parameters (which holds
/// the theta and the scaling together). Where both are given they must
/// agree.
void readRope(KeyReader &r, LlamaConfig &c) {
  r.number("rope_theta", c.ropeTheta);
  r.only("partial_rotary_factor", json(1.0));
  const json *unused = nullptr;
  const json *scaling = r.value("rope_scaling");
  RopeScalingConfig fromScaling;
  bool hasScaling = scaling && !scaling->is_null();
  if (hasScaling)
    readRopeObject(r, "rope_scaling", *scaling, c.seq, fromScaling, unused);
  c.ropeScaling = fromScaling;
  const json *params = r.value("rope_parameters");
  if (!params || params->is_null() || !r.error.empty())
    return;
  const json *theta = nullptr;
  RopeScalingConfig fromParams;
  readRopeObject(r, "rope_parameters", *params, c.seq, fromParams, theta);
  if (!r.error.empty())
    return;
  if (hasScaling && !(fromScaling == fromParams))
    return r.bad("rope_parameters", "is " + params->dump() +
                                        ", another scaling than rope_scaling " +
                                        scaling->dump());
  c.ropeScaling = fromParams;
  if (!theta)
    return;
  if (!theta->is_number() || !(theta->get<double>() > 0.0) ||
      std::isinf(float(theta->get<double>())) ||
      !(float(theta->get<double>()) > 0.0f))
    return r.bad("rope_parameters",
                 "has rope_theta " + theta->dump() +
                     ": it must be positive and finite as an f32");
  const json *top = r.value("rope_theta");
  if (top && *top != *theta)
    return r.bad("rope_parameters", "has rope_theta " + theta->dump() +
                                        ", the top-level rope_theta is " +
                                        top->dump());
  c.ropeTheta = theta->get<double>();
}

/// Mistral's and Mixtral's sliding_window: a positive key count, or null
/// for full attention. transformers' MistralConfig defaults it to 4096, so
/// a mistral config without the key has a window of 4096 (said on
/// stderr); MixtralConfig's default is null.
void readSlidingWindow(KeyReader &r, HFModel &m) {
  const json *v = r.value("sliding_window");
  if (!v && m.modelType == "mixtral")
    return;
  if (!v) {
    m.llama.window = 4096;
    m.notes.push_back("sliding_window is absent: a window of 4096 keys, "
                      "transformers' MistralConfig default");
    return;
  }
  if (v->is_null())
    return;
  if (!v->is_number_integer() || v->get<int64_t>() <= 0)
    return r.bad("sliding_window", "is " + v->dump() +
                                       ": it must be a positive integer (a "
                                       "key count) or null (none)");
  m.llama.window = v->get<int64_t>();
}

/// Qwen2's and Qwen3's sliding-window keys: `use_sliding_window` false
/// (or absent) makes `sliding_window` and `max_window_layers` unused (the
/// configs' __post_init__ sets the window to None), and `layer_types`
/// may only list full attention. A window is refused.
void readQwenWindow(KeyReader &r, const LlamaConfig &c) {
  bool window = false;
  r.boolean("use_sliding_window", window);
  if (window)
    r.bad("use_sliding_window",
          "is true; fsdp-gen builds only full attention for qwen2 and qwen3");
  r.ignore("sliding_window");
  r.ignore("max_window_layers");
  const json *types = r.value("layer_types");
  if (!types || types->is_null())
    return;
  if (!types->is_array() || int64_t(types->size()) != c.layers)
    return r.bad("layer_types", "must list one type per layer (" +
                                    std::to_string(c.layers) + ")");
  for (const json &t : *types)
    if (t != json("full_attention"))
      return r.bad("layer_types", "has " + t.dump() +
                                      "; fsdp-gen builds only "
                                      "\"full_attention\"");
}

/// Llama, and the families built as a Llama with more (`model_type`):
/// Mistral (a sliding window on every layer's attention), Qwen2 (q, k and
/// v biases) and Qwen3 (q_norm and k_norm per head, head_dim 128 unless
/// given). Mixtral's attention is Mistral's and Qwen3-MoE's Qwen3's
/// (head_dim hidden_size / heads unless given); readMoe reads their
/// experts.
void readLlama(KeyReader &r, HFModel &m) {
  LlamaConfig &c = m.llama;
  bool qwen3Moe = m.modelType == "qwen3_moe";
  bool qwen2 = m.modelType == "qwen2",
       qwen3 = m.modelType == "qwen3" || qwen3Moe;
  c.qkvBias = qwen2;
  c.qkNorm = qwen3;
  r.positive("num_hidden_layers", c.layers);
  r.positive("hidden_size", c.dim);
  r.positive("num_attention_heads", c.heads);
  c.kvHeads = c.heads;
  r.positive("num_key_value_heads", c.kvHeads, false);
  // Qwen3-MoE's intermediate_size is the dense MLP of layers without
  // experts (none here, see readMoe), so it may be left out.
  r.positive("intermediate_size", c.ffn, !qwen3Moe);
  r.positive("vocab_size", c.vocab);
  r.positive("max_position_embeddings", c.seq);
  readRope(r, c);
  r.number("rms_norm_eps", c.normEps);
  r.number("initializer_range", c.initStd);
  r.boolean("tie_word_embeddings", c.tiedHead);
  // head_dim: the head size where it is not hidden_size / heads (Qwen3's
  // default is 128; null or absent elsewhere means hidden_size / heads).
  if (qwen3 && !qwen3Moe)
    c.headDim = 128;
  if (const json *hd = r.value("head_dim"); hd && !hd->is_null()) {
    if (!hd->is_number_integer() || hd->get<int64_t>() <= 0)
      r.bad("head_dim", "must be a positive integer");
    else if (hd->get<int64_t>() % 2 != 0)
      r.bad("head_dim",
            "is " + hd->dump() + ": it must be even for rotary embeddings");
    else
      c.headDim = hd->get<int64_t>();
  }
  if (c.headDim == 0 && c.heads > 0 && c.dim % c.heads != 0)
    r.bad("num_attention_heads", "must divide hidden_size");
  else if (c.headDim == 0 && c.heads > 0 && (c.dim / c.heads) % 2 != 0)
    r.bad("num_attention_heads",
          "must leave an even head size for rotary embeddings: hidden_size " +
              std::to_string(c.dim) + " / " + std::to_string(c.heads) + " = " +
              std::to_string(c.dim / c.heads));
  if (c.kvHeads > 0 && c.heads % c.kvHeads != 0)
    r.bad("num_key_value_heads", "must divide num_attention_heads");
  r.only("hidden_act", json("silu"));
  bool mistral = m.modelType == "mistral" || m.modelType == "mixtral";
  if (qwen2) {
    r.ignore("attention_bias"); // not Qwen2's: q, k, v have biases always
  } else if (mistral) {
    r.only("attention_bias", json(false)); // MistralAttention has none
  } else {
    // Llama's and Qwen3's attention_bias: biases on q, k, v and o.
    bool bias = false;
    r.boolean("attention_bias", bias);
    c.qkvBias = c.oBias = bias;
  }
  if (qwen2 || qwen3)
    readQwenWindow(r, c);
  else if (mistral)
    readSlidingWindow(r, m);
  if (!qwen2 && !qwen3) {
    r.only("mlp_bias", json(false));
    r.only("pretraining_tp", json(1));
    // LlamaForCausalLM reads no sliding_window: one there would be ignored
    // by transformers, so it is refused rather than half-modelled.
    if (!mistral)
      r.only("sliding_window", json(nullptr), /*nullOk=*/true);
  }
  r.dropout("attention_dropout", m.notes);
  // LLaMA 1's conversions also name the context as max_sequence_length.
  if (c.seq > 0)
    r.only("max_sequence_length", json(c.seq));
}

/// One block's MLP into `out`, false on overflow: SwiGLU's gate, up and
/// down (3 C F) for a dense one; with experts, `routed` of them (3 C F_e
/// each), the router (E x C, no bias), DeepSeek-V3's shared experts (3 C
/// S F_e) and selection bias (E).
bool mlpParameters(const LlamaConfig &c, bool dense, int64_t routed,
                   int64_t &out) {
  const MoeConfig &e = c.moe;
  if (dense)
    return !__builtin_mul_overflow(c.dim, c.ffn, &out) &&
           !__builtin_mul_overflow(out, 3, &out);
  int64_t router, shared;
  return !__builtin_mul_overflow(c.dim, e.expertFfn, &out) &&
         !__builtin_mul_overflow(out, 3, &out) &&
         !__builtin_mul_overflow(out, e.sharedExperts, &shared) &&
         !__builtin_mul_overflow(out, routed, &out) &&
         !__builtin_add_overflow(out, shared, &out) &&
         !__builtin_mul_overflow(c.dim, e.experts, &router) &&
         !__builtin_add_overflow(out, router, &out) &&
         !__builtin_add_overflow(out, e.selectionBias ? e.experts : 0, &out);
}

/// The parameters of a Llama whose blocks hold `routed` experts each (of
/// a mixture of experts; unused when dense).
std::optional<int64_t> countLlama(const LlamaConfig &c, int64_t routed) {
  // Checked: a config's sizes are anyone's numbers. q and o are C x H hs
  // each (C x C when hs = C / H), k and v C x K hs each; Qwen2 adds the
  // biases of q, k and v ((H + 2K) hs), attention_bias those and o's (C),
  // Qwen3 the two head gains (2 hs).
  int64_t kv, q, dd, dkv, dff, ddense, block, dblock, all, table, total,
      extra = 0;
  // DeepSeek-V3's first layers keep a dense MLP; every layer of a dense
  // model does.
  int64_t dense =
      c.moe.experts ? std::min(c.moe.denseLayers, c.layers) : c.layers;
  if (c.heads <= 0 || __builtin_mul_overflow(c.kvHeads, c.headSize(), &kv) ||
      __builtin_mul_overflow(c.heads, c.headSize(), &q) ||
      __builtin_mul_overflow(c.dim, q, &dd) ||
      (c.qkvBias && __builtin_add_overflow(q, 2 * kv, &extra)) ||
      (c.oBias && __builtin_add_overflow(extra, c.dim, &extra)) ||
      (c.qkNorm && __builtin_add_overflow(extra, 2 * c.headSize(), &extra)) ||
      __builtin_mul_overflow(c.dim, kv, &dkv) ||
      !mlpParameters(c, /*dense=*/false, routed, dff) ||
      !mlpParameters(c, /*dense=*/true, routed, ddense) ||
      __builtin_mul_overflow(dd, 2, &dd) ||
      __builtin_mul_overflow(dkv, 2, &dkv) ||
      __builtin_add_overflow(dd, dkv, &block) ||
      __builtin_add_overflow(block, 2 * c.dim, &block) ||
      __builtin_add_overflow(block, extra, &block) ||
      __builtin_add_overflow(block, ddense, &dblock) ||
      __builtin_add_overflow(block, dff, &block) ||
      __builtin_mul_overflow(c.layers - dense, block, &all) ||
      __builtin_mul_overflow(dense, dblock, &dblock) ||
      __builtin_add_overflow(all, dblock, &all) ||
      __builtin_mul_overflow(c.vocab, c.dim, &table) ||
      __builtin_mul_overflow(table, c.tiedHead ? 1 : 2, &table) ||
      __builtin_add_overflow(all, table, &total) ||
      __builtin_add_overflow(total, c.dim, &total))
    return std::nullopt;
  return total;
}
} // namespace

std::optional<int64_t> countParameters(const LlamaConfig &c) {
  return countLlama(c, c.moe.experts);
}

std::optional<int64_t> countActiveParameters(const LlamaConfig &c) {
  return countLlama(c, c.moe.topK);
}

std::optional<int64_t> countParameters(const GPT2Config &c) {
  int64_t positions = c.positions ? c.positions : c.seq;
  int64_t dd, block, all, tables, wpe, total;
  if (__builtin_mul_overflow(c.dim, c.dim, &dd) ||
      __builtin_mul_overflow(dd, 12, &dd) ||
      __builtin_mul_overflow(c.dim, 13, &block) ||
      __builtin_add_overflow(dd, block, &block) ||
      __builtin_mul_overflow(c.layers, block, &all) ||
      __builtin_mul_overflow(c.vocab, c.dim, &tables) ||
      __builtin_mul_overflow(positions, c.dim, &wpe) ||
      __builtin_add_overflow(tables, wpe, &tables) ||
      __builtin_add_overflow(all, tables, &total) ||
      __builtin_mul_overflow(c.dim, 2, &dd) ||
      __builtin_add_overflow(total, dd, &total))
    return std::nullopt;
  return total;
}

namespace {
/// The whole of `path`, a regular file only: a FIFO would block the open
/// (O_NONBLOCK, then fstat, so that nothing blocks), a directory or a
/// device reads as nonsense. Configs are small: at most 16 MiB.
bool readConfigText(const std::string &path, std::string &text,
                    std::string &error) {
  // stat first: a socket cannot be opened at all (ENXIO).
  struct stat info;
  bool named = stat(path.c_str(), &info) == 0 && !S_ISREG(info.st_mode);
  int fd = named ? -1 : ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (!named && (fd < 0 || fstat(fd, &info) != 0)) {
    error = path + ": cannot open: " + std::strerror(errno);
    if (fd >= 0)
      ::close(fd);
    return false;
  }
  if (!S_ISREG(info.st_mode) || info.st_size > (16 << 20)) {
    const char *kind = S_ISDIR(info.st_mode)    ? "a directory"
                       : S_ISFIFO(info.st_mode) ? "a FIFO"
                       : S_ISCHR(info.st_mode)  ? "a character device"
                       : S_ISSOCK(info.st_mode) ? "a socket"
                                                : "a block device";
    error = path + (S_ISREG(info.st_mode)
                        ? std::string(": larger than the 16 MiB a config may "
                                      "have")
                        : std::string(": not a regular file (") + kind + ")");
    if (fd >= 0)
      ::close(fd);
    return false;
  }
  text.resize(size_t(info.st_size));
  size_t done = 0;
  while (done < text.size()) {
    ssize_t n = ::pread(fd, &text[done], text.size() - done, off_t(done));
    if (n < 0 && errno == EINTR)
      continue;
    if (n < 0)
      error = path + ": cannot read: " + std::strerror(errno);
    if (n <= 0)
      break;
    done += size_t(n);
  }
  ::close(fd);
  text.resize(done);
  return error.empty();
}
} // namespace

bool readHFConfig(const std::string &path, HFModel &model, std::string &error) {
  std::string text;
  if (!readConfigText(path, text, error))
    return false;
  json j = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) {
    error = path + ": not a JSON object";
    return false;
  }
  auto type = j.find("model_type");
  if (type == j.end() || !type->is_string()) {
    error = path + ": 'model_type' is missing or not a string";
    return false;
  }
  model.modelType = type->get<std::string>();
  KeyReader r(j, path);
  const std::string &kind = model.modelType;
  if (kind == "gpt2") {
    readGPT2(r, model);
  } else if (kind == "llama" || kind == "mistral" || kind == "qwen2" ||
             kind == "qwen3") {
    readLlama(r, model);
  } else if (kind == "mixtral" || kind == "qwen3_moe") {
    readLlama(r, model);
    readMoe(r, model);
  } else {
    r.bad("model_type", "is \"" + kind +
                            "\"; fsdp-gen reads gpt2, llama, mistral, "
                            "mixtral, qwen2, qwen3 and qwen3_moe");
  }
  r.rejectOthers();
  error = r.error;
  // The file's keys in its order (ordered_json), whatever they are: the
  // families' readers above decide what is accepted, not this copy.
  if (error.empty())
    model.json = nlohmann::ordered_json::parse(text, nullptr, false)
                     .dump(-1, ' ', false, json::error_handler_t::replace);
  return error.empty();
}

std::string hfConfigJson(const GPT2Config &c) {
  nlohmann::ordered_json j = {
      {"architectures", {"GPT2LMHeadModel"}},
      {"model_type", "gpt2"},
      {"vocab_size", c.vocab},
      {"n_embd", c.dim},
      {"n_layer", c.layers},
      {"n_head", c.heads},
      {"n_positions", c.positions ? c.positions : c.seq},
      {"n_ctx", c.positions ? c.positions : c.seq},
      {"n_inner", nullptr},
      {"activation_function", "gelu_new"},
      {"layer_norm_epsilon", 1e-5},
      {"initializer_range", c.initStd},
      {"resid_pdrop", 0.0},
      {"embd_pdrop", 0.0},
      {"attn_pdrop", 0.0},
      {"tie_word_embeddings", true},
      {"dtype", "float32"}};
  return j.dump();
}

/// The rope scaling as transformers 4.x's `rope_scaling` writes it (null
/// for none), with the keys its type reads back (readRopeScaling).
nlohmann::ordered_json ropeScalingJson(const LlamaConfig &c) {
  const RopeScalingConfig &r = c.ropeScaling;
  if (r.type == "default")
    return nullptr;
  nlohmann::ordered_json j = {{"rope_type", r.type}, {"factor", r.factor}};
  if (r.type == "llama3") {
    j["low_freq_factor"] = r.lowFreqFactor;
    j["high_freq_factor"] = r.highFreqFactor;
  }
  if (r.type == "llama3" || r.type == "yarn")
    j["original_max_position_embeddings"] = r.originalMax;
  if (r.type == "yarn") {
    j["attention_factor"] = r.attentionFactor;
    j["beta_fast"] = r.betaFast;
    j["beta_slow"] = r.betaSlow;
    j["truncate"] = r.truncate;
  }
  return j;
}

/// Mixtral's or Qwen3-MoE's config.json for `c`, as transformers writes
/// it (fsdp-gen --config reads it back to the same model).
std::string moeConfigJson(const LlamaConfig &c) {
  const MoeConfig &e = c.moe;
  bool mixtral = e.family == "mixtral";
  nlohmann::ordered_json j = {
      {"architectures",
       {mixtral ? "MixtralForCausalLM" : "Qwen3MoeForCausalLM"}},
      {"model_type", e.family},
      {"vocab_size", c.vocab},
      {"hidden_size", c.dim},
      {"intermediate_size", e.expertFfn},
      {"num_hidden_layers", c.layers},
      {"num_attention_heads", c.heads},
      {"num_key_value_heads", c.kvHeads},
      {"head_dim", c.headSize()},
      {"max_position_embeddings", c.seq},
      {"rms_norm_eps", c.normEps},
      {"rope_theta", c.ropeTheta},
      {"hidden_act", "silu"},
      {"attention_dropout", 0.0},
      {"initializer_range", c.initStd},
      {"tie_word_embeddings", c.tiedHead},
      {mixtral ? "num_local_experts" : "num_experts", e.experts},
      {"num_experts_per_tok", e.topK},
      {"output_router_logits", e.auxLoss},
      {"router_aux_loss_coef", e.auxLossCoef},
      {"dtype", "float32"}};
  if (mixtral) {
    j["sliding_window"] = nullptr;
    j["router_jitter_noise"] = 0.0;
  } else {
    j["moe_intermediate_size"] = e.expertFfn;
    j["norm_topk_prob"] = e.normTopK;
    j["decoder_sparse_step"] = 1;
    j["mlp_only_layers"] = nlohmann::ordered_json::array();
    j["attention_bias"] = false;
    j["use_sliding_window"] = false;
  }
  return j.dump();
}

std::string hfConfigJson(const LlamaConfig &c) {
  if (c.moe.experts)
    return c.moe.family == "mixtral" || c.moe.family == "qwen3_moe"
               ? moeConfigJson(c)
               : std::string(); // DeepSeek-V3-style: no transformers model
  // The family whose config reads back to this model: Qwen3 (q/k norms),
  // Qwen2 (q, k, v biases without o's), Mistral (a window), else Llama.
  const char *type = c.qkNorm                ? "qwen3"
                     : c.qkvBias && !c.oBias ? "qwen2"
                     : c.window > 0          ? "mistral"
                                             : "llama";
  const char *arch = c.qkNorm                ? "Qwen3ForCausalLM"
                     : c.qkvBias && !c.oBias ? "Qwen2ForCausalLM"
                     : c.window > 0          ? "MistralForCausalLM"
                                             : "LlamaForCausalLM";
  nlohmann::ordered_json j = {{"architectures", {arch}},
                              {"model_type", type},
                              {"vocab_size", c.vocab},
                              {"hidden_size", c.dim},
                              {"intermediate_size", c.ffn},
                              {"num_hidden_layers", c.layers},
                              {"num_attention_heads", c.heads},
                              {"num_key_value_heads", c.kvHeads},
                              {"head_dim", c.heads ? c.headSize() : 0},
                              {"max_position_embeddings", c.seq},
                              {"rms_norm_eps", c.normEps},
                              {"rope_theta", c.ropeTheta},
                              {"rope_scaling", ropeScalingJson(c)},
                              {"hidden_act", "silu"},
                              {"attention_dropout", 0.0},
                              {"initializer_range", c.initStd},
                              {"tie_word_embeddings", c.tiedHead},
                              {"dtype", "float32"}};
  std::string family = type;
  if (family == "qwen2" || family == "qwen3") {
    j["use_sliding_window"] = false;
    if (family == "qwen3")
      j["attention_bias"] = c.oBias;
  } else if (family == "mistral") {
    j["sliding_window"] = c.window;
  } else {
    j["attention_bias"] = c.oBias;
    j["mlp_bias"] = false;
  }
  return j.dump();
}

} // namespace fsdp_gen
