//===- Device.cpp - the CUDA device listed and measured -------------------===//

#include "Device.h"

#include <algorithm>
#include <cstdio>
#include <vector>

namespace fsdp::rt::cuda {

cudaError_t lastTouchedByte(const unsigned char *bytes, uint64_t size,
                            unsigned char canary, uint64_t &end) {
  constexpr uint64_t kChunk = 64ull << 20;
  std::vector<unsigned char> host;
  for (end = size; end > 0;) {
    uint64_t begin = end > kChunk ? end - kChunk : 0;
    host.resize(end - begin);
    cudaError_t code = cudaMemcpy(host.data(), bytes + begin, end - begin,
                                  cudaMemcpyDeviceToHost);
    if (code != cudaSuccess)
      return code;
    for (uint64_t i = end - begin; i > 0; --i)
      if (host[i - 1] != canary) {
        end = begin + i;
        return cudaSuccess;
      }
    end = begin;
  }
  return cudaSuccess;
}

std::string listDevices() {
  int count = 0;
  cudaError_t code = cudaGetDeviceCount(&count);
  if (code != cudaSuccess)
    return "no usable CUDA device (" + cudaText(code) + ")";
  if (count == 0)
    return "no CUDA device";
  std::string out;
  for (int d = 0; d < count; ++d) {
    cudaDeviceProp prop;
    if (cudaGetDeviceProperties(&prop, d) != cudaSuccess)
      continue;
    char line[768];
    std::snprintf(
        line, sizeof(line), "device %d: %s, sm_%d%d, %d SMs, %.1f GiB%s", d,
        prop.name, prop.major, prop.minor, prop.multiProcessorCount,
        double(prop.totalGlobalMem) / (1ull << 30), d + 1 < count ? "\n" : "");
    out += line;
  }
  return out;
}

void MemoryMeter::sample(bool setup, bool stepRan) {
  size_t freeBytes = 0, totalBytes = 0;
  if (cudaMemGetInfo(&freeBytes, &totalBytes) != cudaSuccess)
    return;
  uint64_t used = uint64_t(totalBytes - freeBytes);
  measured.measured = true;
  measured.total = totalBytes;
  if (setup)
    measured.afterSetup = used;
  measured.peak = std::max(measured.peak, used);
  // Lazy module loading, cuBLAS's and NCCL's first calls: what the first
  // step's kernels took.
  if (stepRan && !firstStep) {
    firstStep = true;
    measured.stages.push_back({"first step", used});
  }
}

void MemoryMeter::stage(std::string name) {
  size_t freeBytes = 0, totalBytes = 0;
  if (cudaMemGetInfo(&freeBytes, &totalBytes) != cudaSuccess)
    return;
  measured.stages.push_back(
      {std::move(name), uint64_t(totalBytes - freeBytes)});
  sample(/*setup=*/true); // the figure after setup, until a later stage
}

std::unique_ptr<Nccl> MemoryMeter::nccl(Communicator &host, const char *what,
                                        std::string &error) {
  std::unique_ptr<Nccl> made = Nccl::create(host, error);
  if (made && !made->local()) // a one-rank group allocates nothing
    stage("NCCL #" + std::to_string(++communicators) + " (" + what + ", " +
          std::to_string(host.size()) + " ranks)");
  return made;
}

KernelTimer::~KernelTimer() {
  for (cudaEvent_t e : pool)
    cudaEventDestroy(e);
}

cudaError_t KernelTimer::next(cudaEvent_t &event) {
  if (used == pool.size()) {
    event = nullptr;
    cudaError_t code = cudaEventCreate(&event); // with timing
    if (code != cudaSuccess)
      return code;
    pool.push_back(event);
  }
  event = pool[used++];
  return cudaSuccess;
}

cudaError_t KernelTimer::begin(cudaStream_t stream) {
  cudaError_t code = next(opened);
  return code == cudaSuccess ? cudaEventRecord(opened, stream) : code;
}

cudaError_t KernelTimer::end(cudaStream_t stream, uint32_t opcode) {
  cudaEvent_t closed = nullptr;
  cudaError_t code = next(closed);
  if (code == cudaSuccess)
    code = cudaEventRecord(closed, stream);
  if (code == cudaSuccess)
    timed.push_back({opcode, opened, closed});
  return code;
}

cudaError_t
KernelTimer::take(const std::function<void(const Backend::KernelTime &)> &add) {
  cudaError_t code = cudaSuccess;
  for (const Timed &t : timed) {
    float ms = 0.0f, since = 0.0f;
    code = cudaEventElapsedTime(&ms, t.begin, t.end);
    if (code == cudaSuccess)
      code = cudaEventElapsedTime(&since, timed.front().begin, t.begin);
    if (code != cudaSuccess)
      break;
    add({t.opcode, double(since) * 1e-3, double(ms) * 1e-3});
  }
  timed.clear(); // keeps its capacity, as the pool its events
  used = 0;
  return code;
}

} // namespace fsdp::rt::cuda
