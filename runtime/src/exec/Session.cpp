//===- Session.cpp - a plan running on a backend --------------------------===//

#include "fsdp/runtime/exec/Session.h"
#include "fsdp/runtime/exec/KernelDispatch.h"
#include "fsdp/runtime/exec/MeshGroup.h"
#include "fsdp/runtime/support/BFloat16.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>

namespace fsdp::rt {

Communicator &Session::shardGroup() {
  if (plan.replicas() == 1)
    return comm;
  if (!shardComm) {
    // The first call is on every rank (gatherParams is collective).
    std::string why;
    int rank = comm.rank(), shards = int(plan.shardSize);
    shardComm = comm.split(rank / shards, rank,
                           "shard group " + std::to_string(rank / shards), why);
    if (!shardComm) {
      std::fprintf(stderr, "fsdp-run: rank %d: error: %s\n", rank, why.c_str());
      comm.abort(1);
    }
  }
  return *shardComm;
}

Communicator &Session::expertGroup(plan::CommAxis axis) {
  std::unique_ptr<Communicator> &group =
      axis == plan::CommAxis::Expert ? expertComm : expertShardComm;
  if (!group) {
    // The first call is on every rank (gatherParams is collective); the
    // backends' groups may live on another stream, so the gather splits
    // its own.
    std::string why;
    int rank = comm.rank();
    MeshGroup g = meshGroup(axis, rank, int(plan.shardSize),
                            int(plan.expertSize), comm.size());
    group = comm.split(g.color, rank, g.name, why);
    if (!group) {
      std::fprintf(stderr, "fsdp-run: rank %d: error: %s\n", rank, why.c_str());
      comm.abort(1);
    }
  }
  return *group;
}

bool Session::initialize(uint64_t seed, std::string &error,
                         const ParamSource *weights) {
  if (!backend.allocateArena(plan.arenaSize, error) ||
      !backend.prepare(plan, error))
    return false;
  std::vector<float> host;
  bool read = true;
  for (size_t u = 0; u < plan.units.size() && read; ++u) {
    const UnitDesc &unit = plan.units[u];
    const BufferDesc &buffer = plan.buffers[unit.shardBuffer];
    host.assign(buffer.numElements(), 0.0f);
    forEachShardSegment(
        plan, uint32_t(u), comm.rank(),
        [&](const ParamDesc &param, int64_t at, int64_t begin, int64_t count) {
          // An expert slice's element i is the full parameter's x n + i
          // (x this rank's slice, n its elements): the weights a run
          // without expert parallelism starts from.
          begin += plan.unitExpertSlice(uint32_t(u), comm.rank()) *
                   param.numElements();
          if (!weights)
            initializeParam(param, seed, begin, begin + count,
                            host.data() + at);
          else if (read)
            read = weights->read(uint32_t(&param - plan.params.data()), begin,
                                 count, host.data() + at, error);
        });
    backend.write(buffer.offset, host.data(), buffer.size);
    writeShardCopy(unit, host.data(), host.size());
  }
  if (!read)
    return false;
  for (const BufferDesc &buffer : plan.buffers)
    if (buffer.kind == plan::BufferKind::AdamM ||
        buffer.kind == plan::BufferKind::AdamV) {
      host.assign(buffer.numElements(), 0.0f);
      backend.write(buffer.offset, host.data(), buffer.size);
    }
  return true;
}

void Session::setInput(uint32_t position, const void *data, uint64_t bytes) {
  const BufferDesc &buffer = plan.buffers[plan.inputs.at(position)];
  backend.write(buffer.offset, data, std::min(bytes, buffer.size));
}

/// A started collective that joins the one before it into a bucket.
static bool isGroupedStart(const Instruction &inst) {
  plan::Opcode opcode = inst.kernel->opcode;
  if (opcode != plan::Opcode::AllGather &&
      opcode != plan::Opcode::ReduceScatter &&
      opcode != plan::Opcode::AllReduceMean)
    return false;
  plan::CollectiveParams p = plan::collectiveParams(inst.params.data());
  return p.started() && p.grouped();
}

/// A gather, reduce-scatter or replica all-reduce (started or where it
/// is), not a wait.
static bool isCollective(plan::Opcode opcode) {
  return opcode == plan::Opcode::AllGather ||
         opcode == plan::Opcode::ReduceScatter ||
         opcode == plan::Opcode::AllReduceMean;
}

/// Whether this run leaves `inst` out: AdamW in a forward-backward, every
/// collective and wait with skipped collectives, the waits of synchronous
/// ones (their collectives ran where they started). Gradient clipping's
/// scalar all-reduce always runs: it costs a latency, and without it the
/// clipping coefficient would come from whatever its buffer held.
bool Session::skips(const Instruction &inst, bool optimizer) const {
  plan::Opcode opcode = inst.kernel->opcode;
  bool adamw =
      opcode == plan::Opcode::AdamW || opcode == plan::Opcode::AdamWShard;
  if (adamw && !optimizer)
    return true;
  if ((isCollective(opcode) || opcode == plan::Opcode::Wait) && skipCollectives)
    return true;
  return opcode == plan::Opcode::Wait && synchronous;
}

/// A collective this run starts and waits for later (not synchronous). A
/// started all-to-all runs where it stands when collectives are skipped
/// (the step still needs its rows; its wait is skipped with the others).
bool Session::startsAsync(const Instruction &inst) const {
  plan::Opcode opcode = inst.kernel->opcode;
  bool startable = isCollective(opcode) ||
                   (opcode == plan::Opcode::AllToAll && !skipCollectives);
  return startable && plan::collectiveParams(inst.params.data()).started() &&
         !synchronous;
}

void Session::startGroup(size_t &index, int64_t step) {
  const Instruction &inst = plan.program[index];
  plan::CollectiveParams collective =
      plan::collectiveParams(inst.params.data());
  // The collective and the ones grouped with it (a bucket) start as
  // one; this returns at once, the waits account for time and trace.
  std::vector<const Instruction *> group = {&inst};
  startedAt[collective.tokenId()] = index;
  while (index + 1 < plan.program.size() &&
         isGroupedStart(plan.program[index + 1])) {
    group.push_back(&plan.program[++index]);
    startedAt[plan::collectiveParams(group.back()->params.data()).tokenId()] =
        index;
  }
  // The stream's communicator (a thread's, on the CPU) takes the
  // records over; a GPU's NCCL enqueue starts them here.
  std::vector<uint64_t> ids;
  for (const Instruction *member : group) {
    ids.push_back(issueRecord(member - plan.program.data(), step));
    tokenRecord[plan::collectiveParams(member->params.data()).tokenId()] =
        ids.back();
  }
  {
    RecordScope scope(ids);
    backend.start(plan, group, collective.streamId());
  }
  if (recorder && !backend.hostCollectives())
    for (size_t k = 0; k < ids.size(); ++k)
      recorder->start(ids[k], collective.streamId(),
                      std::string(group[k]->kernel->name), 0);
}

void Session::finishWait(const Instruction &wait, int64_t step) {
  auto token = uint32_t(plan::waitToken(wait.params.data()));
  size_t at = startedAt[token];
  Backend::Span span = backend.wait(token);
  finishStarted(token);
  if (evaluating)
    return; // not part of the training step's profile
  const Instruction &startInst = plan.program[at];
  if (tracing && span.endNanos > span.startNanos)
    trace.push_back({uint32_t(at), step,
                     double(span.startNanos - steadyNanos(traceOrigin)) * 1e-3,
                     double(span.endNanos - span.startNanos) * 1e-3,
                     plan::collectiveParams(startInst.params.data()).streamId(),
                     0, backend.allToAllBytes()});
  double ran = double(span.endNanos - span.startNanos) * 1e-9;
  times.seconds[uint32_t(startInst.kernel->opcode)] += ran;
  ++times.calls[uint32_t(startInst.kernel->opcode)];
}

uint32_t Session::runKernel(size_t index, const double *params, int64_t step) {
  const Instruction &inst = plan.program[index];
  plan::Opcode opcode = inst.kernel->opcode;
  uint64_t id = 0;
  uint32_t lane = 0;
  // The all-reduce and the all-to-alls run on the compute stream (lane 0),
  // a started all-to-all run in place keeps its stream's lane.
  if (isCollective(opcode) || opcode == plan::Opcode::AllReduceSum ||
      opcode == plan::Opcode::AllToAllCounts ||
      opcode == plan::Opcode::AllToAll) {
    id = issueRecord(index, step);
    lane = opcode == plan::Opcode::AllGather       ? plan::kGatherStream
           : opcode == plan::Opcode::ReduceScatter ? plan::kScatterStream
           : opcode == plan::Opcode::AllReduceMean ? plan::kReplicaStream
           : opcode == plan::Opcode::AllToAll &&
                   plan::collectiveParams(inst.params.data()).started()
               ? plan::kExpertStream
               : 0;
  }
  {
    RecordScope scope(std::vector<uint64_t>{id});
    if (id && !backend.hostCollectives())
      recorder->start(id, 0, std::string(inst.kernel->name), 0);
    backend.run(plan, inst, params, step);
  }
  if (id)
    recorder->finishIfOpen(id); // ran in order: the host's wait is the step's
  return lane;
}

/// Whether the arena bytes of buffer `a` and buffer `b` overlap.
static bool overlaps(const Plan &plan, uint32_t a, uint32_t b) {
  const BufferDesc &x = plan.buffers[a], &y = plan.buffers[b];
  return x.offset < y.offset + y.size && y.offset < x.offset + x.size;
}

/// Whether `inst` touches (reads or writes) bytes an instruction of
/// `group` writes, or writes bytes one of them reads: run in one parallel
/// pass, they would race. (A compiled step's AdamWs never do: each
/// updates its own unit's state.)
static bool conflicts(const Plan &plan, const Instruction &inst,
                      const std::vector<const Instruction *> &group) {
  auto touches = [&](const std::vector<uint32_t> &ids, uint32_t other) {
    return std::any_of(ids.begin(), ids.end(),
                       [&](uint32_t id) { return overlaps(plan, id, other); });
  };
  for (const Instruction *member : group) {
    for (uint32_t written : member->outs)
      if (touches(inst.ins, written) || touches(inst.outs, written))
        return true;
    for (uint32_t read : member->ins)
      if (touches(inst.outs, read))
        return true;
  }
  return false;
}

size_t Session::runOptimizer(size_t index, size_t end, int64_t step) {
  auto begin = std::chrono::steady_clock::now();
  optimizerGroup.clear();
  size_t next = index;
  while (next < end && isAdamW(plan.program[next]) &&
         !conflicts(plan, plan.program[next], optimizerGroup))
    optimizerGroup.push_back(&plan.program[next++]);
  size_t count = optimizerGroup.size();
  optimizerParams.resize(count);
  optimizerParamPointers.resize(count);
  for (size_t i = 0; i < count; ++i) {
    optimizerParams[i] = optimizerGroup[i]->params;
    if (lrOverride)
      optimizerParams[i][plan::kAdamWLearningRate] = *lrOverride;
    optimizerParamPointers[i] = optimizerParams[i].data();
  }
  backend.runOptimizer(plan, optimizerGroup, optimizerParamPointers, step);
  account(index, step, begin, 0, uint32_t(count));
  return next - 1;
}

void Session::account(size_t index, int64_t step,
                      std::chrono::steady_clock::time_point begin,
                      uint32_t lane, uint32_t members) {
  if (evaluating)
    return; // not part of the training step's profile
  auto end = std::chrono::steady_clock::now();
  double seconds = std::chrono::duration<double>(end - begin).count();
  plan::Opcode kind = plan.program[index].kernel->opcode;
  uint32_t opcode = uint32_t(kind);
  // A kernel the device times gets its seconds (and its trace event's
  // times) from takeDeviceTimes; a wait keeps the host's.
  bool onDevice = deviceTiming && kind != plan::Opcode::Wait;
  if (!onDevice)
    times.seconds[opcode] += seconds;
  times.calls[opcode] += members;
  if (!tracing || (deviceTiming && !onDevice))
    return; // a wait: no host span on a timeline of the device's
  if (onDevice)
    pendingTrace.push_back(trace.size());
  trace.push_back(
      {uint32_t(index), step,
       std::chrono::duration<double, std::micro>(begin - traceOrigin).count(),
       seconds * 1e6, lane, heapSampler ? heapSampler() : 0,
       backend.allToAllBytes(), members});
}

/// Parameter `index` of the first kernel of `plan` with opcode `a` or
/// `b`, or nullopt when it has none.
static std::optional<double> firstParam(const Plan &plan, plan::Opcode a,
                                        plan::Opcode b, size_t index) {
  for (const Instruction &inst : plan.program)
    if (inst.kernel->opcode == a || inst.kernel->opcode == b)
      return inst.params[index];
  return std::nullopt;
}

std::optional<double> Session::learningRate() const {
  if (lrOverride)
    return lrOverride;
  return firstParam(plan, plan::Opcode::AdamW, plan::Opcode::AdamWShard,
                    plan::kAdamWLearningRate);
}

std::optional<double> Session::maxGradNorm() const {
  plan::Opcode clip = plan::Opcode::ClipCoefficient;
  return firstParam(plan, clip, clip, plan::paramIndex(clip, "max_norm"));
}

std::optional<double> Session::gradNorm() {
  if (plan.gradSqBuffer == plan::kNone)
    return std::nullopt;
  float sumSq = 0.0f;
  backend.read(plan.buffers[plan.gradSqBuffer].offset, &sumSq, sizeof(sumSq));
  return std::sqrt(double(sumSq));
}

std::optional<int64_t> Session::droppedPairs() {
  std::optional<int64_t> sum;
  for (const Instruction &inst : plan.program) {
    if (inst.kernel->opcode != plan::Opcode::MoeCapacityTrim)
      continue;
    // The kernel writes one count, at least 0 (the loader checked the
    // shape [1] i32); the compiler keeps it until the step ends.
    int32_t dropped = 0;
    backend.read(plan.buffers[inst.outs[1]].offset, &dropped, sizeof(dropped));
    sum = sum.value_or(0) + std::max<int32_t>(dropped, 0);
  }
  return sum;
}

void Session::finishEvaluation() {
  // Started only where they run asynchronously; the loader listed them.
  if (skipCollectives || synchronous)
    return;
  for (uint32_t token : plan.evalDrainTokens) {
    backend.wait(token);
    finishStarted(token);
  }
}

void Session::finishStarted(uint32_t token) {
  if (!recorder)
    return;
  // A device's collective has finished when the device says so, not when
  // the host enqueued the wait for it: its record stays open until the
  // step's synchronize() reports it done, so that the watchdog sees a
  // collective a peer never joined as the one in flight (and names the
  // rank that lags).
  if (backend.hostCollectives())
    recorder->finishIfOpen(tokenRecord[token]);
  else
    deviceRecords.push_back(tokenRecord[token]);
}

void Session::synchronizeDevice() {
  if (!recorder || deviceRecords.empty()) {
    backend.synchronize();
    return;
  }
  backend.synchronize(
      [this](uint32_t token) { recorder->finishIfOpen(tokenRecord[token]); });
  // Those the backend did not report (a synchronize inside a read() since)
  // are done too: the device is idle.
  for (uint64_t id : deviceRecords)
    recorder->finishIfOpen(id);
  deviceRecords.clear();
}

float Session::run(int64_t step, bool optimizer, size_t end) {
  using plan::Opcode;
  std::vector<double> params;
  for (size_t index = 0; index < end; ++index) {
    const Instruction &inst = plan.program[index];
    if (skips(inst, optimizer))
      continue;
    if (isAdamW(inst)) { // with those after it, as one pass
      index = runOptimizer(index, end, step);
      continue;
    }
    Opcode opcode = inst.kernel->opcode;
    params = inst.params;
    auto begin = std::chrono::steady_clock::now();
    if (startsAsync(inst))
      startGroup(index, step); // counted and traced at its wait
    else if (opcode == Opcode::Wait) {
      finishWait(inst, step);
      account(index, step, begin, 0);
    } else
      account(index, step, begin, runKernel(index, params.data(), step));
  }
  if (end < plan.program.size())
    finishEvaluation();
  synchronizeDevice();
  takeDeviceTimes();
  float loss = 0.0f;
  backend.read(plan.buffers[plan.lossBuffer].offset, &loss, sizeof(loss));
  return loss;
}

void Session::takeDeviceTimes() {
  if (!deviceTiming)
    return;
  size_t k = 0;
  double anchor = pendingTrace.empty() ? 0.0 : trace[pendingTrace[0]].start;
  double end = anchor;
  backend.takeKernelTimes([&](const Backend::KernelTime &t) {
    if (evaluating)
      return; // not part of the training step's profile
    times.seconds[t.opcode] += t.seconds;
    if (k < pendingTrace.size()) {
      // One stream: each starts after the one before it ends (the events'
      // float milliseconds may round it a little before).
      TraceEvent &e = trace[pendingTrace[k++]];
      e.start = std::max(anchor + t.start * 1e6, end);
      e.duration = t.seconds * 1e6;
      end = e.start + e.duration;
    }
  });
  pendingTrace.clear();
}

void Session::timeKernels() {
  deviceTiming = backend.timesKernelsOnDevice();
  backend.setKernelTiming(deviceTiming);
  times.onDevice = deviceTiming;
}

uint64_t Session::issueRecord(size_t index, int64_t step) {
  if (!recorder)
    return 0;
  const Instruction &inst = plan.program[index];
  std::string kind(inst.kernel->name);
  CollectiveLabel label{
      step, int64_t(index),
      kind + (inst.unit.empty() ? "" : " of unit '" + inst.unit + "'") +
          (evaluating ? " (evaluation after the step)" : "")};
  uint32_t flat = inst.kernel->opcode == plan::Opcode::AllGather ? inst.outs[0]
                                                                 : inst.ins[0];
  return recorder->issue(label, kind, plan.buffers[flat].size);
}

float Session::step(int64_t step) {
  return run(step, /*optimizer=*/true, plan.program.size());
}

float Session::evaluate(int64_t afterStep) {
  evaluating = true;
  float loss = run(afterStep, /*optimizer=*/false, plan.evalKernels);
  evaluating = false;
  return loss;
}

void Session::startTrace() {
  timeKernels();
  tracing = true;
  traceOrigin = std::chrono::steady_clock::now();
  trace.clear();
}

float Session::forwardBackward() {
  return run(1, /*optimizer=*/false, plan.program.size());
}

std::vector<float> Session::readBuffer(uint32_t id) {
  const BufferDesc &buffer = plan.buffers[id];
  std::vector<float> values(buffer.numElements());
  if (buffer.dtype != plan::DType::BF16) {
    backend.read(buffer.offset, values.data(), buffer.size);
    return values;
  }
  // bf16 (a gradient shard AdamW reads as it is): widened, exactly.
  std::vector<uint16_t> bits(values.size());
  backend.read(buffer.offset, bits.data(), buffer.size);
  widenBF16(values.data(), bits.data(), int64_t(bits.size()));
  return values;
}

void Session::readBufferRange(uint32_t id, int64_t first, int64_t count,
                              float *out) {
  const BufferDesc &buffer = plan.buffers[id];
  uint64_t begin = std::min<uint64_t>(buffer.size, uint64_t(first) * 4);
  backend.read(buffer.offset + begin, out,
               std::min<uint64_t>(buffer.size - begin, uint64_t(count) * 4));
}

void Session::writeBuffer(uint32_t id, const std::vector<float> &values) {
  const BufferDesc &buffer = plan.buffers[id];
  backend.write(buffer.offset, values.data(),
                std::min<uint64_t>(buffer.size, values.size() * sizeof(float)));
  if (buffer.kind == plan::BufferKind::Param && buffer.unit >= 0 &&
      plan.units[buffer.unit].shardBuffer == id)
    writeShardCopy(plan.units[buffer.unit], values.data(), values.size());
}

void Session::writeShardCopy(const UnitDesc &unit, const float *shard,
                             size_t n) {
  if (unit.copyBuffer == plan::kNone)
    return;
  const BufferDesc &copy = plan.buffers[unit.copyBuffer];
  std::vector<uint16_t> bits(std::min<size_t>(n, copy.numElements()));
  roundToBF16(bits.data(), shard, int64_t(bits.size()));
  backend.write(copy.offset, bits.data(), bits.size() * sizeof(uint16_t));
}

std::optional<uint32_t> Session::gradientShard(uint32_t unit) const {
  for (const Instruction &inst : plan.program)
    if (inst.kernel->opcode == plan::Opcode::AdamWShard &&
        inst.outs[0] == plan.units[unit].shardBuffer)
      return inst.ins[0];
  return std::nullopt;
}

int64_t Session::gatherUnit(uint32_t u, const std::vector<float> &shard,
                            std::vector<float> &full) {
  const UnitDesc &unit = plan.units[u];
  RecordScope scope(
      CollectiveLabel{0, -1, "final gather of unit '" + unit.name + "'"});
  if (!unit.expertParallel) {
    full.assign(unit.flatSize, 0.0f);
    shardGroup().allGatherFrom(shard.data(), full.data(), unit.flatSize);
    return 1;
  }
  // Slice x's flat parameter from the S / G ranks that hold it, into its
  // place x flatSize; then the G slices over the expert group (its rank x,
  // whose range of G flatSize over G ranks is exactly that place).
  int64_t slices = plan.expertSize, x = plan.unitExpertSlice(u, comm.rank());
  full.assign(slices * unit.flatSize, 0.0f);
  expertGroup(plan::CommAxis::ExpertShard)
      .allGatherFrom(shard.data(), full.data() + x * unit.flatSize,
                     unit.flatSize);
  expertGroup(plan::CommAxis::Expert)
      .allGather(full.data(), slices * unit.flatSize, plan::DType::F32);
  return slices;
}

std::vector<std::vector<float>> Session::gatherParams() {
  std::vector<std::vector<float>> values(plan.params.size());
  std::vector<float> full;
  for (size_t u = 0; u < plan.units.size(); ++u) {
    const UnitDesc &unit = plan.units[u];
    int64_t slices =
        gatherUnit(uint32_t(u), readBuffer(unit.shardBuffer), full);
    for (size_t p = 0; p < plan.params.size(); ++p) {
      const ParamDesc &param = plan.params[p];
      if (param.unit != u)
        continue;
      // The full parameter is its slices in order (one without experts).
      int64_t n = param.numElements();
      values[p].resize(size_t(slices * n));
      for (int64_t x = 0; x < slices; ++x)
        std::copy_n(full.begin() + x * unit.flatSize + param.unitOffset, n,
                    values[p].begin() + x * n);
    }
  }
  return values;
}

} // namespace fsdp::rt
