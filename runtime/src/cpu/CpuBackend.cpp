//===- CpuBackend.cpp - the CPU backend: our kernels plus a CBLAS ---------===//

#include "fsdp/runtime/Backend.h"
#include "fsdp/runtime/Communicator.h"

#include "Blas.h"
#include "CollectiveStreams.h"
#include "Kernels.h"

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <map>
#include <omp.h>

namespace fsdp::rt {
namespace {
constexpr unsigned char kCanary = 0xA5;

int64_t nowNanos() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

class CpuBackend : public Backend {
public:
  CpuBackend(std::unique_ptr<cpu::Blas> blas, int threads, Communicator &comm,
             const std::string &collectiveThreads)
      : blas(std::move(blas)), threads(threads), comm(comm) {
    // Every rank must take the same decision: duplicating a communicator
    // is collective.
    int cores = omp_get_num_procs();
    bool spare = comm.localSize() * (threads + 1) <= cores;
    bool want =
        collectiveThreads == "on" || (collectiveThreads == "auto" && spare);
    if (comm.allReduceMax(want ? 0 : 1) != 0) {
      mode = collectiveThreads == "off"
                 ? "synchronously (--collective-threads off)"
             : collectiveThreads == "on"
                 ? "synchronously (another rank has them off)"
                 : "synchronously (auto: " + std::to_string(comm.localSize()) +
                       " rank(s) x " + std::to_string(threads) +
                       " thread(s) leave no core for communication threads "
                       "on " +
                       std::to_string(cores) +
                       " cores somewhere; --collective-threads on forces them)";
      return;
    }
    // A thread per plan stream, on its own communicator; synchronous
    // collectives where the communicator cannot run on other threads.
    std::vector<std::unique_ptr<Communicator>> comms;
    for (uint32_t s = 1; s < plan::kNumStreams; ++s) {
      std::string why;
      if (auto copy = comm.duplicate(why)) {
        comms.push_back(std::move(copy));
        continue;
      }
      mode = "synchronously (" + why + ")";
      return;
    }
    streams = std::make_unique<CollectiveStreams>(std::move(comms));
    mode = "a thread per stream";
  }
  ~CpuBackend() override {
    streams.reset(); // joins the stream threads first
    std::free(arena);
  }

  std::string description() const override {
    return "cpu: " + std::to_string(threads) + " threads, GEMM " +
           blas->description();
  }

  bool allocateArena(uint64_t bytes, std::string &error) override {
    size_t rounded = (std::max<uint64_t>(bytes, 1) + 63) / 64 * 64;
    arena = static_cast<unsigned char *>(std::aligned_alloc(64, rounded));
    if (!arena) {
      error = "cannot allocate the " + std::to_string(bytes) +
              "-byte arena on the host";
      return false;
    }
    arenaSize = bytes;
    std::memset(arena, kCanary, rounded);
    return true;
  }

  void write(uint64_t offset, const void *data, uint64_t bytes) override {
    std::memcpy(arena + offset, data, bytes);
  }
  void read(uint64_t offset, void *data, uint64_t bytes) override {
    std::memcpy(data, arena + offset, bytes);
  }

  uint64_t measureHighWaterMark() override {
    uint64_t end = arenaSize;
    while (end > 0 && arena[end - 1] == kCanary)
      --end;
    return end;
  }

  void run(const Plan &plan, const Instruction &inst, const double *params,
           int64_t step) override;

  void start(const Plan &plan, const std::vector<const Instruction *> &group,
             uint32_t stream) override {
    // A bucket runs back to back on its stream's thread: one hand-off.
    std::vector<CollectiveStreams::Job> jobs;
    std::vector<uint32_t> tokens;
    for (const Instruction *inst : group) {
      jobs.push_back(collective(plan, *inst));
      tokens.push_back(uint32_t(inst->params[1]));
    }
    auto job = [jobs = std::move(jobs)](Communicator &c) {
      for (const auto &one : jobs)
        one(c);
    };
    if (streams)
      return streams->start(stream, std::move(tokens), std::move(job));
    // In place: the wait reports when it ran, for traces and profiles.
    Span span{nowNanos(), 0};
    job(comm);
    span.endNanos = nowNanos();
    for (uint32_t token : tokens)
      ranInPlace[token] = span;
  }
  Span wait(uint32_t token) override {
    if (streams)
      return streams->wait(token);
    Span span = ranInPlace[token];
    ranInPlace.erase(token);
    return span;
  }
  std::string collectiveMode() const override { return mode; }

private:
  /// The all-gather or reduce-scatter `inst` as a job for a communicator.
  CollectiveStreams::Job collective(const Plan &plan, const Instruction &inst) {
    const float *in = f32(plan, inst.ins[0]);
    float *out = f32(plan, inst.outs[0]);
    if (inst.kernel->opcode == plan::Opcode::AllGather) {
      int64_t total = plan.buffers[inst.outs[0]].numElements();
      return [=](Communicator &c) { c.allGather(in, out, total); };
    }
    int64_t total = plan.buffers[inst.ins[0]].numElements();
    return [=](Communicator &c) { c.reduceScatterMean(in, out, total); };
  }

  float *f32(const Plan &plan, uint32_t id) {
    return reinterpret_cast<float *>(arena + plan.buffers[id].offset);
  }
  int32_t *i32(const Plan &plan, uint32_t id) {
    return reinterpret_cast<int32_t *>(arena + plan.buffers[id].offset);
  }

  std::unique_ptr<cpu::Blas> blas;
  int threads;
  Communicator &comm;
  unsigned char *arena = nullptr;
  uint64_t arenaSize = 0;
  std::unique_ptr<CollectiveStreams> streams;
  std::map<uint32_t, Span> ranInPlace; ///< without streams: token -> when
  std::string mode;
};

void CpuBackend::run(const Plan &plan, const Instruction &inst,
                     const double *params, int64_t step) {
  using plan::Opcode;
  auto in = [&](size_t k) -> const BufferDesc & {
    return plan.buffers[inst.ins[k]];
  };
  auto out = [&](size_t k) -> const BufferDesc & {
    return plan.buffers[inst.outs[k]];
  };
  auto I = [&](size_t k) { return f32(plan, inst.ins[k]); };
  auto O = [&](size_t k) { return f32(plan, inst.outs[k]); };
  auto last = [](const BufferDesc &b) {
    return b.shape.empty() ? int64_t(1) : b.shape.back();
  };
  switch (inst.kernel->opcode) {
  case Opcode::Embedding:
    cpu::embeddingForward(O(0), i32(plan, inst.ins[0]), I(1), I(2),
                          in(0).shape[0], in(0).shape[1], in(1).shape[1]);
    break;
  case Opcode::EmbeddingBackward:
    cpu::embeddingBackward(O(0), O(1), I(0), i32(plan, inst.ins[1]),
                           in(1).shape[0], in(1).shape[1], out(0).shape[1],
                           out(0).shape[0], out(1).shape[0]);
    break;
  case Opcode::LayerNorm: {
    int64_t C = last(in(0));
    cpu::layerNormForward(O(0), O(1), O(2), I(0), I(1), I(2),
                          in(0).numElements() / C, C, float(params[0]));
    break;
  }
  case Opcode::LayerNormBackward: {
    int64_t C = last(in(1));
    cpu::layerNormBackward(O(0), O(1), O(2), I(0), I(1), I(2), I(3), I(4),
                           in(1).numElements() / C, C);
    break;
  }
  case Opcode::Linear: {
    int64_t OC = in(1).shape[0], IC = in(1).shape[1];
    cpu::linearForward(*blas, O(0), I(0), I(1),
                       inst.ins.size() == 3 ? I(2) : nullptr,
                       in(0).numElements() / IC, IC, OC);
    break;
  }
  case Opcode::LinearGradInput: {
    int64_t OC = in(1).shape[0], IC = in(1).shape[1];
    cpu::linearGradInput(*blas, O(0), I(0), I(1), in(0).numElements() / OC, IC,
                         OC);
    break;
  }
  case Opcode::LinearGradWeight: {
    int64_t OC = out(0).shape[0], IC = out(0).shape[1];
    cpu::linearGradWeight(*blas, O(0), I(0), I(1), in(0).numElements() / OC, IC,
                          OC);
    break;
  }
  case Opcode::BiasGrad: {
    int64_t OC = last(in(0));
    cpu::biasGrad(O(0), I(0), in(0).numElements() / OC, OC);
    break;
  }
  case Opcode::Add:
    cpu::add(O(0), I(0), I(1), out(0).numElements());
    break;
  case Opcode::Gelu:
    cpu::geluForward(O(0), I(0), out(0).numElements());
    break;
  case Opcode::GeluBackward:
    cpu::geluBackward(O(0), I(0), I(1), out(0).numElements());
    break;
  case Opcode::Relu:
    cpu::reluForward(O(0), I(0), out(0).numElements());
    break;
  case Opcode::ReluBackward:
    cpu::reluBackward(O(0), I(0), I(1), out(0).numElements());
    break;
  case Opcode::Attention: {
    const auto &s = in(0).shape;
    cpu::attentionForward(*blas, O(0), O(1), I(0), s[0], s[1], s[2] / 3,
                          int64_t(params[0]));
    break;
  }
  case Opcode::AttentionBackward: {
    const auto &s = in(1).shape;
    cpu::attentionBackward(*blas, O(0), O(1), I(0), I(1), I(2), s[0], s[1],
                           s[2] / 3, int64_t(params[0]));
    break;
  }
  case Opcode::CrossEntropy: {
    int64_t V = last(in(0));
    cpu::crossEntropyForward(O(0), I(0), i32(plan, inst.ins[1]),
                             in(0).numElements() / V, V);
    break;
  }
  case Opcode::CrossEntropyBackward: {
    int64_t V = last(in(1));
    cpu::crossEntropyBackward(O(0), I(0), I(1), i32(plan, inst.ins[2]),
                              in(1).numElements() / V, V);
    break;
  }
  case Opcode::AdamW:
    cpu::adamw(O(0), O(1), O(2), I(0), out(0).numElements(), float(params[0]),
               float(params[1]), float(params[2]), float(params[3]),
               float(params[4]), step);
    break;
  case Opcode::Fill:
    cpu::fill(O(0), out(0).numElements(), float(params[0]));
    break;
  case Opcode::Copy:
    std::memmove(O(0), I(0), out(0).size);
    break;
  case Opcode::AllGather:
  case Opcode::ReduceScatter:
    collective(plan, inst)(comm);
    break;
  case Opcode::Wait:
    break; // the executor calls wait()
  case Opcode::AdamWShard:
    // Segment by parameter: a no_weight_decay parameter gets no decay.
    // Elements past this rank's range (the padding of a shorter shard) are
    // left alone.
    forEachShardSegment(
        plan, uint32_t(out(0).unit), comm.rank(), comm.size(),
        [&](const ParamDesc &param, int64_t at, int64_t, int64_t count) {
          cpu::adamw(O(0) + at, O(1) + at, O(2) + at, I(0) + at, count,
                     float(params[0]), float(params[1]), float(params[2]),
                     float(params[3]),
                     param.noWeightDecay ? 0.0f : float(params[4]), step);
        });
    break;
  }
}
} // namespace

std::unique_ptr<Backend> createCpuBackend(const CpuBackendOptions &options,
                                          std::string &error) {
  int threads = options.threads > 0 ? options.threads : omp_get_num_procs();
  omp_set_num_threads(threads);
  std::unique_ptr<cpu::Blas> blas =
      cpu::Blas::open(options.blas, threads, error);
  if (!blas)
    return nullptr;
  if (!options.comm) {
    error = "the CPU backend needs a communicator";
    return nullptr;
  }
  if (options.collectiveThreads != "auto" &&
      options.collectiveThreads != "on" && options.collectiveThreads != "off") {
    error = "--collective-threads expects on, off or auto, got '" +
            options.collectiveThreads + "'";
    return nullptr;
  }
  return std::make_unique<CpuBackend>(std::move(blas), threads, *options.comm,
                                      options.collectiveThreads);
}

} // namespace fsdp::rt
