//===- KernelDispatch.h - one decoding of the compute kernels ---*- C++ -*-===//
//
// Both backends run the same kernel set with the same argument lists (see
// cpu/Kernels.h): only the functions differ (cpu:: with a CBLAS, cuda::
// with a stream and a cuBLAS handle). This decodes a compute instruction's
// operands and dimensions from the plan once, for both, and calls the
// member function of the same name on the backend's kernel set `k`: the
// dims are those the kernel table's shape rules bind (KernelRules.h), the
// calls are generated from the table's `call` fields (KernelTable.inc).
// Collectives and waits are the backends' own business.
//
//===----------------------------------------------------------------------===//

#ifndef FSDP_RUNTIME_KERNELDISPATCH_H
#define FSDP_RUNTIME_KERNELDISPATCH_H

#include "fsdp/runtime/KernelRules.h"
#include "fsdp/runtime/exec/AdamWTensors.h"
#include "fsdp/runtime/plan/Plan.h"

#include <cstdint>
#include <cstdlib>
#include <string_view>
#include <vector>

/// The kernels runCompute calls by name, for a backend to bind with an
/// X-macro: the GEMM-based ones (which the CPU runs with its CBLAS), and
/// the rest. crossEntropyForward and gradSqSum (which take a scratch only
/// the GPU uses; `boundByHand`) and copy are bound by hand; casts are the
/// backends' own.
/// (FSDP_RUNTIME_GEMM_KERNELS, FSDP_RUNTIME_OTHER_KERNELS: generated from
/// the kernels' `dispatch` in FSDPKernels.td.)
#define FSDP_KERNEL_DISPATCH
#include "fsdp/runtime/KernelTable.inc"

namespace fsdp::rt {

/// Whether `opcode` computes on its Float operands in their element type:
/// every kernel but casts, collectives (the all-to-alls too: they move
/// rows as they are) and waits, and copies (bytes,
/// whatever the type: runCompute copies them, but a backend may first).
/// What the CPU runs on widened copies for a bf16 instruction.
constexpr bool isComputeKernel(plan::Opcode opcode) {
  using plan::Opcode;
  return opcode != Opcode::Cast && opcode != Opcode::Copy &&
         opcode != Opcode::AllGather && opcode != Opcode::ReduceScatter &&
         opcode != Opcode::AllReduceSum && opcode != Opcode::AllReduceMean &&
         opcode != Opcode::AllToAllCounts && opcode != Opcode::AllToAll &&
         opcode != Opcode::Wait;
}

/// What runCompute passes a kernel: its operands where the kernel reads
/// them (`T` for its Float operands, float for its F32 ones, int32_t for
/// token ids and indices), its parameters by the kernel table's names, and its
/// dims as the table's shape rules bind them (KernelRules.h; the loader checked
/// them, so they bind). FSDP_KERNEL_CALLS's generated cases spell their
/// arguments with these.
template <typename T, typename Address> struct KernelArgs {
  const Plan &plan;
  const Instruction &inst;
  Address address;
  const double *params;
  plan::shapes::Dims dims;

  T *I(size_t i) const { return reinterpret_cast<T *>(address(inst.ins[i])); }
  T *O(size_t j) const { return reinterpret_cast<T *>(address(inst.outs[j])); }
  float *SI(size_t i) const {
    return reinterpret_cast<float *>(address(inst.ins[i]));
  }
  float *SO(size_t j) const {
    return reinterpret_cast<float *>(address(inst.outs[j]));
  }
  const int32_t *ids(size_t i) const {
    return reinterpret_cast<const int32_t *>(address(inst.ins[i]));
  }
  /// Indices (ElementRule::Indices) an earlier kernel wrote, and ones this
  /// kernel writes.
  const int32_t *idx(size_t i) const { return ids(i); }
  int32_t *idxOut(size_t j) const {
    return reinterpret_cast<int32_t *>(address(inst.outs[j]));
  }
  /// Input i's element type, and its elements as bf16 bits (an AnyFloat
  /// operand that holds bf16).
  plan::DType inType(size_t i) const { return plan.buffers[inst.ins[i]].dtype; }
  const uint16_t *bf16I(size_t i) const {
    return reinterpret_cast<const uint16_t *>(address(inst.ins[i]));
  }
  /// An optional input: nullptr when the instruction leaves it out.
  T *optI(size_t i) const { return i < inst.ins.size() ? I(i) : nullptr; }
  /// An optional output of bf16 bits (AdamW's shard copy): nullptr when
  /// the instruction leaves it out.
  uint16_t *optBF16O(size_t j) const {
    return j < inst.outs.size()
               ? reinterpret_cast<uint16_t *>(address(inst.outs[j]))
               : nullptr;
  }
  float *optSI(size_t i) const { return i < inst.ins.size() ? SI(i) : nullptr; }
  int64_t dim(std::string_view name) const { return dims[name]; }
  /// Parameters by the kernel table's names, never by position. (A name
  /// the table does not list is a bug here, caught by the kernel tests:
  /// paramIndex returns the count, past the loaded parameters.)
  double param(std::string_view name) const {
    size_t index = plan::paramIndex(inst.kernel->opcode, name);
    if (index >= inst.params.size())
      std::abort();
    return params[index];
  }

  /// Binds `dims` by the kernel table's shape rules; aborts on a plan the
  /// loader would have refused.
  void bindDims() {
    std::array<plan::shapes::ShapeRef, plan::kMaxKernelInputs> ins;
    std::array<plan::shapes::ShapeRef, plan::kMaxKernelOutputs> outs;
    for (size_t i = 0; i < inst.ins.size(); ++i)
      ins[i] = plan::shapes::ShapeRef(plan.buffers[inst.ins[i]].shape);
    for (size_t j = 0; j < inst.outs.size(); ++j)
      outs[j] = plan::shapes::ShapeRef(plan.buffers[inst.outs[j]].shape);
    std::string why;
    if (!plan::checkKernelShapes(inst.kernel->opcode, ins.data(),
                                 inst.ins.size(), outs.data(), inst.outs.size(),
                                 inst.params.data(), dims, why))
      std::abort();
  }
};

/// The index of unit `name` when it holds a mixture of experts' selection
/// bias (whose gradient slot holds a load signal, not a gradient); -1
/// otherwise.
inline int32_t selectionBiasUnit(const Plan &plan, const std::string &name) {
  for (const ParamDesc &param : plan.params)
    if (param.isSelectionBias() && param.unit < plan.units.size() &&
        plan.units[param.unit].name == name)
      return int32_t(param.unit);
  return -1;
}

/// The index of unit `name`; -1 when there is none (a kernel outside
/// units).
inline int32_t unitNamed(const Plan &plan, const std::string &name) {
  for (size_t u = 0; u < plan.units.size(); ++u)
    if (plan.units[u].name == name)
      return int32_t(u);
  return -1;
}

/// adamw and adamw_shard: appends to `tensors` what the instruction
/// updates (AdamWTensors.h: its parameter, or its shard by parameter
/// segment, each with its decay, with the optional scale and copy), and
/// runs a mixture of experts' selection bias update, which is no AdamW,
/// there and then (it touches only its own segment).
template <typename Kernels, typename Args>
void collectAdamW(Kernels &k, const Args &a, int rank,
                  std::vector<AdamWTensor> &tensors) {
  using plan::Opcode;
  const Instruction &inst = a.inst;
  const BufferDesc &out0 = a.plan.buffers[inst.outs[0]];
  const bool sharded = inst.kernel->opcode == Opcode::AdamWShard;
  // A sharded AdamW's optional second input scales its gradient
  // (gradient clipping's coefficient, a scalar where the kernel runs).
  const float *scale = sharded ? a.optSI(1) : nullptr;
  // Its gradient may be bf16 (mixed precision's reduced shard, read
  // without a cast): the kernel widens it as it reads it.
  const bool bf16Grad = sharded && a.inType(0) == plan::DType::BF16;
  const size_t gradBytes = bf16Grad ? 2 : 4;
  // Its optional fourth output, the unit's shard copy (bf16, the loader
  // checked): each updated element is rounded into it as it is written.
  uint16_t *copy = sharded ? a.optBF16O(3) : nullptr;
  auto copyAt = [&](int64_t at) { return copy ? copy + at : nullptr; };
  // Elements [at, at + n) of the parameter, moments and grad.
  auto adamw = [&](int64_t at, int64_t n, bool decay) {
    if (n <= 0)
      return;
    AdamWTensor t;
    t.param = a.SO(0) + at;
    t.m = a.SO(1) + at;
    t.v = a.SO(2) + at;
    t.grad = reinterpret_cast<const unsigned char *>(a.SI(0)) + at * gradBytes;
    t.bf16Grad = bf16Grad;
    t.copy = copyAt(at);
    t.gradScale = scale;
    t.n = n;
    t.lr = float(a.param("lr"));
    t.beta1 = float(a.param("beta1"));
    t.beta2 = float(a.param("beta2"));
    t.eps = float(a.param("eps"));
    t.weightDecay = decay ? float(a.param("weight_decay")) : 0.0f;
    tensors.push_back(t);
  };
  if (!sharded)
    return adamw(0, out0.numElements(), /*decay=*/true);
  // Segment by parameter: a no_weight_decay parameter gets no decay, also
  // where its range straddles two ranks; a shorter shard's padding is left
  // alone. A mixture of experts' selection bias moves by its rate against
  // the sign of its load signal instead (docs/moe.md; the loader refuses
  // a bf16 gradient there).
  forEachShardSegment(
      a.plan, uint32_t(out0.unit), rank,
      [&](const ParamDesc &param, int64_t at, int64_t, int64_t count) {
        if (param.isSelectionBias())
          k.moeSelectionBiasUpdate(a.SO(0) + at, a.SI(0) + at, count,
                                   param.selectionBiasRate, copyAt(at));
        else
          adamw(at, count, !param.noWeightDecay);
      });
}

/// Whether `inst` is one of the optimizer's AdamW instructions, which the
/// executor runs in groups (runAdamWGroup).
inline bool isAdamW(const Instruction &inst) {
  return inst.kernel->opcode == plan::Opcode::AdamW ||
         inst.kernel->opcode == plan::Opcode::AdamWShard;
}

/// Runs `group` (AdamW instructions, Backend::runOptimizer) through `k` as
/// one multi-tensor AdamW over all their tensors: `params[i]` overrides
/// member i's parameters, `address` is as runCompute's, and `tensors` is
/// the caller's list, reused from call to call so that a step allocates
/// nothing.
template <typename Kernels, typename Address>
void runAdamWGroup(Kernels &k, const Plan &plan,
                   const std::vector<const Instruction *> &group,
                   const std::vector<const double *> &params, Address address,
                   int64_t step, int rank, std::vector<AdamWTensor> &tensors) {
  tensors.clear();
  for (size_t i = 0; i < group.size(); ++i) {
    KernelArgs<float, Address> a{plan, *group[i], address, params[i], {}};
    collectAdamW(k, a, rank, tensors);
  }
  if (!tensors.empty())
    k.adamwTensors(tensors.data(), tensors.size(), step);
}

/// The kernels runCompute runs by hand: AdamW (collectAdamW), the sum of
/// squares over this rank's part of a shard, and copies (in bytes,
/// whatever the type). False for any other.
template <typename T, typename Kernels, typename Args>
bool runByHand(Kernels &k, const Args &a, int64_t step, int rank,
               int worldSize) {
  using plan::Opcode;
  const Instruction &inst = a.inst;
  const BufferDesc &out0 = a.plan.buffers[inst.outs[0]];
  switch (inst.kernel->opcode) {
  case Opcode::AdamW:
  case Opcode::AdamWShard: { // a group of one
    std::vector<AdamWTensor> tensors;
    collectAdamW(k, a, rank, tensors);
    if (!tensors.empty())
      k.adamwTensors(tensors.data(), tensors.size(), step);
    return true;
  }
  case Opcode::Copy:
    k.copy(a.O(0), a.I(0), uint64_t(out0.numElements()) * sizeof(T));
    return true;
  case Opcode::GradSqSum: {
    // This rank's elements of the shard; a shorter shard's last is padding.
    // An expert-parallel unit's shard is of its S / G ranks.
    int32_t named = unitNamed(a.plan, inst.unit);
    bool expert = named >= 0 && a.plan.units[named].expertParallel;
    plan::ShardRange range = plan::shardRange(
        int64_t(a.param("flat_size")),
        expert ? a.plan.unitShardIndex(uint32_t(named), rank) : rank,
        expert ? a.plan.unitShards(uint32_t(named)) : worldSize);
    int32_t unit = selectionBiasUnit(a.plan, inst.unit);
    if (unit < 0) {
      k.gradSqSum(a.SO(0), a.I(0), a.optSI(1), range.end - range.begin,
                  a.SO(1));
      return true;
    }
    // A selection bias's load signal is no gradient: the sum runs over
    // the other parameters' segments, each onto the last.
    const float *acc = a.optSI(1);
    bool any = false;
    forEachShardSegment(
        a.plan, uint32_t(unit), rank,
        [&](const ParamDesc &param, int64_t at, int64_t, int64_t count) {
          if (param.isSelectionBias())
            return;
          k.gradSqSum(a.SO(0), a.I(0) + at, any ? a.SO(0) : acc, count,
                      a.SO(1));
          any = true;
        });
    if (!any)
      k.gradSqSum(a.SO(0), a.I(0), acc, 0, a.SO(1));
    return true;
  }
  default:
    return false;
  }
}

/// Runs compute instruction `inst` through `k`; returns false, doing
/// nothing, for casts, collectives and waits (the backends' own). `T` is
/// the element type its Float operands are passed as (float, or the
/// backend's bf16 type for a bf16 instruction); its F32 operands
/// (statistics, the loss, AdamW's state) are always float. `address(id)`
/// is where buffer `id` lies for the kernel: the arena, or where the
/// backend widened it. `params` overrides the instruction's parameters;
/// `step` is AdamW's step; `rank` of `worldSize` picks a sharded AdamW's
/// parameter segments and a grad_sq_sum's elements of its shard. Every
/// other kernel is called as its record in FSDPKernels.td says (`call`:
/// KernelTable.inc's FSDP_KERNEL_CALLS), with the dims its shape rules
/// bind.
template <typename T, typename Kernels, typename Address>
bool runCompute(Kernels &k, const Plan &plan, const Instruction &inst,
                Address address, const double *params, int64_t step, int rank,
                int worldSize) {
  KernelArgs<T, Address> a{plan, inst, address, params, {}};
  if (!isComputeKernel(inst.kernel->opcode) &&
      inst.kernel->opcode != plan::Opcode::Copy)
    return false;
  if (runByHand<T>(k, a, step, rank, worldSize))
    return true;
  a.bindDims();
  switch (inst.kernel->opcode) {
#define FSDP_KERNEL_CALLS
#include "fsdp/runtime/KernelTable.inc"
  default:
    break;
  }
  return false;
}

} // namespace fsdp::rt

#endif // FSDP_RUNTIME_KERNELDISPATCH_H
