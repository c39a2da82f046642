//===- StepInputs.h - what a plan's steps are fed ---------------*- C++ -*-===//
//
// A plan has two step inputs: B x T token ids and their targets (language
// models, fed from TokenData), or B x D features and B class ids (MLPs,
// fed from a fixed random linear teacher). Each rank feeds its rows of the
// global batch.
//
//===----------------------------------------------------------------------===//

#ifndef FSDP_RUNTIME_STEPINPUTS_H
#define FSDP_RUNTIME_STEPINPUTS_H

#include "fsdp/runtime/exec/Session.h"
#include "fsdp/runtime/io/Data.h"
#include "fsdp/runtime/plan/Plan.h"

#include <cstdint>
#include <string>
#include <vector>

namespace fsdp::rt {

enum class InputKind { Tokens, Features };

/// One rank's step inputs; vocab is the classes for features.
struct StepInputs {
  InputKind kind = InputKind::Tokens;
  int64_t batch = 0, seq = 1, features = 0, vocab = 0;
};

/// On failure returns false with `error` naming the plan and the reason.
bool classifyInputs(const Plan &plan, StepInputs &inputs, std::string &error);

/// Loads the data a token plan of `inputs` trains on across `ranks` ranks
/// and checks it against the model (one global batch of B x T tokens plus
/// the last target, every id in the vocabulary) before any step. On
/// failure returns false with `error` naming the file and the reason.
bool loadTrainingData(const StepInputs &inputs, int ranks,
                      const std::string &path, DataFormat format,
                      TokenData &tokens, std::string &error);

/// Classification data for MLP plans: Gaussian features, labels from a
/// fixed random linear teacher, so that a model can learn them.
class TeacherData {
public:
  TeacherData(int64_t features, int64_t classes, uint64_t seed);
  /// Rows [rowBegin, rowBegin + B) of the global batch of step `step`.
  void batch(int64_t step, int64_t rowBegin, int64_t B, float *x,
             int32_t *y) const;

private:
  int64_t features, classes;
  std::vector<float> weights;
};

/// Feeds a session this rank's rows of each step's global batch.
class BatchFeeder {
public:
  /// `tokens` feeds token plans (and must outlive the feeder).
  BatchFeeder(const StepInputs &inputs, const TokenData *tokens, uint64_t seed,
              int rank, int ranks);
  /// Step `step` (1-based) into the session's inputs.
  /// False with `error` when the data file cannot be read (any rank's
  /// failure then ends the job).
  bool feed(Session &session, int64_t step, std::string &error);
  int64_t globalBatch() const { return inputs.batch * ranks; }
  int64_t tokensPerStep() const { return globalBatch() * inputs.seq; }

private:
  StepInputs inputs;
  const TokenData *tokens;
  TeacherData teacher;
  int rank, ranks;
  std::vector<int32_t> x, y;
  std::vector<float> features;
};

} // namespace fsdp::rt

#endif // FSDP_RUNTIME_STEPINPUTS_H
