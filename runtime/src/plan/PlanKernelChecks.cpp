//===- PlanKernelChecks.cpp - each kernel of a plan against the table -----===//
//
// Every kernel's operands as the CPU and CUDA kernels assume them: counts
// and element types by the kernel table, shapes by its shape rules
// (KernelRules.h: patterns over named dims, which bind across operands,
// and dim checks), then the record's named extra check against the rest of
// the plan (units, buffer kinds, the vocabulary): the functions below,
// found by the name FSDPKernels.td gives them.
//
//===----------------------------------------------------------------------===//

#include "fsdp/runtime/KernelRules.h"
#include "plan/EvalStep.h"
#include "plan/PlanChecks.h"

#include <algorithm>
#include <cmath>
#include <optional>

namespace fsdp::rt {
namespace {
/// The vocabulary the cross-entropies index (fsdp-run checks its data
/// against it) and the smallest embedding table, each with where it is.
struct Vocabulary {
  int64_t vocabulary = -1, smallestTable = -1;
  size_t vocabularyAt = 0, smallestTableAt = 0;
};

/// The unit a kernel names, or units.end().
std::vector<UnitDesc>::const_iterator namedUnit(const KernelCheck &k) {
  const std::vector<UnitDesc> &units = k.plan.units;
  return std::find_if(units.begin(), units.end(), [&](const UnitDesc &u) {
    return !k.inst.unit.empty() && u.name == k.inst.unit;
  });
}
} // namespace

/// Operand and parameter counts against the kernel table, and operand ids.
static bool checkOperandCounts(const KernelCheck &k) {
  const plan::KernelInfo &info = k.info();
  const Instruction &inst = k.inst;
  if (inst.ins.size() < info.minInputs || inst.ins.size() > info.maxInputs ||
      inst.outs.size() < info.minOutputs || inst.outs.size() > info.outputs)
    return k.bad("wrong number of operands");
  if (inst.params.size() != plan::numParams(info))
    return k.bad("wrong number of parameters");
  for (uint32_t id : inst.ins)
    if (id >= k.plan.buffers.size())
      return k.bad("reads an unknown buffer");
  for (uint32_t id : inst.outs)
    if (id >= k.plan.buffers.size())
      return k.bad("writes an unknown buffer");
  // A unit's shard copy is its adamw_shard's to write (the fourth output):
  // any other writer would leave it other than the shard rounded.
  for (size_t j = 0; j < inst.outs.size(); ++j)
    if (k.plan.buffers[inst.outs[j]].kind == plan::BufferKind::ShardCopy &&
        !(info.opcode == plan::Opcode::AdamWShard && j == 3))
      return k.bad("writes a unit's shard copy, which only the unit's "
                   "adamw_shard writes");
  return true;
}

/// The element types `rule` admits, for errors: "f32", "f32 or bf16".
static std::string admittedTypes(plan::ElementRule rule) {
  std::string names;
  for (uint32_t t = 0; t < plan::kNumDTypes; ++t)
    if (plan::admits(rule, plan::DType(t)))
      names +=
          (names.empty() ? "" : " or ") + std::string(plan::kDTypeNames[t]);
  return names;
}

/// Operand element types by the kernel table's rules; token ids must come
/// from a step input (no kernel writes ids, so only an input, which the
/// runtime fills with checked data, holds them).
static bool checkElementTypes(const KernelCheck &k, plan::DType &elementType) {
  const plan::KernelInfo &info = k.info();
  // One element type for all Float operands: the kernel runs in it.
  std::optional<plan::DType> element;
  auto agrees = [&](plan::ElementRule rule, plan::DType dtype) {
    if (rule != plan::ElementRule::Float || !plan::isFloatType(dtype))
      return true;
    if (!element)
      element = dtype;
    return *element == dtype;
  };
  for (size_t i = 0; i < k.inst.ins.size(); ++i)
    if (!agrees(info.ins[i].rule, k.in(i).dtype))
      return k.bad("mixes f32 and bf16 operands (operand #" +
                   std::to_string(i) + ")");
  for (size_t i = 0; i < k.inst.outs.size(); ++i)
    if (!agrees(info.outs[i].rule, k.out(i).dtype))
      return k.bad("mixes f32 and bf16 operands (result #" + std::to_string(i) +
                   ")");
  elementType = element.value_or(plan::DType::F32);
  for (size_t i = 0; i < k.inst.ins.size(); ++i)
    if (!plan::admits(info.ins[i].rule, k.in(i).dtype))
      return k.bad("operand #" + std::to_string(i) +
                   " has the wrong element type");
  for (size_t i = 0; i < k.inst.outs.size(); ++i)
    if (!plan::admits(info.outs[i].rule, k.out(i).dtype))
      return k.bad("result #" + std::to_string(i) + " is not " +
                   admittedTypes(info.outs[i].rule));
  for (size_t i = 0; i < k.inst.ins.size(); ++i)
    if (info.ins[i].rule == plan::ElementRule::TokenIds &&
        k.in(i).kind != plan::BufferKind::Input)
      return k.bad("operand #" + std::to_string(i) +
                   " (token ids) is not a step input");
  return true;
}

/// The kernel table's shape rules on the kernel's buffers, binding `dims`.
static bool checkTableShapes(const KernelCheck &k, plan::shapes::Dims &dims) {
  std::array<plan::shapes::ShapeRef, plan::kMaxKernelInputs> ins;
  std::array<plan::shapes::ShapeRef, plan::kMaxKernelOutputs> outs;
  for (size_t i = 0; i < k.inst.ins.size(); ++i)
    ins[i] = plan::shapes::ShapeRef(k.in(i).shape);
  for (size_t j = 0; j < k.inst.outs.size(); ++j)
    outs[j] = plan::shapes::ShapeRef(k.out(j).shape);
  std::string reason;
  if (!plan::checkKernelShapes(k.info().opcode, ins.data(), k.inst.ins.size(),
                               outs.data(), k.inst.outs.size(),
                               k.inst.params.data(), dims, reason))
    return k.bad(reason);
  return true;
}

//===----------------------------------------------------------------------===//
// The extra checks FSDPKernels.td names (`extraCheck`)
//===----------------------------------------------------------------------===//

/// embedding: notes the smallest token table (its rows V), which must hold
/// the cross-entropies' vocabulary.
static bool noteTableRows(const KernelCheck &k, const plan::shapes::Dims &dims,
                          Vocabulary &v) {
  int64_t rows = dims["V"];
  if (v.smallestTable < 0 || rows < v.smallestTable) {
    v.smallestTable = rows;
    v.smallestTableAt = k.index;
  }
  return true;
}

/// cross_entropy and its backward: one vocabulary (the logits' width V)
/// for all of them.
static bool checkVocabulary(const KernelCheck &k,
                            const plan::shapes::Dims &dims, Vocabulary &v) {
  int64_t width = dims["V"];
  if (v.vocabulary < 0) {
    v.vocabulary = width;
    v.vocabularyAt = k.index;
  } else if (width != v.vocabulary) {
    return k.bad("has a vocabulary of " + std::to_string(width) + ", kernel #" +
                 std::to_string(v.vocabularyAt) + " one of " +
                 std::to_string(v.vocabulary));
  }
  return true;
}

/// adamw: a parameter and its two moments.
static bool checkAdamWBuffers(const KernelCheck &k, const plan::shapes::Dims &,
                              Vocabulary &) {
  if (k.out(0).kind != plan::BufferKind::Param ||
      k.out(1).kind != plan::BufferKind::AdamM ||
      k.out(2).kind != plan::BufferKind::AdamV)
    return k.bad("does not update a parameter and its moments");
  return true;
}

/// adamw_shard: exactly a unit's shard and its moments (of one shape: the
/// table's rules).
static bool checkShardUpdate(const KernelCheck &k, const plan::shapes::Dims &,
                             Vocabulary &) {
  const Plan &plan = k.plan;
  if (k.out(0).kind != plan::BufferKind::Param || k.out(0).unit < 0 ||
      k.out(1).kind != plan::BufferKind::AdamM ||
      k.out(2).kind != plan::BufferKind::AdamV ||
      k.out(1).unit != k.out(0).unit || k.out(2).unit != k.out(0).unit ||
      k.out(0).numElements() !=
          plan::maxShardSize(plan.units[k.out(0).unit].flatSize,
                             plan.unitShards(uint32_t(k.out(0).unit))))
    return k.bad("does not update a unit's shard and its moments");
  // The shard's copy is written here and nowhere else: where the unit has
  // one, each update writes it (a stale copy would be read as the weights).
  uint32_t copy = plan.units[k.out(0).unit].copyBuffer;
  if (k.inst.outs.size() > 3 ? k.inst.outs[3] != copy : copy != plan::kNone)
    return k.bad(copy == plan::kNone
                     ? "writes a shard copy that is not its unit's"
                     : "does not write the shard copy of unit '" +
                           plan.units[k.out(0).unit].name + "'");
  // A bf16 gradient is widened as AdamW reads it; a selection bias's
  // update reads its load signal in f32.
  if (k.in(0).dtype == plan::DType::BF16)
    for (const ParamDesc &param : plan.params)
      if (param.isSelectionBias() && param.unit == uint32_t(k.out(0).unit))
        return k.bad("updates unit '" + plan.units[param.unit].name +
                     "', which holds a selection bias, from a bf16 gradient "
                     "(its load signal must be f32)");
  return true;
}

/// The sharding collectives: an all_gather of a unit's shard into its flat
/// size, a reduce_scatter into a shard, an all_reduce_mean of a shard of
/// its unit in place.
/// An expert-parallel unit's are sharded over S / G ranks.
static bool checkSharded(const KernelCheck &k, const plan::shapes::Dims &,
                         Vocabulary &) {
  const Plan &plan = k.plan;
  int64_t shards =
      isExpertCollective(k) ? plan.shardSize / plan.expertSize : plan.shardSize;
  switch (k.info().opcode) {
  case plan::Opcode::AllGather:
    if ((k.in(0).kind != plan::BufferKind::Param &&
         k.in(0).kind != plan::BufferKind::ShardCopy) ||
        k.in(0).unit < 0 ||
        k.out(0).numElements() != plan.units[k.in(0).unit].flatSize ||
        k.in(0).numElements() !=
            plan::maxShardSize(k.out(0).numElements(), shards))
      return k.bad("does not gather a unit's shard into its flat size");
    return true;
  case plan::Opcode::ReduceScatter:
    if (k.out(0).numElements() !=
        plan::maxShardSize(k.in(0).numElements(), shards))
      return k.bad("the shard does not match the flat gradient");
    return true;
  default: { // AllReduceMean: in place, on a shard of the unit it names
    auto unit = namedUnit(k);
    if (unit == plan.units.end() || k.inst.ins[0] != k.inst.outs[0] ||
        k.in(0).numElements() != plan::maxShardSize(unit->flatSize, shards))
      return k.bad("does not average a shard of its unit in place");
    return true;
  }
  }
}

/// copy and cast: between buffers that share no byte.
static bool checkNoOverlap(const KernelCheck &k, const plan::shapes::Dims &,
                           Vocabulary &) {
  if (overlap(k.in(0), k.out(0)))
    return k.bad("copies between overlapping buffers");
  return true;
}

/// grad_sq_sum: a gradient shard of the unit it names, with that unit's
/// flat size (each rank counts its own elements of the shard by it).
static bool checkGradSqSum(const KernelCheck &k, const plan::shapes::Dims &,
                           Vocabulary &) {
  using plan::Opcode;
  double flat = k.inst.params[plan::paramIndex(Opcode::GradSqSum, "flat_size")];
  auto unit = namedUnit(k);
  if (unit == k.plan.units.end() || double(unit->flatSize) != flat)
    return k.bad("flat_size " + paramText(flat) +
                 " is not the flat size of its unit '" + k.inst.unit + "'");
  if (k.in(0).numElements() !=
      plan::maxShardSize(unit->flatSize, k.plan.unitShards(uint32_t(
                                             unit - k.plan.units.begin()))))
    return k.bad("the gradient is not a shard of unit '" + unit->name + "'");
  return true;
}

/// all_reduce_sum: the sum of squares counts each element once, over the
/// shard group (replicas hold the same shard).
static bool checkReduceAxis(const KernelCheck &k, const plan::shapes::Dims &,
                            Vocabulary &) {
  if (k.inst.params[plan::kAllReduceSumAxis] != double(plan::CommAxis::Shard))
    return k.bad("runs over axis " +
                 paramText(k.inst.params[plan::kAllReduceSumAxis]) +
                 ", not 0 (shard), the axis of all_reduce_sum");
  return true;
}

/// clip_coefficient: a positive finite max_norm.
static bool checkMaxNorm(const KernelCheck &k, const plan::shapes::Dims &,
                         Vocabulary &) {
  double maxNorm =
      k.inst
          .params[plan::paramIndex(plan::Opcode::ClipCoefficient, "max_norm")];
  if (!(maxNorm > 0.0) || std::isinf(maxNorm))
    return k.bad("has a max_norm that is not positive and finite");
  return true;
}

namespace {
using ExtraCheck = bool (*)(const KernelCheck &, const plan::shapes::Dims &,
                            Vocabulary &);
/// An extra check by the name the kernel table gives it. `afterShapes`:
/// it reads dims the shape rules bind, so it runs after them; the others
/// run before (their reasons name the plan's relations first).
struct NamedCheck {
  std::string_view name;
  ExtraCheck check;
  bool afterShapes;
};
constexpr NamedCheck kExtraChecks[] = {
    {"noteTableRows", noteTableRows, true},
    {"checkVocabulary", checkVocabulary, true},
    {"checkAdamWBuffers", checkAdamWBuffers, false},
    {"checkShardUpdate", checkShardUpdate, false},
    {"checkSharded", checkSharded, false},
    {"checkNoOverlap", checkNoOverlap, true},
    {"checkGradSqSum", checkGradSqSum, false},
    {"checkReduceAxis", checkReduceAxis, false},
    {"checkMaxNorm", checkMaxNorm, false},
};

constexpr const NamedCheck *findExtraCheck(std::string_view name) {
  for (const NamedCheck &c : kExtraChecks)
    if (c.name == name)
      return &c;
  return nullptr;
}

/// Every extra check the table names is one of kExtraChecks.
constexpr bool extraChecksExist() {
  for (const plan::KernelShapeInfo &info : plan::kKernelShapes)
    if (!info.extraCheck.empty() && !findExtraCheck(info.extraCheck))
      return false;
  return true;
}
static_assert(extraChecksExist(),
              "FSDPKernels.td names an extraCheck that PlanKernelChecks.cpp "
              "lacks");
} // namespace

/// The shapes each kernel assumes (the table's rules: no width a kernel
/// divides by is zero, every dimension that reaches a BLAS call or a CUDA
/// grid fits in an int) and its named extra check; `dims` as the rules
/// bind them.
static bool checkShapes(const KernelCheck &k, Vocabulary &vocabulary,
                        plan::shapes::Dims &dims) {
  const NamedCheck *extra =
      findExtraCheck(plan::kernelShapes(k.info().opcode).extraCheck);
  if (extra && !extra->afterShapes && !extra->check(k, dims, vocabulary))
    return false;
  if (!checkTableShapes(k, dims))
    return false;
  return !extra || !extra->afterShapes || extra->check(k, dims, vocabulary);
}

/// Every embedding table has a row for each id below the cross-entropies'
/// vocabulary (what the data is checked against); sets plan.vocabulary.
static bool checkTables(Plan &plan, const Vocabulary &v, std::string &why) {
  if (v.smallestTable >= 0 && v.vocabulary >= 0 &&
      v.smallestTable < v.vocabulary) {
    why = "kernel #" + std::to_string(v.smallestTableAt) +
          " (embedding): a table of " + std::to_string(v.smallestTable) +
          " rows for ids below the vocabulary of " +
          std::to_string(v.vocabulary) + " (kernel #" +
          std::to_string(v.vocabularyAt) + ")";
    return false;
  }
  plan.vocabulary =
      v.vocabulary >= 0 ? v.vocabulary : std::max<int64_t>(v.smallestTable, 0);
  return true;
}

/// The gradients' sum of squares buffer is what a clip_coefficient reads:
/// the runtime reports its square root as the gradient norm.
static bool checkGradSqBuffer(const Plan &plan, std::string &why) {
  if (plan.gradSqBuffer == plan::kNone)
    return true;
  for (const Instruction &inst : plan.program)
    if (inst.kernel->opcode == plan::Opcode::ClipCoefficient &&
        inst.ins[0] == plan.gradSqBuffer)
      return true;
  why = "the gradients' sum of squares buffer is not what a "
        "clip_coefficient reads";
  return false;
}

namespace {
/// The kernel and output slot that last wrote each buffer of indices.
struct IndexWriter {
  size_t kernel = 0, slot = 0;
  bool written = false;
};
} // namespace

/// Indices (ElementRule::Indices) are read only as an earlier kernel wrote
/// them: from its output of the same name (a router's experts, a sort's
/// order, position and offsets), and a router's choices among as many
/// experts as the reader's E. So every index a kernel reads is in the
/// range it assumes. Then notes the indices this kernel writes.
/// What an index operand holds, by its name: a matrix of row counts (a
/// `counts`, the `send` and `recv` of an all-to-all, which read the counts
/// of either direction, and the `kept` of a capacity), else what its name
/// says.
static std::string_view indexKind(std::string_view name) {
  return name == "send" || name == "recv" || name == "kept" ? "counts" : name;
}

static bool checkIndices(const KernelCheck &k, const plan::shapes::Dims &dims,
                         std::vector<IndexWriter> &writers) {
  const plan::KernelInfo &info = k.info();
  for (size_t i = 0; i < k.inst.ins.size(); ++i) {
    if (info.ins[i].rule != plan::ElementRule::Indices)
      continue;
    std::string name(info.ins[i].name);
    const IndexWriter &w = writers[k.inst.ins[i]];
    if (!w.written)
      return k.bad("operand #" + std::to_string(i) + " (" + name +
                   ") is not written by an earlier kernel");
    const Instruction &producer = k.plan.program[w.kernel];
    std::string wrote(producer.kernel->outs[w.slot].name);
    std::string at = "kernel #" + std::to_string(w.kernel) + " (" +
                     std::string(producer.kernel->name) + ")";
    if (indexKind(wrote) != indexKind(name))
      return k.bad("operand #" + std::to_string(i) + " (" + name + ") is " +
                   at + "'s " + wrote + ", not its " + name);
    if (name == "experts" && dims.bound("E") &&
        k.plan.buffers[producer.ins[0]].shape.back() != dims["E"])
      return k.bad(
          "reads the choices among " +
          std::to_string(k.plan.buffers[producer.ins[0]].shape.back()) +
          " experts of " + at + " as among " + std::to_string(dims["E"]));
  }
  for (size_t j = 0; j < k.inst.outs.size(); ++j)
    if (info.outs[j].rule == plan::ElementRule::Indices)
      writers[k.inst.outs[j]] = {k.index, j, true};
  return true;
}

bool validateKernels(Plan &plan, std::string &why) {
  Vocabulary vocabulary;
  std::vector<IndexWriter> writers(plan.buffers.size());
  for (size_t i = 0; i < plan.program.size(); ++i) {
    KernelCheck k{plan, plan.program[i], i, why};
    plan::shapes::Dims dims;
    if (!checkOperandCounts(k) ||
        !checkElementTypes(k, plan.program[i].elementType) ||
        !checkShapes(k, vocabulary, dims) || !checkIndices(k, dims, writers))
      return false;
  }
  return checkTables(plan, vocabulary, why) && validateStreams(plan, why) &&
         checkGradSqBuffer(plan, why) && checkEvalStep(plan, why);
}
} // namespace fsdp::rt
