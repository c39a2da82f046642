//===- Trainer.h - the training loop ----------------------------*- C++ -*-===//
//
// Runs a session for a number of steps on every rank: feeds each step's
// batch, runs the step, averages the loss over ranks (and in drop mode
// sums the pairs dropped), times it, and stops on a loss that is not
// finite. At the end it measures the arena's
// high-water mark (the maximum over ranks). Every collective it issues is
// labelled for the flight recorder.
//
//===----------------------------------------------------------------------===//

#ifndef FSDP_RUNTIME_TRAINER_H
#define FSDP_RUNTIME_TRAINER_H

#include "fsdp/runtime/comm/Communicator.h"
#include "fsdp/runtime/exec/Session.h"
#include "fsdp/runtime/train/LrSchedule.h"
#include "fsdp/runtime/train/StepInputs.h"
#include "fsdp/runtime/train/Validation.h"

#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace fsdp::rt {

struct TrainOptions {
  int64_t steps = 20;
  /// A loss that is not finite is an error, except where collectives are
  /// skipped (the losses mean nothing then).
  bool lossesMeanNothing = false;
  /// Each step's learning rate; none: the session's (--lr or compiled).
  std::optional<LrSchedule> schedule;
  /// Called before step s (1..steps) and, with steps + 1, before the final
  /// collectives: where fault injection stalls a rank.
  std::function<void(int64_t step)> beforeStep;
  /// The first step (a resumed run's: the checkpoint's step + 1).
  int64_t firstStep = 1;
  /// Called after each step (and its onStep): checkpoints, stop signals.
  /// False with `error` ends the run; `stop` ends the loop after it.
  std::function<bool(int64_t step, bool &stop, std::string &error)> afterStep;
  /// Evaluates where it is due, after the step and before afterStep (a
  /// checkpoint); null: no validation.
  Validator *validator = nullptr;
};

struct StepResult {
  int64_t step;
  float loss;
  double seconds;
  /// The step's learning rate (0 for a plan without an optimizer).
  double lr;
  /// The global gradient norm before clipping, for a plan that clips.
  std::optional<double> gradNorm;
  /// The evaluation that followed the step, where one was due.
  std::optional<ValidationPoint> validation;
  /// Drop mode: the pairs the step dropped over all ranks; nullopt for a
  /// plan without moe_capacity_trim.
  std::optional<int64_t> droppedPairs;
};

struct TrainResult {
  std::vector<float> losses; ///< of steps firstStep.. (those run)
  std::vector<double> learningRates;
  /// Each step's global gradient norm (empty for a plan that does not
  /// clip its gradients).
  std::vector<double> gradNorms;
  /// Every evaluation, in step order (empty without validation).
  std::vector<ValidationPoint> validation;
  /// The schedule that gave them (LrSchedule::describe), or "constant".
  std::string lrSchedule;
  /// The last step run: --steps, or where a stop signal ended the run.
  int64_t lastStep = 0;
  bool stopped = false;
  /// Mean seconds per step over steps 2.. (step 1 touches every page of
  /// the arena), or step 1's alone.
  double meanSeconds = 0.0;
  int64_t timedSteps = 0;
  uint64_t highWaterMark = 0, highWaterMarkMax = 0;
  /// Bytes this rank's all_to_alls moved to and from other ranks over the
  /// training steps run (expert parallelism's dispatch and combine; not
  /// the evaluations'): Session::allToAllBytes's growth.
  uint64_t allToAllBytes = 0;
  /// Its max over ranks, where the caller all-reduced it (fsdp-run: for a
  /// plan with expert-parallel units only); else 0.
  uint64_t allToAllBytesMax = 0;
  /// Drop mode (docs/moe.md): each training step's dropped pairs, summed
  /// over the world (Session::droppedPairs); empty for a plan without
  /// moe_capacity_trim.
  std::vector<int64_t> droppedPairs;
};

class Trainer {
public:
  Trainer(Session &session, Communicator &comm, BatchFeeder &feeder,
          TrainOptions options)
      : session(session), comm(comm), feeder(feeder),
        options(std::move(options)) {}

  /// Trains; `onStep` sees every step. False with `error` when the loss
  /// diverges.
  bool run(const std::function<void(const StepResult &)> &onStep,
           TrainResult &result, std::string &error);

private:
  /// The step's figures over the world: the loss (the ranks' mean) and,
  /// in drop mode, the dropped pairs (their sum).
  struct StepTotals {
    float loss = 0.0f;
    std::optional<int64_t> dropped;
  };
  StepTotals reduceStep(int64_t step, float local);

  Session &session;
  Communicator &comm;
  BatchFeeder &feeder;
  TrainOptions options;
};

} // namespace fsdp::rt

#endif // FSDP_RUNTIME_TRAINER_H
