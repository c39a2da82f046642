//===- EvalStep.h - the plan's evaluation step ------------------*- C++ -*-===//
//
// The loader's checks of the evaluation step, the prefix of the program
// that fsdp-run --val-data runs alone (docs/plan-format.md).
//
//===----------------------------------------------------------------------===//

#ifndef FSDP_RUNTIME_EVALSTEP_H
#define FSDP_RUNTIME_EVALSTEP_H

#include "fsdp/runtime/plan/Plan.h"

#include <string>

namespace fsdp::rt {

/// Checks plan.evalKernels (after the streams are validated): within the
/// program, the loss's last writer inside it, no parameter or optimizer
/// moment written by it, no bucket split by its end. Fills
/// plan.evalDrainTokens. False with `why` on a plan that breaks a rule.
bool checkEvalStep(Plan &plan, std::string &why);

} // namespace fsdp::rt

#endif // FSDP_RUNTIME_EVALSTEP_H
