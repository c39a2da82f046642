//===- LrSchedule.h - the learning rate of each step ------------*- C++ -*-===//
//
// The compiled AdamW takes its learning rate as a kernel parameter, so a
// schedule needs no recompile: the trainer hands each step's rate to the
// session. The rate is a pure function of the step number and the run's
// length, so a resumed run follows the same schedule.
//
//===----------------------------------------------------------------------===//

#ifndef FSDP_RUNTIME_LRSCHEDULE_H
#define FSDP_RUNTIME_LRSCHEDULE_H

#include <cstdint>
#include <string>

namespace fsdp::rt {

struct LrSchedule {
  enum class Kind { Constant, Cosine, Linear };
  Kind kind = Kind::Constant;
  /// The rate after warmup (--lr, or the compiled one).
  double peak = 0.0;
  /// Steps 1..warmup rise linearly to the peak: step s gets peak s / W.
  int64_t warmup = 0;
  /// Where cosine and linear decay end, at the last step.
  double minimum = 0.0;
  /// The run's length: the last step, where the decay reaches `minimum`.
  int64_t steps = 1;

  /// The rate of step `step` (1-based).
  double at(int64_t step) const;
  /// "cosine, warmup 10, peak 0.0003 -> min 3e-05 over 1000 steps".
  std::string describe() const;
};

/// The kind `name` names (constant, cosine, linear); false if none.
bool parseLrScheduleKind(const std::string &name, LrSchedule::Kind &kind);

} // namespace fsdp::rt

#endif // FSDP_RUNTIME_LRSCHEDULE_H
