//===- Setup.h - what fsdp-run does before the first step -------*- C++ -*-===//
//
// The steps between the ranks connecting and training: the plan's inputs
// and data loaded and checked, the ranks' agreement, the backend and the
// session started, the schedule, a resumed checkpoint; and the fault
// injection (--debug-stall, --debug-throw) that tests the watchdog and
// the error paths.
//
//===----------------------------------------------------------------------===//

#ifndef FSDP_RUN_SETUP_H
#define FSDP_RUN_SETUP_H

#include "Options.h"

#include "fsdp/runtime/Backend.h"
#include "fsdp/runtime/Checkpoint.h"
#include "fsdp/runtime/Communicator.h"
#include "fsdp/runtime/Data.h"
#include "fsdp/runtime/FlightRecorder.h"
#include "fsdp/runtime/LrSchedule.h"
#include "fsdp/runtime/NodeRank.h"
#include "fsdp/runtime/Plan.h"
#include "fsdp/runtime/Progress.h"
#include "fsdp/runtime/Session.h"
#include "fsdp/runtime/StepInputs.h"
#include "fsdp/runtime/Weights.h"

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

namespace fsdprun {

/// Ends the run when `plan` was compiled for another number of ranks.
void checkWorldSize(const Plan &plan, int ranks);

/// The plan's step inputs and, for a token plan, its data, loaded and
/// checked against the model before any rank agrees or trains. Returns
/// the data a token plan trains on, null for a feature plan.
const TokenData *loadInputs(const Options &o, const Plan &plan, int ranks,
                            StepInputs &inputs, TokenData &tokens);

/// --val-data's tokens, checked against the model and the plan's
/// evaluation step (null without --val-data); `batches` is how many global
/// batches each evaluation reads.
const TokenData *loadValidation(const Options &o, const Plan &plan, int ranks,
                                const StepInputs &inputs, TokenData &tokens,
                                int64_t &batches);

/// Sleeps where --debug-stall says: rank stallRank before step `step`;
/// throws where --debug-throw says.
void stallAt(const Options &o, int rank, int64_t step);

/// The ranks compare everything that changes numbers; false, each rank
/// having said why on its own, when they differ.
bool ranksAgree(const Options &o, const Plan &plan, Communicator &comm,
                const TokenData *tokens, const TokenData *validation,
                const InitialWeights *weights);

/// The backend --backend names, started on the ranks' communicator.
std::unique_ptr<Backend> startBackend(const Options &o, Communicator &comm,
                                      const NodeRank &local);

/// This rank's index on its node (it picks the GPU), and with
/// --print-ranks every rank's line saying where it runs.
NodeRank findNodeRank(const Options &o, const Communicator &comm);

/// The session set up as the options say, its parameters initialised.
void startSession(Session &session, const Options &o, FlightRecorder &recorder,
                  const InitialWeights *weights);

/// The schedule the options ask for, peaking at the session's rate (--lr
/// or the compiled one); none for a constant rate without warmup.
std::optional<LrSchedule> makeSchedule(const Options &o, const Plan &plan,
                                       const Session &session);

/// The progress line's constants: one rank's model FLOPs per step and its
/// device's peak (--peak-tflops, or what the backend knows of it).
ProgressMeter makeProgressMeter(const Options &o, const Plan &plan,
                                const Backend &backend, int64_t tokensPerStep);

/// What a checkpoint records of this run, and --resume checks.
RunIdentity runIdentity(const Options &o, const Plan &plan,
                        const StepInputs &inputs, const TokenData *data,
                        int ranks);

/// --resume: the newest complete checkpoint loaded into the session;
/// `first` is the first step to run (1 without --resume). False with
/// `error`, the same on every rank.
bool resume(const Options &o, const Plan &plan, Communicator &comm,
            Session &session, const RunIdentity &run, int64_t &first,
            std::string &error);

/// --init-from's file, mapped and matched to the plan (null without it).
std::unique_ptr<InitialWeights> openWeights(const Options &o, const Plan &plan);

} // namespace fsdprun

#endif // FSDP_RUN_SETUP_H
