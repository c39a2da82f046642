//===- FSDPKernelOpInterface.cpp - kernels, scratch and FLOPs -------------===//
//
// KernelOpInterface's verifier (each compute op against its kernel's table
// entry: operand counts, element types and shapes) and the methods that ops
// list in their `kernelMethods`: getFlops for a GEMM, getKernelScratch, and
// getKernelOpcode/getKernelVariant for an op with several kernels
// (attention's impl).
//
//===----------------------------------------------------------------------===//

#include "VerifierHelpers.h"
#include "fsdp/Dialect/FSDP/IR/FSDP.h"
#include "fsdp/runtime/KernelRules.h"

#include <cmath>
#include <sstream>

using namespace mlir;
using namespace mlir::fsdp;
using namespace mlir::fsdp::detail;

namespace plan = ::fsdp::plan;
namespace shapes = ::fsdp::plan::shapes;

/// The kernel table's element rules: F32 operands (statistics, the loss,
/// AdamW's state) are f32 and Float ones are f32 or bf16, all of one
/// type: the element type the kernel runs in.
static LogicalResult verifyElementRules(Operation *op,
                                        const plan::KernelInfo &info,
                                        ArrayRef<RankedTensorType> scratch) {
  Type element;
  auto check = [&](const plan::OperandInfo &rule, Type type,
                   const llvm::Twine &what) -> LogicalResult {
    Type t = llvm::cast<ShapedType>(type).getElementType();
    bool known = t.isF32() || t.isBF16();
    if (rule.rule == plan::ElementRule::F32 && !t.isF32())
      return op->emitOpError() << what << " (" << StringRef(rule.name)
                               << ") must be f32, got " << type;
    if (rule.rule == plan::ElementRule::TokenIds ||
        rule.rule == plan::ElementRule::Indices ||
        rule.rule == plan::ElementRule::F32)
      return success();
    if (!known)
      return op->emitOpError() << what << " (" << StringRef(rule.name)
                               << ") must be f32 or bf16, got " << type;
    if (rule.rule != plan::ElementRule::Float)
      return success();
    if (element && element != t)
      return op->emitOpError()
             << "expects one element type for all float operands and "
                "results, got "
             << element << " and " << t;
    element = t;
    return success();
  };
  for (auto [i, type] : llvm::enumerate(op->getOperandTypes()))
    if (failed(check(info.ins[i], type, "operand #" + llvm::Twine(i))))
      return failure();
  for (auto [i, type] : llvm::enumerate(op->getResultTypes()))
    if (failed(check(info.outs[i], type, "result #" + llvm::Twine(i))))
      return failure();
  for (auto [i, type] : llvm::enumerate(scratch))
    if (failed(check(info.outs[op->getNumResults() + i], type,
                     "scratch #" + llvm::Twine(i))))
      return failure();
  return success();
}

//===----------------------------------------------------------------------===//
// Shapes: the kernel record's `shapes`, `dimChecks` and `derive`
//===----------------------------------------------------------------------===//

/// The kernel's numeric parameters in the table's order, as the lowering
/// stores them (LowerToRuntime.cpp's paramsOf): the op's attribute of the
/// parameter's name, else that of the parameter it is `sameAs` (kv_heads:
/// heads), else the table's default. NaN for one the op does not hold
/// (grad_sq_sum's flat_size, which the lowering computes): no rule of such
/// a kernel reads it.
static std::array<double, plan::kMaxKernelParams>
kernelParams(Operation *op, const plan::KernelInfo &info) {
  std::array<double, plan::kMaxKernelParams> values;
  values.fill(std::nan(""));
  for (size_t i = 0, e = plan::numParams(info); i < e; ++i) {
    const plan::ParamInfo &param = info.params[i];
    Attribute attr = op->getAttr(StringRef(param.name));
    if (!attr && !param.sameAs.empty())
      attr = op->getAttr(StringRef(param.sameAs));
    if (std::optional<int64_t> code = enumParamValue(attr))
      values[i] = double(*code);
    else if (auto f = llvm::dyn_cast_or_null<FloatAttr>(attr))
      values[i] = f.getValueAsDouble();
    else if (auto n = llvm::dyn_cast_or_null<IntegerAttr>(attr))
      values[i] = double(n.getInt());
    else if (param.hasDefault)
      values[i] = param.defaultValue;
  }
  return values;
}

/// Whether some bracket pattern of `rules` has `name` as a plain item (a
/// single dim, such as a width C), not as leading dims (`*R`, `#N`).
static bool isSingleDim(const shapes::KernelRules &rules, StringRef name) {
  for (const shapes::Rule &rule : rules.rules) {
    StringRef pattern(rule.pattern.data(), rule.pattern.size());
    if (!pattern.trim().consume_front("["))
      continue;
    SmallVector<StringRef> items;
    pattern.trim().drop_front().drop_back().split(items, ',');
    if (llvm::any_of(items, [&](StringRef i) { return i.trim() == name; }))
      return true;
  }
  return false;
}

/// How an fsdp op's type reads a kernel's pattern. A plan's buffers are
/// flat, so the table counts some operands' elements where a tensor type
/// spells out its dims: `#X` is `[X]` when X is a single dim (layer_norm's
/// weight is [C], not any C elements) and `[*X]` when it is leading dims
/// (rstd is [*R]: the input's leading dims exactly), and `[#X, ...]` is
/// `[*X, ...]`. Counts of literals and products (`#1`, `#B*H*T*T`) stay.
static std::string irPattern(const shapes::KernelRules &rules,
                             StringRef pattern) {
  StringRef p = pattern.trim();
  bool bracket = p.consume_front("[");
  p = p.ltrim();
  if (!p.consume_front("#"))
    return pattern.str();
  p = p.ltrim();
  StringRef name = bracket ? p.split(',').first.trim() : p;
  if (!llvm::all_of(name,
                    [](char c) { return llvm::isAlnum(c) || c == '_'; }) ||
      name.empty() || llvm::isDigit(name.front()))
    return pattern.str();
  // A derived dim (qk_norm's head size hs) is a single dim too.
  bool derived = llvm::is_contained(shapes::derivedDims(rules.derive),
                                    std::string_view(name.data(), name.size()));
  std::string open = isSingleDim(rules, name) || derived ? "[" : "[*";
  return bracket ? open + p.str() : open + name.str() + "]";
}

/// A derivation's failure in words: what it needs of which operand, with
/// the values it had (KernelShapes.h's deriveHeads says only which kind).
static std::string derivationContext(const plan::KernelInfo &info,
                                     const shapes::KernelRules &rules,
                                     const double *params,
                                     const shapes::Dims &dims) {
  std::ostringstream out;
  for (const shapes::Rule &rule : rules.rules) {
    bool namesW = false;
    shapes::forEachDim(rule.pattern,
                       [&](std::string_view d) { namesW |= d == "W"; });
    if (!namesW)
      continue;
    std::string_view name =
        rule.operand < shapes::kMaxInputs
            ? info.ins[rule.operand].name
            : info.outs[rule.operand - shapes::kMaxInputs].name;
    out << ": " << name << " " << rule.pattern << " needs ";
    break;
  }
  out << (rules.derive == shapes::Derive::AttentionHeads
              ? "W = (heads + 2 kv_heads) hs with kv_heads dividing heads"
          : rules.derive == shapes::Derive::QkNormHeads
              ? "W = (heads + 2 kv_heads) hs"
              : "W = (heads + 2 kv_heads) hs with hs even, theta "
                "positive and finite, and a valid scaling");
  out << " (W = " << dims["W"];
  // The counts, rope's theta and its scaling parameters (only where it
  // scales); attention's window is not part of it (its range is the
  // attribute's constraint).
  bool unscaled = rules.derive == shapes::Derive::RopeHeads &&
                  params[plan::paramIndex(info.opcode, "scaling")] == 0;
  for (size_t i = 0, e = plan::numParams(info); i < e; ++i) {
    if (unscaled && i > plan::paramIndex(info.opcode, "theta"))
      break;
    if (std::string_view(info.params[i].name) != "window")
      out << ", " << info.params[i].name << " = " << params[i];
  }
  out << ")";
  return out.str();
}

/// Whether shapes::check failed in `table`'s head-count derivation (whose
/// reason, "inconsistent shapes or head counts", needs the tiling it
/// checks beside it): the dims it binds are not bound, and the rules it
/// runs after (those naming none of them) hold. The mixture-of-experts
/// derivations give their reasons whole.
static bool derivationFailed(
    const shapes::KernelRules &table,
    const std::array<shapes::ShapeRef, shapes::kMaxOperands> &refs,
    const std::array<std::string_view, shapes::kMaxOperands> &names,
    const shapes::Dims &dims) {
  using shapes::Derive;
  if ((table.derive != Derive::AttentionHeads &&
       table.derive != Derive::RopeHeads &&
       table.derive != Derive::QkNormHeads) ||
      dims.bound(shapes::derivedDims(table.derive)[0]))
    return false;
  shapes::KernelRules before;
  size_t n = 0;
  for (const shapes::Rule &rule : table.rules)
    if (!rule.pattern.empty() &&
        !shapes::namesDerived(rule.pattern, table.derive))
      before.rules[n++] = rule;
  shapes::Dims bound;
  std::string why;
  return shapes::check(before, refs, names, shapes::Params{}, bound, why);
}

/// Checks `op`'s shapes against its kernel's rules: those the plan loader
/// checks (plan::checkKernelShapes), then their reading by the IR's types
/// (irPattern). The operands are in the kernel's order (fsdp-tblgen checked
/// the op's operands and results against the kernel's inputs and outputs);
/// a scratch output, which the lowering adds, is absent. An op whose types
/// are not all statically shaped is left to ODS (every kernel op's tensors
/// are, but grad_sq_sum's gradient, which no rule names).
static LogicalResult verifyKernelShapes(Operation *op,
                                        const plan::KernelInfo &info) {
  SmallVector<ArrayRef<int64_t>> ins, outs;
  std::array<shapes::ShapeRef, shapes::kMaxOperands> refs;
  std::array<std::string_view, shapes::kMaxOperands> names;
  auto add = [&](Type type, SmallVectorImpl<ArrayRef<int64_t>> &list,
                 size_t slot, std::string_view name) {
    auto shaped = llvm::dyn_cast<ShapedType>(type);
    if (!shaped || !shaped.hasStaticShape())
      return false;
    list.push_back(shaped.getShape());
    refs[slot] = shapes::ShapeRef(list.back());
    names[slot] = name;
    return true;
  };
  for (auto [i, type] : llvm::enumerate(op->getOperandTypes()))
    if (!add(type, ins, i, info.ins[i].name))
      return success();
  for (auto [i, type] : llvm::enumerate(op->getResultTypes()))
    if (!add(type, outs, shapes::kMaxInputs + i, info.outs[i].name))
      return success();
  std::array<double, plan::kMaxKernelParams> params = kernelParams(op, info);
  const shapes::KernelRules &table = plan::kernelShapes(info.opcode).rules;
  shapes::Dims dims;
  std::string why;
  if (!plan::checkKernelShapes(info.opcode, ins.data(), ins.size(), outs.data(),
                               outs.size(), params.data(), dims, why)) {
    if (derivationFailed(table, refs, names, dims))
      why += derivationContext(info, table, params.data(), dims);
    return op->emitOpError() << why;
  }
  // The IR's reading adds no dim checks and needs no derivation: the
  // loader's rules have held.
  shapes::KernelRules exact;
  std::array<std::string, shapes::kMaxRules> texts;
  for (auto [i, rule] : llvm::enumerate(table.rules)) {
    texts[i] =
        irPattern(table, StringRef(rule.pattern.data(), rule.pattern.size()));
    exact.rules[i] = {rule.operand, texts[i]};
  }
  shapes::Dims exactDims;
  if (!shapes::check(exact, refs, names, shapes::Params{}, exactDims, why))
    return op->emitOpError() << why;
  return success();
}

//===----------------------------------------------------------------------===//
// The verifier
//===----------------------------------------------------------------------===//

// fsdp-tblgen checked each op's ODS against its kernel (FSDPKernels.td):
// the kernel is named after the op, its inputs are the op's operands, its
// results the op's results. What ODS cannot tell is checked here: the
// operand count of an op with several kernels (attention's impl), the
// scratch buffers that getKernelScratch (C++) adds, the element types and
// the shapes (the kernel record's rules, which the plan loader checks too).
LogicalResult mlir::fsdp::detail::verifyKernelOp(Operation *op) {
  auto kernelOp = llvm::cast<KernelOpInterface>(op);
  const plan::KernelInfo *found = plan::findKernel(kernelOp.getKernelOpcode());
  assert(found && "getKernelOpcode returns a plan::Opcode");
  const plan::KernelInfo &info = *found;
  StringRef kernel(info.name);
  if (op->getNumOperands() < info.minInputs ||
      op->getNumOperands() > info.maxInputs)
    return op->emitOpError()
           << "has " << op->getNumOperands() << " operands, but kernel '"
           << kernel << "' takes " << info.minInputs << " to " << info.maxInputs
           << " inputs";
  SmallVector<RankedTensorType> scratch;
  kernelOp.getKernelScratch(scratch);
  size_t outputs = op->getNumResults() + scratch.size();
  if (outputs != info.outputs)
    return op->emitOpError()
           << "has " << op->getNumResults() << " results and " << scratch.size()
           << " scratch buffers, which are not the " << info.outputs
           << " outputs of kernel '" << kernel << "'";
  if (failed(verifyElementRules(op, info, scratch)))
    return failure();
  return verifyKernelShapes(op, info);
}

namespace {
double numElements(Value v) { return double(tensorOf(v).getNumElements()); }

/// Q K^T and P V: 2 * 2 * B * H * T * T * hs = 4 * T * (B * T * C), from a
/// B x T x C tensor (the output or its gradient): qkv is not 3C wide when
/// there are fewer kv heads, and the products do not shrink with them.
/// The count is the full T x T square (PaLM's convention, which counts
/// the masked half too); a sliding window scales it by the share of the
/// causal triangle's (query, key) pairs that lie inside the window,
///   pairs(w) = w (w + 1) / 2 + (T - w) w  for w < T,  T (T + 1) / 2 else,
/// so that a window of T or more counts as full attention and a short one
/// in proportion to the keys a query sees (about 2 w / T of the square).
double attentionFlops(Value btc, int64_t window) {
  RankedTensorType type = tensorOf(btc);
  double T = double(type.getDimSize(1));
  double flops = 4.0 * T * double(type.getNumElements());
  if (window <= 0 || double(window) >= T)
    return flops;
  double w = double(window);
  double pairs = w * (w + 1.0) / 2.0 + (T - w) * w;
  return flops * pairs / (T * (T + 1.0) / 2.0);
}
} // namespace

// GEMMs: 2 FLOPs per multiply-add.
double LinearOp::getFlops() {
  return 2.0 * numElements(getResult()) * tensorOf(getWeight()).getDimSize(1);
}
double LinearGradInputOp::getFlops() {
  return 2.0 * numElements(getGrad()) * tensorOf(getWeight()).getDimSize(1);
}
double LinearGradWeightOp::getFlops() {
  return 2.0 * numElements(getGrad()) * tensorOf(getInput()).getShape().back();
}
// The grouped linear: every pair's row through its expert's O x I matrix,
// the same count as one linear over the P rows. Under expert parallelism
// P is the received rows' bound, which routing fills only in the worst
// case: --fsdp-expert-parallel marks the ops with the rows it fills on
// average (kActiveRowsAttrName: the rank's own pairs, as many as it
// sends), and those are what runs.
static double activeRowsShare(Operation *op, Value rows) {
  auto active = op->getAttrOfType<IntegerAttr>(kActiveRowsAttrName);
  int64_t bound = tensorOf(rows).getDimSize(0);
  if (!active || bound <= 0)
    return 1.0;
  return std::min(1.0, double(active.getInt()) / double(bound));
}
double MoeGroupedLinearOp::getFlops() {
  return 2.0 * numElements(getResult()) * tensorOf(getWeight()).getDimSize(2) *
         activeRowsShare(*this, getResult());
}
double MoeGroupedLinearGradInputOp::getFlops() {
  return 2.0 * numElements(getGrad()) * tensorOf(getWeight()).getDimSize(2) *
         activeRowsShare(*this, getGrad());
}
double MoeGroupedLinearGradWeightOp::getFlops() {
  return 2.0 * numElements(getGrad()) * tensorOf(getInput()).getShape().back() *
         activeRowsShare(*this, getGrad());
}
double AttentionOp::getFlops() {
  return attentionFlops(getResult(), getWindow());
}
/// Twice the forward's products (dP = dO V^T, dV = P^T dO, dQ = dS K,
/// dK = dS^T Q); the blocked form also recomputes S = Q K^T. These are
/// hardware FLOPs (the model's are three times the forward's): with a
/// window only the blocked form's shrink, the materialized form computing
/// the causal products whatever the window.
double AttentionBackwardOp::getFlops() {
  return (getImpl() == AttentionImpl::Blocked ? 2.5 : 2.0) *
         attentionFlops(getGrad(),
                        getImpl() == AttentionImpl::Blocked ? getWindow() : 0);
}
// Every other op keeps the interface's default, 0 FLOPs: element-wise ops,
// reductions and gathers are charged by bytes moved.

/// The gradient of the probabilities, one row at a time; the blocked form
/// needs none.
void AttentionBackwardOp::getKernelScratch(
    SmallVectorImpl<RankedTensorType> &scratch) {
  if (getImpl() == AttentionImpl::Materialized)
    scratch.push_back(tensorOf(getSaved()));
}

// One kernel per implementation.
uint32_t AttentionOp::getKernelOpcode() {
  return uint32_t(getImpl() == AttentionImpl::Blocked
                      ? ::fsdp::plan::Opcode::AttentionBlocked
                      : ::fsdp::plan::Opcode::Attention);
}
StringRef AttentionOp::getKernelVariant() {
  return getImpl() == AttentionImpl::Blocked ? "blocked" : "";
}
uint32_t AttentionBackwardOp::getKernelOpcode() {
  return uint32_t(getImpl() == AttentionImpl::Blocked
                      ? ::fsdp::plan::Opcode::AttentionBackwardBlocked
                      : ::fsdp::plan::Opcode::AttentionBackward);
}
StringRef AttentionBackwardOp::getKernelVariant() {
  return getImpl() == AttentionImpl::Blocked ? "blocked" : "";
}

/// Per-row losses, so that a GPU reduces them with many blocks and in a
/// fixed order (the CPU does not need them).
void CrossEntropyOp::getKernelScratch(
    SmallVectorImpl<RankedTensorType> &scratch) {
  scratch.push_back(RankedTensorType::get(tensorOf(getTargets()).getShape(),
                                          Float32Type::get(getContext())));
}

/// Each row's softmax max and reciprocal sum (2 per row, f32).
void MoeAuxStatsOp::getKernelScratch(
    SmallVectorImpl<RankedTensorType> &scratch) {
  ArrayRef<int64_t> logits = tensorOf(getLogits()).getShape();
  int64_t rows = 1;
  for (int64_t d : logits.drop_back())
    rows *= d;
  scratch.push_back(
      RankedTensorType::get({2 * rows}, Float32Type::get(getContext())));
}

void GradSqSumOp::getKernelScratch(SmallVectorImpl<RankedTensorType> &types) {
  // The GPU's per-block partial sums, a double each (the CPU needs none).
  types.push_back(RankedTensorType::get({::fsdp::plan::kGradSqSumScratch},
                                        Float32Type::get(getContext())));
}
