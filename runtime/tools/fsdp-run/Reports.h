//===- Reports.h - what fsdp-run prints and writes --------------*- C++ -*-===//
//
// Rank 0's lines before the first step (backend, plan, data, weights,
// validation), after an evaluation and after a stop, and what a finished
// run ends with: the summary (steps, FLOPs, validation, memory measured
// vs predicted), --profile's kernel times, and the reserved outputs
// (--export, --report-json, --trace) written.
//
//===----------------------------------------------------------------------===//

#ifndef FSDP_RUN_REPORTS_H
#define FSDP_RUN_REPORTS_H

#include "MemoryReport.h"
#include "Options.h"

#include "fsdp/runtime/Backend.h"
#include "fsdp/runtime/Communicator.h"
#include "fsdp/runtime/Data.h"
#include "fsdp/runtime/Progress.h"
#include "fsdp/runtime/RunOutputs.h"
#include "fsdp/runtime/Session.h"
#include "fsdp/runtime/StepInputs.h"
#include "fsdp/runtime/Trainer.h"
#include "fsdp/runtime/Validation.h"
#include "fsdp/runtime/Weights.h"

#include <cstdint>
#include <string>

namespace fsdprun {

/// Rank 0's lines before the first step: the backend and the ranks, the
/// plan, the data (`tokens`; null: the synthetic teacher).
void printStart(const Options &o, const Plan &plan, const Backend &backend,
                const Communicator &comm, const std::string &collectiveMode,
                const StepInputs &inputs, const TokenData *tokens);

/// Rank 0's line on what each evaluation reads and when it runs.
void printValidationPlan(const Options &o, const Plan &plan, const Validator &v,
                         int64_t tokensPerBatch);

/// Rank 0's lines on where the weights come from and go to.
void printWeightLines(const Options &o, const Plan &plan,
                      const InitialWeights *weights, WeightNaming naming);

/// Rank 0's line after an evaluation. Formatted on the stack: a step
/// allocates nothing.
void printValidation(const ValidationPoint &p, int64_t tokensPerBatch);

/// A run that a signal stopped: rank 0's line; the exit code.
int reportStop(const Options &o, const Communicator &comm, int64_t step,
               int signal);

/// After the last step: the parameters gathered, rank 0's summary and
/// profile, then every reserved output written.
void finish(const Options &o, const Plan &plan, Session &session,
            const Backend &backend, const Communicator &comm,
            const std::string &collectiveMode, const TrainResult &result,
            const HeapFigures &heap, const ProgressMeter &meter,
            RunOutputFiles &outputs, WeightNaming naming);

} // namespace fsdprun

#endif // FSDP_RUN_REPORTS_H
