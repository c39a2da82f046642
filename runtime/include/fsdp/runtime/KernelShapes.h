//===- KernelShapes.h - kernel shape rules and their evaluator --*- C++ -*-===//
//
// Each kernel of FSDPKernels.td states its operands' shapes as patterns
// over named dims (`shapes`), the conditions on those dims (`dimChecks`)
// and, where a pattern cannot say it, a derivation from its parameters
// (`derive`: attention's and rope's head counts). This header evaluates
// them: it binds the dims across the operands and says precisely which
// rule an operand breaks. It knows nothing of plans or of MLIR: the plan
// loader calls it with buffers' shapes, fsdp-tblgen with nothing (it only
// parses the patterns), an op verifier with an op's operand types.
//
// Patterns (one per operand; an absent optional operand has none):
//   [A, B, 3]    rank 3: dims A and B (bound at their first use, then
//                compared) and a literal
//   [*R, C]      rank >= 1: the leading dims as a list R (its value is
//                their product); a later [*R, ...] must repeat them
//                exactly, a later R or #R compares the product
//   [#N, C]      rank >= 1: the leading dims by their product N only
//   #B*H*T       any rank: the element count is the product
// Dim checks: `X > 0`, `X >= Y`, `X <= INT` (2^31 - 1, what BLAS and CUDA
// grids index), each side a product of dims and literals; a check naming
// a dim that no present operand binds is skipped.
//
//===----------------------------------------------------------------------===//

#ifndef FSDP_RUNTIME_KERNELSHAPES_H
#define FSDP_RUNTIME_KERNELSHAPES_H

#include "fsdp/runtime/RopeScaling.h"

#include <array>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

namespace fsdp::plan::shapes {

/// What a kernel derives from its parameters where a pattern cannot say
/// it (the record's `derive`).
enum class Derive : uint8_t {
  None,
  /// qkv's width W = (heads + 2 kv_heads) hs with kv_heads dividing heads:
  /// binds H, KV, hs and C = H hs; the window is a whole number >= 0.
  AttentionHeads,
  /// The same tiling without the division, an even hs and a positive
  /// finite theta: binds H, KV and hs.
  RopeHeads,
  /// The same tiling, nothing more (qk_norm: hs is any width): binds H,
  /// KV, hs and QK = H + KV, the normalised heads of a row.
  QkNormHeads,
  /// A mixture-of-experts router (docs/moe.md): its `scoring` is 0
  /// (softmax) or 1 (sigmoid), `normalize` 0 or 1, `scale` positive and
  /// finite. Binds nothing.
  MoeRouter,
  /// The sort of a router's choices by expert: E from `num_experts` (a
  /// whole number in [1, 2^24]), E1 = E + 1 (the offsets) and P = R K (the
  /// pairs).
  MoeSort,
  /// A kernel over the sorted pairs: E1 = E + 1 where the expert count E
  /// is bound (a grouped linear's weight), P = R K where the tokens' R and
  /// choices K are (permute, combine).
  MoeRows,
  /// The auxiliary loss: `top_k` a whole number in [1, 64], `coef` finite
  /// and not negative. Binds nothing.
  MoeAuxLoss,
  /// Expert parallelism's counts (G x L: the expert group's ranks, the
  /// experts each holds): E1 = G L + 1 (a sort's offsets over all E = G L
  /// experts) and L1 = L + 1 (the local experts' offsets).
  MoeGroups,
};

/// The enumerator a kernel record's `derive` names ("" for None; none for
/// an unknown name): fsdp-tblgen's spelling of the table's derivations.
inline std::optional<Derive> deriveNamed(std::string_view name) {
  constexpr std::pair<std::string_view, Derive> kNames[] = {
      {"", Derive::None},
      {"AttentionHeads", Derive::AttentionHeads},
      {"RopeHeads", Derive::RopeHeads},
      {"QkNormHeads", Derive::QkNormHeads},
      {"MoeRouter", Derive::MoeRouter},
      {"MoeSort", Derive::MoeSort},
      {"MoeRows", Derive::MoeRows},
      {"MoeAuxLoss", Derive::MoeAuxLoss},
      {"MoeGroups", Derive::MoeGroups}};
  for (const auto &[spelled, derive] : kNames)
    if (spelled == name)
      return derive;
  return std::nullopt;
}

/// The dims `derive` binds (a rule naming one is evaluated after it).
constexpr std::array<std::string_view, 4> derivedDims(Derive derive) {
  switch (derive) {
  case Derive::AttentionHeads:
    return {"H", "KV", "hs", "C"};
  case Derive::RopeHeads:
    return {"H", "KV", "hs", {}};
  case Derive::QkNormHeads:
    return {"H", "KV", "hs", "QK"};
  case Derive::MoeSort:
    return {"E", "E1", "P", {}};
  case Derive::MoeRows:
    return {"E1", "P", {}, {}};
  case Derive::MoeGroups:
    return {"E1", "L1", {}, {}};
  case Derive::MoeRouter:
  case Derive::MoeAuxLoss:
  case Derive::None:
    break;
  }
  return {};
}

inline constexpr int64_t kIntLimit = 2147483647; ///< INT in a dim check
inline constexpr size_t kMaxDims = 12, kMaxRank = 16, kMaxRules = 8,
                        kMaxChecks = 6, kMaxInputs = 5, kMaxOperands = 9;

/// An operand's shape as the caller holds it (a std::vector, an
/// llvm::ArrayRef): no copy.
struct ShapeRef {
  const int64_t *data = nullptr;
  size_t size = 0;
  bool present = false; ///< false: an optional operand left out
  ShapeRef() = default;
  template <typename Container>
  ShapeRef(const Container &c)
      : data(c.data()), size(c.size()), present(true) {}
  int64_t operator[](size_t i) const { return data[i]; }
};

/// One rule: operand `operand` (input i is i, output j is kMaxInputs + j)
/// has shape `pattern`.
struct Rule {
  uint8_t operand = 0;
  std::string_view pattern; ///< empty: no rule (ends the list)
};

/// A kernel's rules, as generated from its record.
struct KernelRules {
  std::array<Rule, kMaxRules> rules;
  std::array<std::string_view, kMaxChecks> checks;
  Derive derive = Derive::None;
};

/// A numeric parameter by name, for a derivation.
struct NamedParam {
  std::string_view name;
  double value = 0;
};
using Params = std::array<NamedParam, 11>; // kMaxKernelParams

/// The dims bound so far: a value each (a list's product) and, for a
/// leading-dims wildcard, the list.
class Dims {
public:
  /// The value of dim `name`; -1 when it is not bound.
  int64_t operator[](std::string_view name) const {
    const Dim *d = find(name);
    return d ? d->value : -1;
  }
  bool bound(std::string_view name) const { return find(name) != nullptr; }
  /// Binds `name` to `value`; false when full.
  bool bind(std::string_view name, int64_t value) {
    return bindList(name, value, nullptr, 0, false);
  }
  /// Binds wildcard `name` to the list `list[0, rank)` of product `value`.
  bool bindList(std::string_view name, int64_t value, const int64_t *list,
                size_t rank, bool listed = true) {
    if (count == kMaxDims || rank > kMaxRank)
      return false;
    Dim &d = dims[count++];
    d.name = name;
    d.value = value;
    d.listed = listed;
    d.rank = rank;
    for (size_t i = 0; i < rank; ++i)
      d.list[i] = list[i];
    return true;
  }
  /// The leading-dims list of `name`, when a wildcard bound it.
  bool list(std::string_view name, const int64_t *&data, size_t &rank) const {
    const Dim *d = find(name);
    if (!d || !d->listed)
      return false;
    data = d->list.data();
    rank = d->rank;
    return true;
  }
  /// "A = 2, B = 3" for the bound dims among `names` (an error's context).
  std::string describe(std::string_view text) const;

private:
  struct Dim {
    std::string_view name;
    int64_t value = 0;
    bool listed = false;
    size_t rank = 0;
    std::array<int64_t, kMaxRank> list{};
  };
  const Dim *find(std::string_view name) const {
    for (size_t i = 0; i < count; ++i)
      if (dims[i].name == name)
        return &dims[i];
    return nullptr;
  }
  std::array<Dim, kMaxDims> dims{};
  size_t count = 0;
};

namespace detail {
constexpr bool isNameStart(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
}
constexpr bool isDigit(char c) { return c >= '0' && c <= '9'; }

/// A token of a pattern or a check: a name, a number, or one character
/// ('[', ']', ',', '*', '#', '>', '<', '='); kind 0 at the end.
struct Token {
  char kind = 0; ///< 'a' name, '0' number, else the character
  std::string_view text;
  int64_t number = 0;
};
class Lexer {
public:
  constexpr explicit Lexer(std::string_view s) : s(s) {}
  constexpr Token next() {
    while (pos < s.size() && s[pos] == ' ')
      ++pos;
    Token t;
    if (pos == s.size())
      return t;
    size_t start = pos;
    if (isNameStart(s[pos])) {
      while (pos < s.size() && (isNameStart(s[pos]) || isDigit(s[pos])))
        ++pos;
      t.kind = 'a';
    } else if (isDigit(s[pos])) {
      while (pos < s.size() && isDigit(s[pos]) && t.number < kIntLimit)
        t.number = t.number * 10 + (s[pos++] - '0');
      t.kind = '0';
    } else {
      t.kind = s[pos++];
    }
    t.text = s.substr(start, pos - start);
    return t;
  }
  constexpr Token peek() const { return Lexer(*this).next(); }

private:
  std::string_view s;
  size_t pos = 0;
};

/// An atom's value: a literal, INT, or a bound dim; false when unbound.
inline bool atomValue(const Token &t, const Dims &dims, int64_t &value) {
  if (t.kind == '0') {
    value = t.number;
    return true;
  }
  if (t.text == "INT") {
    value = kIntLimit;
    return true;
  }
  if (!dims.bound(t.text))
    return false;
  value = dims[t.text];
  return true;
}

/// A product `a*b*...` from the lexer's position. `state`: 1 evaluated
/// (`value`, -1 when it overflows), 0 an unbound dim among its atoms,
/// -1 malformed. `single` is its one atom, when it has one.
inline int product(Lexer &lex, const Dims &dims, int64_t &value,
                   Token *single = nullptr) {
  value = 1;
  int state = 1;
  for (size_t atoms = 0;; ++atoms) {
    Token t = lex.next();
    if (t.kind != 'a' && t.kind != '0')
      return -1;
    if (single)
      *single = atoms == 0 ? t : Token{};
    int64_t v = 0;
    if (!atomValue(t, dims, v))
      state = 0;
    else if (value >= 0 && __builtin_mul_overflow(value, v, &value))
      value = -1;
    if (lex.peek().kind != '*')
      return state;
    lex.next();
  }
}
} // namespace detail

inline std::string Dims::describe(std::string_view text) const {
  std::string out;
  detail::Lexer lex(text);
  for (detail::Token t = lex.next(); t.kind; t = lex.next()) {
    if (t.kind != 'a' || !bound(t.text) ||
        out.find(std::string(t.text) + " =") != std::string::npos)
      continue;
    out += (out.empty() ? "" : ", ") + std::string(t.text) + " = ";
    const int64_t *data = nullptr;
    size_t rank = 0;
    if (!list(t.text, data, rank)) {
      out += std::to_string((*this)[t.text]);
      continue;
    }
    out += "[";
    for (size_t i = 0; i < rank; ++i)
      out += (i ? ", " : "") + std::to_string(data[i]);
    out += "]";
  }
  return out;
}

/// "[2, 3]" as errors print a shape.
inline std::string shapeText(ShapeRef shape) {
  std::string out = "[";
  for (size_t i = 0; i < shape.size; ++i)
    out += (i ? ", " : "") + std::to_string(shape[i]);
  return out + "]";
}

/// Matches a `#product` pattern (after the '#'): binds a single unbound
/// dim to the element count, else compares.
inline int matchCount(detail::Lexer &lex, ShapeRef shape, Dims &dims) {
  int64_t elements = 1;
  for (size_t i = 0; i < shape.size; ++i)
    if (elements >= 0 && __builtin_mul_overflow(elements, shape[i], &elements))
      elements = -1;
  int64_t value = 0;
  detail::Token single;
  int state = detail::product(lex, dims, value, &single);
  if (state < 0 || lex.next().kind != 0)
    return -1;
  if (state == 0)
    return single.kind == 'a' && dims.bind(single.text, elements) ? 1 : -1;
  return value >= 0 && value == elements;
}

/// Matches the leading dims shape[0, n) against wildcard `name` (`list`:
/// `*name`, exactly; else `#name`, by product).
inline bool matchLeading(std::string_view name, bool list, ShapeRef shape,
                         size_t n, Dims &dims) {
  int64_t value = 1;
  for (size_t i = 0; i < n; ++i)
    if (__builtin_mul_overflow(value, shape[i], &value))
      return false;
  if (!dims.bound(name))
    return list ? dims.bindList(name, value, shape.data, n)
                : dims.bind(name, value);
  const int64_t *known = nullptr;
  size_t rank = 0;
  if (!list || !dims.list(name, known, rank))
    return dims[name] == value;
  if (rank != n)
    return false;
  for (size_t i = 0; i < n; ++i)
    if (known[i] != shape[i])
      return false;
  return true;
}

/// Matches `pattern` against `shape`, binding its dims: 1 it matches, 0
/// it does not, -1 the pattern is malformed.
inline int match(std::string_view pattern, ShapeRef shape, Dims &dims) {
  detail::Lexer lex(pattern);
  detail::Token t = lex.next();
  if (t.kind == '#')
    return matchCount(lex, shape, dims);
  if (t.kind != '[')
    return -1;
  // Items: count them first (the rank), then match from both ends.
  std::array<detail::Token, kMaxRank + 1> items;
  size_t n = 0;
  char lead = 0; // '*' or '#' before the first item
  for (t = lex.next(); t.kind != ']'; t = lex.next()) {
    if (n > 0 && (t.kind != ',' || (t = lex.next()).kind == ']'))
      return -1;
    if (n == 0 && (t.kind == '*' || t.kind == '#')) {
      lead = t.kind;
      if ((t = lex.next()).kind != 'a')
        return -1;
    }
    if ((t.kind != 'a' && t.kind != '0') || n == items.size())
      return -1;
    items[n++] = t;
  }
  if (lex.next().kind != 0)
    return -1;
  size_t fixed = lead ? n - 1 : n;
  if (lead ? shape.size < fixed : shape.size != fixed)
    return 0;
  size_t leading = shape.size - fixed;
  if (lead && !matchLeading(items[0].text, lead == '*', shape, leading, dims))
    return 0;
  for (size_t i = lead ? 1 : 0; i < n; ++i) {
    int64_t d = shape[leading + i - (lead ? 1 : 0)], value = 0;
    if (!detail::atomValue(items[i], dims, value)) {
      if (items[i].kind != 'a' || !dims.bind(items[i].text, d))
        return -1;
      continue;
    }
    if (value != d)
      return 0;
  }
  return 1;
}

/// Evaluates dim check `check`: 1 holds, 0 fails, 2 names an unbound dim
/// (skipped), -1 malformed.
inline int holds(std::string_view check, const Dims &dims) {
  detail::Lexer lex(check);
  int64_t lhs = 0, rhs = 0;
  int left = detail::product(lex, dims, lhs);
  detail::Token op = lex.next();
  bool orEqual = lex.peek().kind == '=';
  if (orEqual)
    lex.next();
  int right = detail::product(lex, dims, rhs);
  if (left < 0 || right < 0 || lex.next().kind != 0 ||
      (op.kind != '>' && op.kind != '<') || (op.kind == '<' && !orEqual))
    return -1;
  if (left == 0 || right == 0)
    return 2;
  if (lhs < 0 || rhs < 0) // an overflowing product is past any bound
    return op.kind == '>' && lhs < 0 && rhs >= 0;
  return op.kind == '<' ? lhs <= rhs : orEqual ? lhs >= rhs : lhs > rhs;
}

/// Whether `text` is a well-formed pattern (`check` false) or dim check
/// (`check` true): what fsdp-tblgen asks of every one before it writes
/// the table.
inline bool wellFormed(std::string_view text, bool check) {
  Dims dims; // nothing bound: products of several dims parse as unbound
  if (check)
    return holds(text, dims) != -1;
  detail::Lexer lex(text);
  if (lex.peek().kind == '#') {
    lex.next();
    int64_t value = 0;
    return detail::product(lex, dims, value) >= 0 && lex.next().kind == 0;
  }
  // Bind every dim to 1: a bracket pattern then fails (-1) only when
  // malformed; a literal other than 1 (`[2, E]`) matches no shape of ones
  // but is well formed.
  for (detail::Lexer names(text);;) {
    detail::Token t = names.next();
    if (!t.kind)
      break;
    if (t.kind == 'a' && !dims.bound(t.text) && !dims.bind(t.text, 1))
      return false;
  }
  std::array<int64_t, kMaxRank> ones{};
  for (int64_t &d : ones)
    d = 1;
  for (size_t rank = 0; rank <= kMaxRank; ++rank) {
    struct Shape {
      const int64_t *p;
      size_t n;
      const int64_t *data() const { return p; }
      size_t size() const { return n; }
    };
    Dims copy = dims;
    int result = match(text, ShapeRef(Shape{ones.data(), rank}), copy);
    if (result != 0)
      return result == 1;
  }
  return true;
}

/// Calls fn(name) for each dim `text` names (INT aside).
template <typename Fn> void forEachDim(std::string_view text, Fn fn) {
  detail::Lexer lex(text);
  for (detail::Token t = lex.next(); t.kind; t = lex.next())
    if (t.kind == 'a' && t.text != "INT")
      fn(t.text);
}

/// Whether `text` names one of the dims `derive` binds.
inline bool namesDerived(std::string_view text, Derive derive) {
  detail::Lexer lex(text);
  for (detail::Token t = lex.next(); t.kind; t = lex.next())
    for (std::string_view d : derivedDims(derive))
      if (t.kind == 'a' && !d.empty() && t.text == d)
        return true;
  return false;
}

/// A parameter's value by name (NaN when the kernel has none of it).
inline double param(const Params &params, std::string_view name) {
  for (const NamedParam &p : params)
    if (!p.name.empty() && p.name == name)
      return p.value;
  return std::nan("");
}

/// A head count: a whole number in [1, most] (NaN fails).
inline bool wholeCount(double x, int64_t most) {
  return x >= 1 && x <= double(most) && x == double(int64_t(x));
}

/// Attention's and rope's head counts against qkv's width W.
inline bool deriveHeads(Derive derive, const Params &params, Dims &dims,
                        std::string &why) {
  double heads = param(params, "heads"), kvHeads = param(params, "kv_heads");
  int64_t W = dims["W"];
  bool attention = derive == Derive::AttentionHeads;
  bool rope = derive == Derive::RopeHeads;
  why = attention ? "inconsistent shapes or head count"
                  : "inconsistent shapes or head counts";
  // Both counts within [1, width] before they are converted.
  if (W < 0 || !wholeCount(heads, W) || !wholeCount(kvHeads, W))
    return false;
  int64_t H = int64_t(heads), KV = int64_t(kvHeads);
  if ((attention && H % KV) || W % (H + 2 * KV))
    return false;
  int64_t hs = W / (H + 2 * KV);
  if (rope && hs % 2)
    return false;
  if (attention) {
    // The sliding window: 0 (none) or a key count; past T it is the same
    // as none. At most 2^53, so that the stored double holds it exactly.
    double window = param(params, "window");
    if (!(window >= 0.0) || window > 9007199254740992.0 ||
        window != double(int64_t(window))) {
      why = "has a window that is not a whole number >= 0";
      return false;
    }
  } else if (rope) {
    double theta = param(params, "theta");
    if (!(theta > 0.0) || std::isinf(theta)) {
      why = "has a theta that is not positive and finite";
      return false;
    }
    // The scaling (plan version 14; RopeScaling.h holds its rules).
    double kind = param(params, "scaling");
    RopeScaling s;
    s.kind = kind >= 0 && kind <= 3 && kind == double(int64_t(kind))
                 ? int64_t(kind)
                 : -1;
    s.factor = param(params, "factor");
    s.lowFreqFactor = param(params, "low_freq_factor");
    s.highFreqFactor = param(params, "high_freq_factor");
    s.originalMax = param(params, "original_max_positions");
    s.attentionFactor = param(params, "attention_factor");
    s.correctionLow = param(params, "correction_low");
    s.correctionHigh = param(params, "correction_high");
    if (const char *error = ropeScalingError(s)) {
      why = error;
      return false;
    }
  }
  return dims.bind("H", H) && dims.bind("KV", KV) && dims.bind("hs", hs) &&
         (!attention || dims.bind("C", H * hs)) &&
         (derive != Derive::QkNormHeads || dims.bind("QK", H + KV));
}

/// The mixture-of-experts derivations (Derive::MoeRouter, MoeSort,
/// MoeRows): each dim bound where what it follows from is.
inline bool deriveMoe(Derive derive, const Params &params, Dims &dims,
                      std::string &why) {
  if (derive == Derive::MoeRouter) {
    double scoring = param(params, "scoring"),
           normalize = param(params, "normalize"),
           scale = param(params, "scale");
    why = "has a scoring, normalize or scale out of range (0 or 1, 0 or 1, "
          "positive and finite)";
    return (scoring == 0 || scoring == 1) &&
           (normalize == 0 || normalize == 1) && scale > 0 &&
           !std::isinf(scale);
  }
  if (derive == Derive::MoeAuxLoss) {
    double topK = param(params, "top_k"), coef = param(params, "coef");
    why = "has a top_k or coef out of range (1 to 64, finite and not "
          "negative)";
    return wholeCount(topK, 64) && coef >= 0 && !std::isinf(coef);
  }
  why = "inconsistent shapes or expert count";
  if (derive == Derive::MoeGroups)
    return !dims.bound("G") || !dims.bound("L") ||
           (dims.bind("E1", dims["G"] * dims["L"] + 1) &&
            dims.bind("L1", dims["L"] + 1));
  if (derive == Derive::MoeSort) {
    double experts = param(params, "num_experts");
    if (!wholeCount(experts, int64_t(1) << 24) ||
        !dims.bind("E", int64_t(experts)))
      return false;
  }
  if (dims.bound("E") && !dims.bind("E1", dims["E"] + 1))
    return false;
  return !dims.bound("R") || !dims.bound("K") ||
         dims.bind("P", dims["R"] * dims["K"]);
}

/// Checks operands `shapes` (inputs then outputs, as Rule::operand counts
/// them; `names` the same, for errors) against `rules`, binding `dims`.
/// On failure returns false with `why`: "inconsistent shapes: input is
/// [4, 3], not [*R, C] (C = 8)", a derivation's reason, or a dim check's.
inline bool check(const KernelRules &rules,
                  const std::array<ShapeRef, kMaxOperands> &shapes,
                  const std::array<std::string_view, kMaxOperands> &names,
                  const Params &params, Dims &dims, std::string &why) {
  auto apply = [&](const Rule &rule) {
    ShapeRef shape = shapes[rule.operand];
    if (!shape.present)
      return true;
    int result = match(rule.pattern, shape, dims);
    if (result == 1)
      return true;
    why = "inconsistent shapes: " + std::string(names[rule.operand]) + " is " +
          shapeText(shape) + ", not " + std::string(rule.pattern);
    std::string context = dims.describe(rule.pattern);
    if (result < 0)
      why += " (a malformed pattern)";
    else if (!context.empty())
      why += " (" + context + ")";
    return false;
  };
  // Rules without derived dims, the derivation, then the rest.
  for (const Rule &rule : rules.rules)
    if (!rule.pattern.empty() && !namesDerived(rule.pattern, rules.derive) &&
        !apply(rule))
      return false;
  bool moe =
      rules.derive == Derive::MoeRouter || rules.derive == Derive::MoeSort ||
      rules.derive == Derive::MoeRows || rules.derive == Derive::MoeAuxLoss ||
      rules.derive == Derive::MoeGroups;
  if (rules.derive != Derive::None &&
      !(moe ? deriveMoe(rules.derive, params, dims, why)
            : deriveHeads(rules.derive, params, dims, why)))
    return false;
  for (const Rule &rule : rules.rules)
    if (!rule.pattern.empty() && namesDerived(rule.pattern, rules.derive) &&
        !apply(rule))
      return false;
  for (std::string_view c : rules.checks) {
    int result = c.empty() ? 1 : holds(c, dims);
    if (result == 1 || result == 2)
      continue;
    std::string context = dims.describe(c);
    why = (c.find("INT") != std::string_view::npos
               ? "has a dimension past the 2^31 - 1 that BLAS takes and CUDA "
                 "grids index"
               : "inconsistent shapes") +
          std::string(result < 0 ? " (a malformed check " : " (not ") +
          std::string(c) + (context.empty() ? "" : ": " + context) + ")";
    return false;
  }
  return true;
}

} // namespace fsdp::plan::shapes

#endif // FSDP_RUNTIME_KERNELSHAPES_H
