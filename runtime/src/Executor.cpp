//===- Executor.cpp - running a plan's program on a backend ---------------===//

#include "fsdp/runtime/Session.h"

#include <chrono>

namespace fsdp::rt {

bool Session::initialize(uint64_t seed, std::string &error) {
  if (!backend.allocateArena(plan.arenaSize, error))
    return false;
  std::vector<float> host;
  for (const ParamDesc &param : plan.params) {
    const BufferDesc &buffer = plan.buffers[param.buffer];
    host.resize(buffer.numElements());
    initializeParam(param, seed, host.data());
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
  for (const Instruction &inst : plan.program) {
    plan::Opcode opcode = inst.kernel->opcode;
    if (opcode == plan::Opcode::AdamW && !optimizer)
      continue;
    params = inst.params;
    if (opcode == plan::Opcode::AdamW && lrOverride)
      params[0] = *lrOverride;
    auto start = Clock::now();
    backend.run(plan, inst, params.data(), step);
    times.seconds[uint32_t(opcode)] +=
        std::chrono::duration<double>(Clock::now() - start).count();
    ++times.calls[uint32_t(opcode)];
  }
  backend.synchronize();
  float loss = 0.0f;
  backend.read(plan.buffers[plan.lossBuffer].offset, &loss, sizeof(loss));
  return loss;
}

float Session::step(int64_t step) { return run(step, /*optimizer=*/true); }

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

std::optional<uint32_t> Session::gradientBuffer(uint32_t param) const {
  for (const Instruction &inst : plan.program)
    if (inst.kernel->opcode == plan::Opcode::AdamW &&
        inst.outs[0] == plan.params[param].buffer)
      return inst.ins[0];
  return std::nullopt;
}

} // namespace fsdp::rt
