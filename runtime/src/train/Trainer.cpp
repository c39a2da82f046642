//===- Trainer.cpp - the training loop ------------------------------------===//

#include "fsdp/runtime/train/Trainer.h"
#include "fsdp/runtime/comm/FlightRecorder.h"

#include <chrono>
#include <cmath>

namespace fsdp::rt {

Trainer::StepTotals Trainer::reduceStep(int64_t step, float local) {
  StepTotals totals;
  // Each rank's loss is the mean over its rows; their mean is the global
  // batch's (every rank has as many rows).
  {
    RecordScope scope(CollectiveLabel{step, -1, "loss all-reduce"});
    totals.loss = float(comm.allReduceMean(local));
  }
  // Drop mode: each dropped pair counted once, by the rank that received
  // it, so the sum over the world is the step's. Every rank runs the same
  // plan: all of them reduce, or none.
  if (std::optional<int64_t> dropped = session.droppedPairs()) {
    RecordScope scope(CollectiveLabel{step, -1, "dropped pairs all-reduce"});
    // Exact: a double holds every integer below 2^53.
    totals.dropped = int64_t(comm.allReduceSum(double(*dropped)));
  }
  return totals;
}

bool Trainer::run(const std::function<void(const StepResult &)> &onStep,
                  TrainResult &result, std::string &error) {
  using Clock = std::chrono::steady_clock;
  auto before = [&](int64_t step) {
    if (options.beforeStep)
      options.beforeStep(step);
  };
  result = TrainResult();
  result.lrSchedule =
      options.schedule ? options.schedule->describe() : "constant";
  // Without a schedule the rate is the same every step: looked up once.
  const double fixedLr = session.learningRate().value_or(0.0);
  double totalSeconds = 0.0, steadySeconds = 0.0;
  const int64_t first = options.firstStep;
  for (int64_t step = first; step <= options.steps; ++step) {
    before(step);
    if (!feeder.feed(session, step, error))
      return false;
    double lr = fixedLr;
    if (options.schedule)
      session.overrideLearningRate(lr = options.schedule->at(step));
    auto start = Clock::now();
    uint64_t movedBefore = session.allToAllBytes();
    float local = session.step(step);
    result.allToAllBytes += session.allToAllBytes() - movedBefore;
    auto [loss, dropped] = reduceStep(step, local);
    double seconds =
        std::chrono::duration<double>(Clock::now() - start).count();
    totalSeconds += seconds;
    if (step > first)
      steadySeconds += seconds;
    // The first step touches every page of the arena; the profile, like
    // the mean time per step, covers the steps after it.
    if (step == first && options.steps > first)
      session.resetKernelTimes();
    result.losses.push_back(loss);
    if (dropped)
      result.droppedPairs.push_back(*dropped);
    result.learningRates.push_back(lr);
    // Read once the step is done (the loss's read waited for it).
    std::optional<double> norm = session.gradNorm();
    if (norm)
      result.gradNorms.push_back(*norm);
    if (!std::isfinite(loss) && !options.lossesMeanNothing) {
      error = "the loss is " + std::to_string(loss) + " at step " +
              std::to_string(step) + "; training diverged";
      return false;
    }
    std::optional<ValidationPoint> validation;
    if (options.validator && options.validator->due(step)) {
      if (!options.validator->run(step, validation.emplace(), error))
        return false;
      result.validation.push_back(*validation);
    }
    onStep({step, loss, seconds, lr, norm, validation, dropped});
    result.lastStep = step;
    bool stop = false;
    if (options.afterStep && !options.afterStep(step, stop, error))
      return false;
    if ((result.stopped = stop))
      break;
  }
  int64_t run = result.lastStep - first + 1;
  result.timedSteps = run > 1 ? run - 1 : 1;
  result.meanSeconds =
      run > 1 ? steadySeconds / result.timedSteps : totalSeconds;
  before(options.steps + 1);
  result.highWaterMark = session.measureHighWaterMark();
  RecordScope scope(CollectiveLabel{0, -1, "high-water-mark all-reduce"});
  result.highWaterMarkMax = comm.allReduceMax(result.highWaterMark);
  return true;
}

} // namespace fsdp::rt
