//===- Session.h - a plan running on a backend ------------------*- C++ -*-===//

#ifndef FSDP_RUNTIME_SESSION_H
#define FSDP_RUNTIME_SESSION_H

#include "fsdp/runtime/comm/Communicator.h"
#include "fsdp/runtime/comm/FlightRecorder.h"
#include "fsdp/runtime/exec/Backend.h"
#include "fsdp/runtime/plan/Plan.h"

#include <array>
#include <atomic>
#include <chrono>
#include <map>
#include <optional>
#include <vector>

namespace fsdp::rt {

/// Where Session::initialize reads parameter elements instead of the
/// initializers: io/Weights.h's InitialWeights (--init-from). An interface
/// here because exec/ sits below io/ (docs/runtime.md, "Layers").
class ParamSource {
public:
  virtual ~ParamSource() = default;
  /// Elements [begin, begin + count) of parameter `param` (plan order);
  /// false with `error` when they cannot be read.
  virtual bool read(uint32_t param, int64_t begin, int64_t count, float *out,
                    std::string &error) const = 0;
};

/// Time spent in each kernel kind over all steps so far: wall time on
/// the host around each kernel, or, where `onDevice` (Session::timeKernels
/// on a backend that times kernels on the device: CUDA), the device's time
/// for the kernels run() enqueued (its waits stay the host's).
struct KernelTimes {
  std::array<double, plan::kKernels.size()> seconds{};
  std::array<int64_t, plan::kKernels.size()> calls{};
  bool onDevice = false;
};

class Session {
public:
  Session(const Plan &plan, Backend &backend, Communicator &comm)
      : plan(plan), backend(backend), comm(comm) {}

  /// Allocates the arena and initialises this rank's shard of every unit
  /// from the parameters' initializers and `seed` (deterministically:
  /// element i of a parameter depends only on the seed, the parameter's
  /// name and i, so every world size starts from the same model), or from
  /// `weights` (--init-from: the rank reads its shard's elements), and
  /// every optimizer moment to zero.
  bool initialize(uint64_t seed, std::string &error,
                  const ParamSource *weights = nullptr);

  /// Copies the step input at `position` (token ids, targets, features).
  void setInput(uint32_t position, const void *data, uint64_t bytes);

  /// One training step (forward, backward, AdamW); returns the loss.
  float step(int64_t step);
  /// The plan's evaluation step (its first plan.evalKernels kernels: the
  /// forward and the loss) on the inputs set; returns this rank's loss.
  /// Parameters and moments are unchanged; the collectives it started are
  /// finished on return. Its kernels are neither in kernelTimes() nor in
  /// the trace (they would blur the training step's profile); `afterStep`
  /// labels its collectives for the flight recorder.
  float evaluate(int64_t afterStep);
  /// Forward and backward only (every kernel but AdamW): parameters are
  /// unchanged and each unit's AdamW gradient buffer holds its gradient
  /// shard.
  float forwardBackward();

  /// Uses `lr` for every AdamW instead of the compiled learning rate.
  void overrideLearningRate(double lr) { lrOverride = lr; }
  /// The rate the next step's AdamW uses: the override, or the compiled
  /// rate (the first AdamW's; the pipeline compiles one for all), or
  /// nullopt for a plan without an optimizer.
  std::optional<double> learningRate() const;

  /// The global gradient norm of the last step (or forward-backward) of a
  /// plan that clips its gradients: the square root of their sum of
  /// squares over every rank's shards, which the step all-reduced (the
  /// same on every rank); nullopt for a plan that does not clip.
  std::optional<double> gradNorm();
  /// The norm a plan clips its gradients to (its clip_coefficient's
  /// max_norm), or nullopt.
  std::optional<double> maxGradNorm() const;
  /// Drop mode (docs/moe.md): the pairs the last training step dropped on
  /// this rank, the sum of its moe_capacity_trim kernels' `dropped`
  /// outputs (each counts the pairs this rank received past its
  /// capacity), read after the step (on CUDA a 4-byte copy each); nullopt
  /// for a plan without moe_capacity_trim. The evaluation step overwrites
  /// them: read before any evaluation.
  std::optional<int64_t> droppedPairs();

  /// A buffer's elements as floats (a bf16 one widened).
  std::vector<float> readBuffer(uint32_t buffer);
  /// Elements [first, first + count) of an f32 buffer, into `out` (what
  /// lies past the buffer's end is not read).
  void readBufferRange(uint32_t buffer, int64_t first, int64_t count,
                       float *out);
  /// Writes an f32 buffer; a unit's shard also refreshes its shard copy
  /// (which only AdamW writes after this), so that every way weights come
  /// in (initialisation, a weights file, a resumed checkpoint) leaves the
  /// copy the shard rounded.
  void writeBuffer(uint32_t buffer, const std::vector<float> &values);
  /// The buffer the AdamW of unit `unit` reads its gradient shard from.
  std::optional<uint32_t> gradientShard(uint32_t unit) const;
  /// The full values of every parameter, gathered from all ranks, in
  /// plan order (a collective: every rank must call it). An
  /// expert-parallel unit's parameters are the full ones too, of all G
  /// slices (slice x's element i at x n + i, n the slice's elements).
  std::vector<std::vector<float>> gatherParams();
  /// Bytes this rank's all_to_alls have moved so far
  /// (Backend::allToAllBytes).
  uint64_t allToAllBytes() const { return backend.allToAllBytes(); }

  const KernelTimes &kernelTimes() const { return times; }
  /// Forgets the times so far (the first step's page faults, say).
  void resetKernelTimes() {
    times = KernelTimes();
    times.onDevice = deviceTiming;
  }
  /// Times kernels for a profile (fsdp-run's --profile; startTrace too):
  /// where the backend runs them asynchronously and can time them on the
  /// device (Backend::timesKernelsOnDevice), turns that on, so that
  /// kernelTimes() and the trace hold the device's times; the host's clock
  /// around a launch would measure the launch. A no-op on the CPU.
  void timeKernels();

  /// Skips every collective and wait: the compute of the same plan alone,
  /// for measuring how much communication a schedule hides. Losses are
  /// then meaningless (gathered buffers hold stale values). Gradient
  /// clipping's scalar all-reduce still runs (one latency), so that the
  /// coefficient is computed from a sum, not from what its buffer held.
  void setSkipCollectives(bool skip) { skipCollectives = skip; }
  /// Runs every started collective where it starts, on this thread, and
  /// skips the waits: the same plan without overlap, for comparison.
  void setSynchronousCollectives(bool sync) { synchronous = sync; }

  /// One executed kernel, for a timeline (microseconds since the session
  /// started tracing), on lane 0 (compute; waits included), 1 (gathers) or
  /// 2 (reduce-scatters). Where the device times kernels (timeKernels), a
  /// compute-lane kernel's duration is the device's and its start the
  /// device's offset from the step's first kernel, placed at that kernel's
  /// launch on the host's clock; waits (enqueued, not run, by the host)
  /// are left out.
  struct TraceEvent {
    uint32_t instruction;
    int64_t step;
    double start, duration;
    uint32_t lane;
    /// The process's heap bytes when it started, from the heap sampler
    /// (0 without one).
    uint64_t heapBytes = 0;
    /// The bytes this rank's all_to_alls had moved when it ended
    /// (Backend::allToAllBytes): the trace's counter at each all_to_all.
    uint64_t allToAllBytes = 0;
    /// The instructions it ran from `instruction` on: more than 1 for a
    /// group of AdamW instructions run as one pass (runOptimizer).
    uint32_t members = 1;
  };
  /// Samples the process's heap at every traced kernel (fsdp-run passes
  /// its heap meter's count); null: none.
  void setHeapSampler(uint64_t (*sampler)()) { heapSampler = sampler; }
  /// Records every collective of the plan (issued, started, finished) for
  /// the watchdog and its dumps; null: none.
  void setFlightRecorder(FlightRecorder *recorder) {
    this->recorder = recorder;
  }

  /// Records every kernel of every later step.
  void startTrace();
  const std::vector<TraceEvent> &traceEvents() const { return trace; }
  uint64_t measureHighWaterMark() { return backend.measureHighWaterMark(); }

private:
  /// Writes the first `n` elements of unit `unit`'s shard copy, if it has
  /// one, from its shard's values.
  void writeShardCopy(const UnitDesc &unit, const float *shard, size_t n);
  /// Runs kernels [0, end) of the program; collectives still in flight at
  /// `end` are waited for there.
  float run(int64_t step, bool optimizer, size_t end);
  /// Waits for the collectives the evaluation step started whose waits lie
  /// after it (plan.evalDrainTokens).
  void finishEvaluation();
  /// The phases of one instruction of `run`.
  bool skips(const Instruction &inst, bool optimizer) const;
  bool startsAsync(const Instruction &inst) const;
  /// Starts the collective at `index` and those grouped with it (a bucket)
  /// as one; `index` moves to the last of them. Timed at their waits.
  void startGroup(size_t &index, int64_t step);
  /// Waits for a started collective: its time and trace event are the
  /// span the backend measured.
  void finishWait(const Instruction &wait, int64_t step);
  /// Runs a kernel (or a collective where it is) with `params`; returns
  /// its trace lane.
  uint32_t runKernel(size_t index, const double *params, int64_t step);
  /// Runs the AdamW instructions from `index` on that can run as one
  /// multi-tensor AdamW (Backend::runOptimizer): adjacent, before `end`,
  /// none touching the bytes another of them writes. Counted and traced
  /// as one event. Returns the last one's index.
  size_t runOptimizer(size_t index, size_t end, int64_t step);
  /// Counts instruction `index`'s time since `begin` (with the `members`
  /// - 1 after it it ran with) and traces it.
  void account(size_t index, int64_t step,
               std::chrono::steady_clock::time_point begin, uint32_t lane,
               uint32_t members = 1);
  /// A record of collective `index` at `step` in the flight recorder (0
  /// without one).
  uint64_t issueRecord(size_t index, int64_t step);
  /// Marks the record of started collective `token` finished: at once for
  /// the host's collectives, when the device reports it done (the next
  /// synchronizeDevice()) for a device's, which the host merely enqueued.
  void finishStarted(uint32_t token);
  /// backend.synchronize(), closing the device collectives' records as
  /// the device finishes them.
  void synchronizeDevice();
  /// After synchronizeDevice(): the device's times of the kernels run
  /// since the last take, into `times` and their trace events.
  void takeDeviceTimes();

  const Plan &plan;
  Backend &backend;
  Communicator &comm;
  /// The shard group this rank gathers with outside the plan (--export's
  /// final gather): `comm` without a replicate axis, else split from it
  /// on first use.
  Communicator &shardGroup();
  std::unique_ptr<Communicator> shardComm;
  /// Under expert parallelism, the expert shard group and the expert
  /// group (MeshGroup.h), split from `comm` on first use, for the same
  /// gather.
  Communicator &expertGroup(plan::CommAxis axis);
  std::unique_ptr<Communicator> expertShardComm, expertComm;
  /// Gathers unit `unit`'s flat parameter from `shard` (this rank's) into
  /// `full`: flatSize elements, or G flatSize for an expert-parallel
  /// unit, slice x at x flatSize. Returns the slices (1 or G).
  int64_t gatherUnit(uint32_t unit, const std::vector<float> &shard,
                     std::vector<float> &full);
  std::optional<double> lrOverride;
  KernelTimes times;
  FlightRecorder *recorder = nullptr;
  std::map<uint32_t, uint64_t> tokenRecord; ///< token -> its record
  std::vector<uint64_t> deviceRecords;      ///< open until the device is done
  bool tracing = false, skipCollectives = false, synchronous = false;
  std::map<uint32_t, size_t> startedAt; ///< token -> its start instruction
  bool evaluating = false;
  std::chrono::steady_clock::time_point traceOrigin;
  std::vector<TraceEvent> trace;
  /// Kernels timed on the device (timeKernels), and the trace events of
  /// those run since the last take, in order, for their device times.
  bool deviceTiming = false;
  std::vector<size_t> pendingTrace;
  uint64_t (*heapSampler)() = nullptr;
  /// runOptimizer's group, its members' parameters and pointers to them,
  /// kept from step to step.
  std::vector<const Instruction *> optimizerGroup;
  std::vector<std::vector<double>> optimizerParams;
  std::vector<const double *> optimizerParamPointers;
};

/// Elements [begin, end) of parameter `param`, initialised with `seed`.
void initializeParam(const ParamDesc &param, uint64_t seed, int64_t begin,
                     int64_t end, float *out);

} // namespace fsdp::rt

#endif // FSDP_RUNTIME_SESSION_H
