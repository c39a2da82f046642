//===- LrSchedule.cpp - the learning rate of each step --------------------===//

#include "fsdp/runtime/train/LrSchedule.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace fsdp::rt {

double LrSchedule::at(int64_t step) const {
  if (warmup > 0 && step <= warmup)
    return peak * double(step) / double(warmup);
  if (kind == Kind::Constant)
    return peak;
  // The decay runs from the first step after warmup (the peak) to the last
  // step (the minimum); a run no longer than its warmup has none.
  int64_t span = steps - std::max<int64_t>(warmup, 0) - 1;
  if (span <= 0)
    return peak;
  double progress = std::clamp(
      double(step - std::max<int64_t>(warmup, 0) - 1) / double(span), 0.0, 1.0);
  double shape = kind == Kind::Cosine ? 0.5 * (1.0 + std::cos(M_PI * progress))
                                      : 1.0 - progress;
  return minimum + (peak - minimum) * shape;
}

std::string LrSchedule::describe() const {
  const char *name = kind == Kind::Cosine   ? "cosine"
                     : kind == Kind::Linear ? "linear"
                                            : "constant";
  char text[160];
  if (kind == Kind::Constant)
    std::snprintf(text, sizeof(text), "%s, warmup %lld, lr %.6g", name,
                  (long long)warmup, peak);
  else
    std::snprintf(text, sizeof(text),
                  "%s, warmup %lld, peak %.6g -> min %.6g at step %lld", name,
                  (long long)warmup, peak, minimum, (long long)steps);
  return text;
}

bool parseLrScheduleKind(const std::string &name, LrSchedule::Kind &kind) {
  if (name == "constant")
    kind = LrSchedule::Kind::Constant;
  else if (name == "cosine")
    kind = LrSchedule::Kind::Cosine;
  else if (name == "linear")
    kind = LrSchedule::Kind::Linear;
  else
    return false;
  return true;
}

} // namespace fsdp::rt
