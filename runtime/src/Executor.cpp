//===- Executor.cpp - running a plan's program on a backend ---------------===//

#include "fsdp/runtime/Session.h"

#include <algorithm>
#include <chrono>

namespace fsdp::rt {

bool Session::initialize(uint64_t seed, std::string &error) {
  if (!backend.allocateArena(plan.arenaSize, error))
    return false;
  std::vector<float> host;
  for (size_t u = 0; u < plan.units.size(); ++u) {
    const UnitDesc &unit = plan.units[u];
    const BufferDesc &buffer = plan.buffers[unit.shardBuffer];
    plan::ShardRange range =
        plan::shardRange(unit.flatSize, comm.rank(), comm.size());
    host.assign(buffer.numElements(), 0.0f);
    // The parameters this rank's shard overlaps, element by element.
    for (const ParamDesc &param : plan.params) {
      if (param.unit != u)
        continue;
      int64_t lo = std::max(range.begin, param.unitOffset);
      int64_t hi = std::min(range.end, param.unitOffset + param.numElements());
      if (lo < hi)
        initializeParam(param, seed, lo - param.unitOffset,
                        hi - param.unitOffset,
                        host.data() + (lo - range.begin));
    }
    backend.write(buffer.offset, host.data(), buffer.size);
  }
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

float Session::run(int64_t step, bool optimizer) {
  using Clock = std::chrono::steady_clock;
  std::vector<double> params;
  for (size_t index = 0; index < plan.program.size(); ++index) {
    const Instruction &inst = plan.program[index];
    plan::Opcode opcode = inst.kernel->opcode;
    bool adamw =
        opcode == plan::Opcode::AdamW || opcode == plan::Opcode::AdamWShard;
    if (adamw && !optimizer)
      continue;
    params = inst.params;
    if (adamw && lrOverride)
      params[0] = *lrOverride;
    bool isCollective = opcode == plan::Opcode::AllGather ||
                        opcode == plan::Opcode::ReduceScatter;
    auto start = Clock::now();
    if (isCollective) {
      collective.step = step;
      collective.startNanos =
          std::chrono::duration_cast<std::chrono::nanoseconds>(
              start.time_since_epoch())
              .count();
      collective.instruction = int64_t(index);
    }
    backend.run(plan, inst, params.data(), step);
    if (isCollective)
      collective.instruction = -1;
    auto end = Clock::now();
    double seconds = std::chrono::duration<double>(end - start).count();
    times.seconds[uint32_t(opcode)] += seconds;
    ++times.calls[uint32_t(opcode)];
    if (tracing)
      trace.push_back(
          {uint32_t(index), step,
           std::chrono::duration<double, std::micro>(start - traceOrigin)
               .count(),
           seconds * 1e6});
  }
  backend.synchronize();
  float loss = 0.0f;
  backend.read(plan.buffers[plan.lossBuffer].offset, &loss, sizeof(loss));
  return loss;
}

float Session::step(int64_t step) { return run(step, /*optimizer=*/true); }

void Session::startTrace() {
  tracing = true;
  traceOrigin = std::chrono::steady_clock::now();
  trace.clear();
}

float Session::forwardBackward() { return run(1, /*optimizer=*/false); }

std::vector<float> Session::readBuffer(uint32_t id) {
  const BufferDesc &buffer = plan.buffers[id];
  std::vector<float> values(buffer.numElements());
  backend.read(buffer.offset, values.data(), buffer.size);
  return values;
}

void Session::writeBuffer(uint32_t id, const std::vector<float> &values) {
  const BufferDesc &buffer = plan.buffers[id];
  backend.write(buffer.offset, values.data(),
                std::min<uint64_t>(buffer.size, values.size() * sizeof(float)));
}

std::optional<uint32_t> Session::gradientShard(uint32_t unit) const {
  for (const Instruction &inst : plan.program)
    if (inst.kernel->opcode == plan::Opcode::AdamWShard &&
        inst.outs[0] == plan.units[unit].shardBuffer)
      return inst.ins[0];
  return std::nullopt;
}

std::vector<std::vector<float>> Session::gatherParams() {
  std::vector<std::vector<float>> values(plan.params.size());
  std::vector<float> full;
  for (size_t u = 0; u < plan.units.size(); ++u) {
    const UnitDesc &unit = plan.units[u];
    std::vector<float> shard = readBuffer(unit.shardBuffer);
    full.assign(unit.flatSize, 0.0f);
    comm.allGather(shard.data(), full.data(), unit.flatSize);
    for (size_t p = 0; p < plan.params.size(); ++p)
      if (plan.params[p].unit == u)
        values[p].assign(full.begin() + plan.params[p].unitOffset,
                         full.begin() + plan.params[p].unitOffset +
                             plan.params[p].numElements());
  }
  return values;
}

} // namespace fsdp::rt
