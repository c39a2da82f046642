//===- Validation.h - the validation loss between steps ---------*- C++ -*-===//
//
// fsdp-run --val-data: after every K-th step (and the last), every rank
// runs the plan's evaluation step (the forward and the loss, a prefix of
// the training step the compiler marks) on the same S held-out global
// batches, batches 0..S-1 of the validation file, so that the points of a
// run (and of different runs) are losses on the same tokens.
//
//===----------------------------------------------------------------------===//

#ifndef FSDP_RUNTIME_VALIDATION_H
#define FSDP_RUNTIME_VALIDATION_H

#include "fsdp/runtime/comm/Communicator.h"
#include "fsdp/runtime/exec/Session.h"
#include "fsdp/runtime/train/StepInputs.h"

#include <cstdint>
#include <string>

namespace fsdp::rt {

/// One evaluation: the mean of the global batches' losses.
struct ValidationPoint {
  int64_t step = 0; ///< the training step it follows
  double loss = 0.0;
  double seconds = 0.0;
  int64_t batches = 0;
};

struct ValidationOptions {
  /// Evaluate after every `every`-th step; 0: only after the last.
  int64_t every = 0;
  /// Global batches per evaluation (at least 1).
  int64_t batches = 1;
  /// The run's last step, always evaluated.
  int64_t lastStep = 0;
};

class Validator {
public:
  /// `feeder` feeds the validation data (and must outlive the validator).
  Validator(Session &session, Communicator &comm, BatchFeeder &feeder,
            ValidationOptions options)
      : session(session), comm(comm), feeder(feeder), options(options) {}

  /// Whether an evaluation follows step `step`.
  bool due(int64_t step) const {
    return step == options.lastStep ||
           (options.every > 0 && step % options.every == 0);
  }
  /// Evaluates the model as it is after step `step`. False with `error`
  /// when the validation data cannot be read.
  bool run(int64_t step, ValidationPoint &point, std::string &error);

  const ValidationOptions &settings() const { return options; }

private:
  Session &session;
  Communicator &comm;
  BatchFeeder &feeder;
  ValidationOptions options;
};

} // namespace fsdp::rt

#endif // FSDP_RUNTIME_VALIDATION_H
