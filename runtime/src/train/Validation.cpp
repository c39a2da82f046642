//===- Validation.cpp - the validation loss between steps -----------------===//

#include "fsdp/runtime/train/Validation.h"
#include "fsdp/runtime/comm/FlightRecorder.h"

#include <chrono>

namespace fsdp::rt {

bool Validator::run(int64_t step, ValidationPoint &point, std::string &error) {
  auto start = std::chrono::steady_clock::now();
  double sum = 0.0;
  for (int64_t b = 0; b < options.batches; ++b) {
    // The feeder counts steps from 1: batch b of the file is "step" b + 1.
    if (!feeder.feed(session, b + 1, error))
      return false;
    float local = session.evaluate(step);
    // Every rank has as many rows: the mean of the ranks' means is the
    // global batch's, rounded to f32 as a training step's loss is (so that
    // one batch's validation loss is bit for bit its training loss).
    RecordScope scope(CollectiveLabel{step, -1, "validation loss all-reduce"});
    sum += float(comm.allReduceMean(local));
  }
  point.step = step;
  point.batches = options.batches;
  point.loss = sum / double(options.batches);
  point.seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
          .count();
  return true;
}

} // namespace fsdp::rt
