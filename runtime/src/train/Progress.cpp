//===- Progress.cpp - the progress line of a training step ----------------===//

#include "fsdp/runtime/train/Progress.h"

#include <cstdio>

namespace fsdp::rt {

void ProgressMeter::record(double seconds) {
  if (!sawFirst) { // the run's first step: 1, or the one after a resume
    firstSeconds = seconds;
    sawFirst = true;
    return;
  }
  laterSeconds += seconds;
  ++later;
}

double ProgressMeter::meanSeconds() const {
  return later ? laterSeconds / double(later) : firstSeconds;
}

double ProgressMeter::mfu(double seconds) const {
  if (peak <= 0.0 || seconds <= 0.0)
    return -1.0;
  return modelFlops / seconds / peak;
}

/// "1h02m03s", "4m05s", "6s".
static void formatDuration(char *out, size_t size, double seconds) {
  long long s = seconds > 0.0 ? (long long)(seconds + 0.5) : 0;
  if (s >= 3600)
    std::snprintf(out, size, "%lldh%02lldm%02llds", s / 3600, s / 60 % 60,
                  s % 60);
  else if (s >= 60)
    std::snprintf(out, size, "%lldm%02llds", s / 60, s % 60);
  else
    std::snprintf(out, size, "%llds", s);
}

void ProgressMeter::format(char *out, size_t size, int64_t step, float loss,
                           double lr, double gradNorm, double seconds,
                           uint64_t memoryBytes, int64_t droppedPairs) const {
  // Appends to `out` while there is room; snprintf truncates safely.
  size_t used = 0;
  auto append = [&](const char *format, auto... values) {
    if (used >= size)
      return;
    int n = std::snprintf(out + used, size - used, format, values...);
    used += n > 0 ? size_t(n) : 0;
  };
  append("step %5lld/%lld | loss %.6f", (long long)step, (long long)steps,
         loss);
  if (droppedPairs >= 0) // drop mode: next to the loss the drops change
    append(" | dropped %lld", (long long)droppedPairs);
  append(" | lr %.3e", lr);
  if (gradNorm >= 0.0)
    append(" | grad norm %.4f", gradNorm);
  append(" | %8.2f ms | %9.0f tok/s", seconds * 1e3,
         seconds > 0.0 ? double(tokens) / seconds : 0.0);
  if (double u = mfu(seconds); u >= 0.0)
    append(" | mfu %5.1f%%", 100.0 * u);
  if (memoryBytes)
    append(" | mem %.2f GiB", double(memoryBytes) / double(1ull << 30));
  char eta[32];
  formatDuration(eta, sizeof(eta), meanSeconds() * double(steps - step));
  append(" | eta %s", eta);
}

} // namespace fsdp::rt
