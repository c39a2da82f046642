//===- EvalStep.cpp - the plan's evaluation step --------------------------===//
//
// The evaluation step is not a program of its own but the training step's
// first kernels: the compiler proves, and the loader checks again, that
// they compute the loss and leave the training state alone, so running
// them between steps changes nothing a later step reads.
//
//===----------------------------------------------------------------------===//

#include "plan/EvalStep.h"

#include <set>

namespace fsdp::rt {

/// A buffer that outlives a step: what evaluation must not write.
static bool isTrainingState(plan::BufferKind kind) {
  return plan::isUnitState(kind);
}

/// A collective that may be started (and bucketed) on a stream.
static bool isCollective(plan::Opcode opcode) {
  return opcode == plan::Opcode::AllGather ||
         opcode == plan::Opcode::ReduceScatter ||
         opcode == plan::Opcode::AllReduceMean ||
         opcode == plan::Opcode::AllToAll;
}

/// The evaluation's kernels: none writes the training state, and the loss
/// is written inside them and never after.
static bool checkWrites(const Plan &plan, std::string &why) {
  bool lossWritten = false;
  for (size_t i = 0; i < plan.program.size(); ++i) {
    const Instruction &inst = plan.program[i];
    bool inside = i < plan.evalKernels;
    for (uint32_t out : inst.outs) {
      std::string at = "kernel #" + std::to_string(i) + " (" +
                       std::string(inst.kernel->name) + ")";
      if (out == plan.lossBuffer && !inside) {
        why = at + " writes the loss after the evaluation step's " +
              std::to_string(plan.evalKernels) + " kernels";
        return false;
      }
      lossWritten |= out == plan.lossBuffer;
      if (inside && isTrainingState(plan.buffers[out].kind)) {
        why = at + " in the evaluation step writes a " +
              std::string(
                  plan::kBufferKindNames[uint32_t(plan.buffers[out].kind)]) +
              " buffer (the evaluation must leave the training state alone)";
        return false;
      }
    }
  }
  if (!lossWritten)
    why = "the evaluation step's " + std::to_string(plan.evalKernels) +
          " kernels do not write the loss";
  return lossWritten;
}

bool checkEvalStep(Plan &plan, std::string &why) {
  plan.evalDrainTokens.clear();
  if (plan.evalKernels == 0)
    return true;
  if (plan.evalKernels > plan.program.size()) {
    why = "the evaluation step has " + std::to_string(plan.evalKernels) +
          " kernels, the program " + std::to_string(plan.program.size());
    return false;
  }
  if (!checkWrites(plan, why))
    return false;
  // A bucket starts as one: the evaluation's end cannot fall inside one.
  if (plan.evalKernels < plan.program.size()) {
    const Instruction &next = plan.program[plan.evalKernels];
    if (isCollective(next.kernel->opcode) &&
        plan::collectiveParams(next.params.data()).grouped()) {
      why = "the evaluation step ends inside a bucket of collectives "
            "(kernel #" +
            std::to_string(plan.evalKernels) + " is grouped)";
      return false;
    }
  }
  // The streams are valid: every started collective has one later wait.
  std::set<uint32_t> open;
  for (uint32_t i = 0; i < plan.evalKernels; ++i) {
    const Instruction &inst = plan.program[i];
    if (isCollective(inst.kernel->opcode)) {
      plan::CollectiveParams p = plan::collectiveParams(inst.params.data());
      if (p.started())
        open.insert(p.tokenId());
    } else if (inst.kernel->opcode == plan::Opcode::Wait) {
      open.erase(uint32_t(plan::waitToken(inst.params.data())));
    }
  }
  plan.evalDrainTokens.assign(open.begin(), open.end());
  return true;
}

} // namespace fsdp::rt
