//===- Progress.h - the progress line of a training step --------*- C++ -*-===//
//
// What a person watching a run reads after each logged step: the loss
// (and in drop mode the pairs dropped), the learning rate, the time and
// throughput, the model FLOPs utilisation where the device's peak is
// known, the memory in use and the time left.
// Formatted into a caller's buffer: a step allocates nothing on the heap
// (test/Runtime/heap.test).
//
//===----------------------------------------------------------------------===//

#ifndef FSDP_RUNTIME_PROGRESS_H
#define FSDP_RUNTIME_PROGRESS_H

#include <cstddef>
#include <cstdint>

namespace fsdp::rt {

/// A run's constants and what it has seen so far.
class ProgressMeter {
public:
  /// `modelFlops`: one rank's model FLOPs per step (the plan's); `peak`:
  /// one rank's device peak FLOP/s, 0 when unknown (no MFU then).
  ProgressMeter(int64_t steps, int64_t tokensPerStep, double modelFlops,
                double peak)
      : steps(steps), tokens(tokensPerStep), modelFlops(modelFlops),
        peak(peak) {}

  /// Counts the next step's time: the steady mean leaves out the run's
  /// first step (it touches every page of the arena) once there are
  /// others.
  void record(double seconds);
  /// Mean seconds per step so far, over steps 2.. when there are any.
  double meanSeconds() const;
  /// Model FLOPs utilisation at `seconds` per step, in [0, 1+]; negative
  /// when the peak is unknown.
  double mfu(double seconds) const;

  int64_t tokensPerStep() const { return tokens; }
  double modelFlopsPerStep() const { return modelFlops; }
  /// The device peak MFU divides by, 0 when unknown.
  double peakFlops() const { return peak; }

  /// The line of step `step` (no newline): `memoryBytes` is the memory in
  /// use to show (0: not shown), `gradNorm` negative when the plan does
  /// not compute one, `droppedPairs` (the step's over all ranks, drop
  /// mode) negative when the plan drops none.
  void format(char *out, size_t size, int64_t step, float loss, double lr,
              double gradNorm, double seconds, uint64_t memoryBytes,
              int64_t droppedPairs = -1) const;

private:
  int64_t steps, tokens;
  double modelFlops, peak;
  double firstSeconds = 0.0, laterSeconds = 0.0;
  int64_t later = 0;
  bool sawFirst = false;
};

} // namespace fsdp::rt

#endif // FSDP_RUNTIME_PROGRESS_H
