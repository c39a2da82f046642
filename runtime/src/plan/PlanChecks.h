//===- PlanChecks.h - the plan loader's shared checks -----------*- C++ -*-===//
//
// Plan.cpp reads a plan's records and checks their structure; then
// PlanKernelChecks.cpp checks each kernel (counts, element types, the kernel
// table's shapes, the named extra checks) and PlanStreamChecks.cpp the
// collectives in flight, their tokens and waits. This is what they share.
//
//===----------------------------------------------------------------------===//

#ifndef FSDP_RUNTIME_PLANCHECKS_H
#define FSDP_RUNTIME_PLANCHECKS_H

#include "fsdp/runtime/plan/Plan.h"

#include <sstream>
#include <string>

namespace fsdp::rt {
/// One kernel of the program under check: its operands, and its errors,
/// which name it ("kernel #3 (linear): ...").
struct KernelCheck {
  const Plan &plan;
  const Instruction &inst;
  size_t index;
  std::string &why;

  const plan::KernelInfo &info() const { return *inst.kernel; }
  const BufferDesc &in(size_t k) const { return plan.buffers[inst.ins[k]]; }
  const BufferDesc &out(size_t k) const { return plan.buffers[inst.outs[k]]; }
  bool bad(const std::string &what) const {
    why = "kernel #" + std::to_string(index) + " (" +
          std::string(inst.kernel->name) + "): " + what;
    return false;
  }
};

/// Whether the sharding collective `k` (all_gather, reduce_scatter,
/// all_reduce_mean) moves an expert-parallel unit's shard: the unit of a
/// gather's shard, the unit the others name.
inline bool isExpertCollective(const KernelCheck &k) {
  int32_t unit = -1;
  if (k.info().opcode == plan::Opcode::AllGather)
    unit = k.in(0).unit;
  else
    for (size_t u = 0; u < k.plan.units.size(); ++u)
      if (!k.inst.unit.empty() && k.plan.units[u].name == k.inst.unit)
        unit = int32_t(u);
  return unit >= 0 && size_t(unit) < k.plan.units.size() &&
         k.plan.units[unit].expertParallel;
}

/// A parameter as errors print it.
inline std::string paramText(double v) {
  std::ostringstream os;
  os << v;
  return os.str();
}

/// True when buffers a and b share an arena byte.
inline bool overlap(const BufferDesc &a, const BufferDesc &b) {
  return a.offset < b.offset + b.size && b.offset < a.offset + a.size;
}

/// Every kernel's operands: counts, ids, element types and shapes, as the
/// CPU and CUDA kernels assume them (PlanKernelChecks.cpp); then the
/// streams, the norm buffer and the evaluation step.
bool validateKernels(Plan &plan, std::string &why);

/// The asynchronous collectives against their waits (PlanStreamChecks.cpp).
bool validateStreams(Plan &plan, std::string &why);
} // namespace fsdp::rt

#endif // FSDP_RUNTIME_PLANCHECKS_H
