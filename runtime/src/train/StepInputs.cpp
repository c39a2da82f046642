//===- StepInputs.cpp - what a plan's steps are fed -----------------------===//

#include "fsdp/runtime/train/StepInputs.h"

#include <cmath>
#include <random>

namespace fsdp::rt {

bool classifyInputs(const Plan &plan, StepInputs &in, std::string &error) {
  if (plan.inputs.size() != 2 || plan.inputs[0] == plan::kNone ||
      plan.inputs[1] == plan::kNone) {
    error =
        plan.path + ": fsdp-run feeds plans with two inputs (data, targets)";
    return false;
  }
  const BufferDesc &data = plan.buffers[plan.inputs[0]];
  const BufferDesc &targets = plan.buffers[plan.inputs[1]];
  in = StepInputs();
  for (const Instruction &inst : plan.program)
    if (inst.kernel->opcode == plan::Opcode::CrossEntropy)
      in.vocab = plan.buffers[inst.ins[0]].shape.back();
  if (data.dtype == plan::DType::I32 && data.shape.size() == 2 &&
      targets.shape == data.shape) {
    in.kind = InputKind::Tokens;
    in.batch = data.shape[0];
    in.seq = data.shape[1];
    return true;
  }
  if (data.dtype == plan::DType::F32 && data.shape.size() == 2 &&
      targets.shape.size() == 1 && targets.shape[0] == data.shape[0]) {
    in.kind = InputKind::Features;
    in.batch = data.shape[0];
    in.features = data.shape[1];
    return true;
  }
  error = plan.path + ": unsupported step inputs (expected B x T token ids "
                      "and targets, or B x D features and B class ids)";
  return false;
}

bool loadTrainingData(const StepInputs &inputs, int ranks,
                      const std::string &path, DataFormat format,
                      TokenData &tokens, std::string &error) {
  return tokens.load(path, format, error) &&
         tokens.check(inputs.batch * ranks, inputs.seq, inputs.vocab, error);
}

TeacherData::TeacherData(int64_t features, int64_t classes, uint64_t seed)
    : features(features), classes(classes), weights(features * classes) {
  std::mt19937_64 rng(seed ^ 0x7EAC4E5ull);
  std::normal_distribution<float> normal;
  for (float &w : weights)
    w = normal(rng);
}

void TeacherData::batch(int64_t step, int64_t rowBegin, int64_t B, float *x,
                        int32_t *y) const {
  std::mt19937_64 rng(step * 7919 + 17);
  std::normal_distribution<float> normal;
  for (int64_t skip = 0; skip < rowBegin * features; ++skip)
    normal(rng);
  for (int64_t b = 0; b < B; ++b) {
    float *row = x + b * features;
    for (int64_t f = 0; f < features; ++f)
      row[f] = normal(rng);
    int64_t best = 0;
    float bestScore = -INFINITY;
    for (int64_t c = 0; c < classes; ++c) {
      float score = 0.0f;
      for (int64_t f = 0; f < features; ++f)
        score += row[f] * weights[c * features + f];
      if (score > bestScore) {
        bestScore = score;
        best = c;
      }
    }
    y[b] = int32_t(best);
  }
}

BatchFeeder::BatchFeeder(const StepInputs &inputs, const TokenData *tokens,
                         uint64_t seed, int rank, int ranks)
    : inputs(inputs), tokens(tokens),
      teacher(inputs.features, inputs.vocab, seed), rank(rank), ranks(ranks),
      x(inputs.batch * inputs.seq), y(inputs.batch * inputs.seq),
      features(inputs.batch * inputs.features) {}

bool BatchFeeder::feed(Session &session, int64_t step, std::string &error) {
  int64_t rowBegin = inputs.batch * rank;
  if (inputs.kind == InputKind::Tokens) {
    if (!tokens->batch(step - 1, globalBatch(), inputs.seq, rowBegin,
                       inputs.batch, x.data(), y.data(), error))
      return false;
    session.setInput(0, x.data(), x.size() * sizeof(int32_t));
  } else {
    teacher.batch(step, rowBegin, inputs.batch, features.data(), y.data());
    session.setInput(0, features.data(), features.size() * sizeof(float));
  }
  session.setInput(1, y.data(), y.size() * sizeof(int32_t));
  return true;
}

} // namespace fsdp::rt
