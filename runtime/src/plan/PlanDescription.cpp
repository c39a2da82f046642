//===- PlanDescription.cpp - a loaded plan in a few lines -----------------===//
//
// What `fsdp-run --describe` prints: the mesh, the tables' sizes, the
// arena, the predicted peak and what lies outside the arena.
//
//===----------------------------------------------------------------------===//

#include "fsdp/runtime/plan/Plan.h"

#include <sstream>

namespace fsdp::rt {

std::string describePlan(const Plan &plan) {
  std::ostringstream os;
  uint64_t paramElements = 0;
  for (const ParamDesc &p : plan.params)
    paramElements += p.numElements();
  os << "plan " << plan.path << ": world size " << plan.worldSize;
  if (plan.shardSize != plan.worldSize)
    os << " (mesh " << plan.replicas() << "x" << plan.shardSize << ")";
  if (plan.expertSize > 1)
    os << ", expert groups of " << plan.expertSize;
  os << ", " << plan.params.size() << " parameters (" << paramElements
     << " elements), " << plan.buffers.size() << " buffers, "
     << plan.program.size() << " kernels\n"
     << "  arena " << plan.arenaSize << " bytes, predicted peak "
     << plan.peakBytes << " bytes at kernel #" << plan.peakKernel << " (params "
     << plan.peak.params << ", grads " << plan.peak.grads << ", optimizer "
     << plan.peak.optimizer << ", activations " << plan.peak.activations
     << ", scratch " << plan.peak.scratch << ", gathered " << plan.peak.gathered
     << ", inputs " << plan.peak.inputs << ")\n"
     << "  outside the arena (predicted): cpu " << plan.outsideArenaCpu
     << " bytes of heap, " << plan.outsideArenaCpuMapped << " mapped and "
     << plan.blasBytesPerThread << " per BLAS thread, cuda "
     << plan.outsideArenaCuda << " bytes of device memory\n"
     << "  model FLOPs per rank and step " << plan.modelFlops << "\n"
     << "  memory budget "
     << (plan.memoryBudget ? std::to_string(plan.memoryBudget) + " bytes"
                           : std::string("none"))
     << "\n";
  if (plan.evalKernels)
    os << "  evaluation step: kernels #0..#" << plan.evalKernels - 1 << " of "
       << plan.program.size() << " (the forward and the loss), "
       << plan.evalDrainTokens.size() << " collectives finished at its end\n";
  else
    os << "  evaluation step: none marked\n";
  for (uint32_t i = 0; i < plan.units.size(); ++i) {
    const UnitDesc &u = plan.units[i];
    os << "  unit " << u.name << ": " << u.flatSize << " elements, shard of "
       << plan::maxShardSize(u.flatSize, plan.unitShards(i));
    if (u.expertParallel) // its elements are one expert slice's
      os << " (expert-parallel: a slice over " << plan.unitShards(i)
         << " ranks)";
    if (u.copyBuffer != plan::kNone) // mixed precision at a group of one
      os << ", and its copy in "
         << plan::kDTypeNames[uint32_t(plan.buffers[u.copyBuffer].dtype)]
         << " (AdamW writes it, the regions read it)";
    os << "\n";
  }
  for (size_t i = 0; i < plan.inputs.size(); ++i) {
    if (plan.inputs[i] == plan::kNone)
      continue;
    const BufferDesc &b = plan.buffers[plan.inputs[i]];
    os << "  input " << i << ": " << plan::kDTypeNames[uint32_t(b.dtype)];
    for (int64_t d : b.shape)
      os << "x" << d;
    os << "\n";
  }
  return os.str();
}

} // namespace fsdp::rt
