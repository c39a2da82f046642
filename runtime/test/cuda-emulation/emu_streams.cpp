//===- emu_streams.cpp - the emulated CUDA runtime: devices, memory, streams
//-===//
//
// The host API of emu_runtime.h over the CPU. A stream is an in-order
// queue that a worker thread of its own runs, so that streams overlap as
// they do on a GPU (and a collective waiting for a peer blocks its stream,
// not the host: the backend's watchdog sees it as it would on a GPU); the
// legacy default stream (nullptr) runs its work at once on the caller.
// Every stream behaves as cudaStreamNonBlocking. Events mark a point of a
// stream's queue. Device memory is host memory the allocator tracks; the
// device's size is FSDP_CUDA_EMULATOR_MEMORY (default 80 GiB), the number
// of devices FSDP_CUDA_EMULATOR_DEVICES (default 8), and cudaMemGetInfo
// reports the size less what cudaMalloc holds. emu_races.h checks every
// access when it is enqueued; a race or an access outside the allocations
// faults the device (a sticky error, as an illegal address does on a GPU),
// and stderr gets the report. A timing event's record (one created without
// cudaEventDisableTiming) is an operation of its stream's queue that stamps
// the host's steady clock when the stream runs it: cudaEventElapsedTime.
//
//===----------------------------------------------------------------------===//
#include "emu_streams.h"
#include "emu_races.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

struct CUstream_st {
  int id = 0; ///< the race checker's index (the host is 0)
  std::thread worker;
  std::deque<std::function<void()>> queue;
  uint64_t enqueued = 0, completed = 0;
  bool stop = false;
  emu::VectorClock clock;
};

struct CUevent_st {
  CUstream_st *stream = nullptr; ///< where it was last recorded
  uint64_t target = 0;           ///< complete once stream->completed reaches it
  emu::VectorClock clock;
  bool recorded = false;
  bool timing = true; ///< created without cudaEventDisableTiming
  /// A timing event's last record: the steady clock's nanoseconds when its
  /// stream ran it, -1 until then (shared with the queued stamp, which
  /// may outlive a re-record or the event).
  std::shared_ptr<std::atomic<int64_t>> stamp;
};

struct cublasContext {
  cudaStream_t stream = nullptr;
};

namespace emu {
bool gProblemsFault = false;

namespace {
// Every stream's queue and the race checker. Never destroyed: a program
// may exit with streams alive, their workers waiting on the condition.
std::mutex &gMu = *new std::mutex;
std::condition_variable &gCv = *new std::condition_variable;
std::vector<CUstream_st *> gStreams; // by id - 1; destroyed ones stay
VectorClock gHost{0};
RaceChecker gChecker;
bool gArmed = false; // the first cudaMalloc arms the checker

std::mutex gFaultMu;
std::atomic<int> gSticky{0};
std::string gStickyMessage;

thread_local int tDevice = 0;

size_t parseBytes(const char *text, size_t fallback) {
  if (!text || !*text)
    return fallback;
  char *end = nullptr;
  double value = std::strtod(text, &end);
  std::string unit = end ? end : "";
  double scale = unit == "" || unit == "B" ? 1
                 : unit == "KiB"           ? 1024.0
                 : unit == "MiB"           ? 1024.0 * 1024
                 : unit == "GiB"           ? 1024.0 * 1024 * 1024
                                           : -1;
  if (!(value > 0) || scale < 0) {
    std::fprintf(stderr,
                 "[cuda-emu] FSDP_CUDA_EMULATOR_MEMORY=%s is not a size "
                 "(e.g. 80GiB, 512MiB); using %zu bytes\n",
                 text, fallback);
    return fallback;
  }
  return size_t(value * scale);
}

size_t deviceBytes() {
  static const size_t bytes =
      parseBytes(std::getenv("FSDP_CUDA_EMULATOR_MEMORY"), size_t(80) << 30);
  return bytes;
}

int deviceCount() {
  static const int count = [] {
    const char *text = std::getenv("FSDP_CUDA_EMULATOR_DEVICES");
    int n = text && *text ? std::atoi(text) : 8;
    return n >= 0 ? n : 0;
  }();
  return count;
}

std::string streamName(int id) {
  return id == 0 ? std::string("the host")
                 : "stream #" + std::to_string(id) + " (created " +
                       std::to_string(id) +
                       (id == 1   ? "st"
                        : id == 2 ? "nd"
                        : id == 3 ? "rd"
                                  : "th") +
                       ")";
}

/// Checks `accesses` as the operation at `clock` of stream `id` (0: the
/// host) that has seen `seen`. gMu held.
void check(int id, uint64_t clock, const VectorClock &seen,
           const std::string &what, const std::vector<Access> &accesses) {
  // Device memory exists once a program allocates some: before that (the
  // kernel tests, which hand the kernels host memory) nothing is checked.
  if (!gArmed)
    return;
  for (const Access &a : accesses) {
    std::string report =
        gChecker.access(id, clock, seen, reinterpret_cast<uintptr_t>(a.p),
                        a.bytes, a.write, what, streamName);
    if (!report.empty()) {
      fault(report.compare(0, 5, "race:") == 0 ? cudaErrorLaunchFailure
                                               : cudaErrorIllegalAddress,
            report);
      return;
    }
  }
}

void workerLoop(CUstream_st *s) {
  std::unique_lock<std::mutex> lock(gMu);
  for (;;) {
    gCv.wait(lock, [&] { return s->stop || !s->queue.empty(); });
    if (s->queue.empty())
      return; // stopped and drained
    std::function<void()> work = std::move(s->queue.front());
    s->queue.pop_front();
    lock.unlock();
    work();
    lock.lock();
    ++s->completed;
    gCv.notify_all();
  }
}
} // namespace

void fault(cudaError_t code, const std::string &message) {
  std::lock_guard<std::mutex> lock(gFaultMu);
  if (gSticky.load() != 0)
    return;
  gStickyMessage = message;
  gSticky.store(int(code));
  std::fprintf(stderr, "[cuda-emu] device fault: %s\n", message.c_str());
  std::fflush(stderr);
}

cudaError_t stickyError() { return cudaError_t(gSticky.load()); }

cudaError_t enqueue(cudaStream_t stream, const std::string &what,
                    const std::vector<Access> &accesses,
                    std::function<void()> work) {
  if (cudaError_t sticky = stickyError())
    return sticky;
  std::unique_lock<std::mutex> lock(gMu);
  if (!stream) {
    ++gHost[0];
    check(0, gHost[0], gHost, what, accesses);
    lock.unlock();
    if (cudaError_t sticky = stickyError())
      return sticky;
    work();
    return cudaSuccess;
  }
  // The host's order is the stream's too: what the host saw finish before
  // it enqueued this happens before it.
  joinClock(stream->clock, gHost);
  if (stream->clock.size() <= size_t(stream->id))
    stream->clock.resize(stream->id + 1, 0);
  uint64_t clock = ++stream->clock[stream->id];
  check(stream->id, clock, stream->clock, what, accesses);
  if (cudaError_t sticky = stickyError())
    return sticky;
  stream->queue.push_back(std::move(work));
  ++stream->enqueued;
  gCv.notify_all();
  return cudaSuccess;
}

void drain(cudaStream_t stream) {
  if (!stream)
    return;
  std::unique_lock<std::mutex> lock(gMu);
  gCv.wait(lock, [&] { return stream->completed == stream->enqueued; });
  joinClock(gHost, stream->clock);
}

} // namespace emu

using emu::gMu;

// ---------------------------------------------------------------- errors
const char *cudaGetErrorName(cudaError_t e) {
  switch (int(e)) {
  case 0:
    return "cudaSuccess";
  case 1:
    return "cudaErrorInvalidValue";
  case 2:
    return "cudaErrorMemoryAllocation";
  case 9:
    return "cudaErrorInvalidConfiguration";
  case 100:
    return "cudaErrorNoDevice";
  case 101:
    return "cudaErrorInvalidDevice";
  case 400:
    return "cudaErrorInvalidResourceHandle";
  case 600:
    return "cudaErrorNotReady";
  case 700:
    return "cudaErrorIllegalAddress";
  case 701:
    return "cudaErrorLaunchOutOfResources";
  case 719:
    return "cudaErrorLaunchFailure";
  }
  return "cudaErrorUnknown";
}

const char *cudaGetErrorString(cudaError_t e) {
  if (e != cudaSuccess && int(e) == emu::gSticky.load())
    return emu::gStickyMessage.c_str(); // set once, before gSticky
  switch (int(e)) {
  case 0:
    return "no error";
  case 1:
    return "invalid argument";
  case 2:
    return "out of memory";
  case 9:
    return "invalid configuration argument";
  case 100:
    return "no CUDA-capable device is detected";
  case 101:
    return "invalid device ordinal";
  case 400:
    return "invalid resource handle";
  case 600:
    return "device not ready";
  case 700:
    return "an illegal memory access was encountered";
  case 719:
    return "unspecified launch failure";
  }
  return "unknown error";
}

// ---------------------------------------------------------------- devices
cudaError_t cudaGetDeviceCount(int *count) {
  *count = emu::deviceCount();
  return *count > 0 ? cudaSuccess : cudaErrorNoDevice;
}

cudaError_t cudaSetDevice(int device) {
  if (device < 0 || device >= emu::deviceCount())
    return cudaErrorInvalidDevice;
  emu::tDevice = device;
  // The host code of a backend runs here: a device problem the kernels
  // show is a fault, as on a GPU, not a count for a test to read.
  emu::gProblemsFault = true;
  return cudaSuccess;
}

cudaError_t cudaGetDevice(int *device) {
  *device = emu::tDevice;
  return cudaSuccess;
}

cudaError_t cudaGetDeviceProperties(cudaDeviceProp *prop, int device) {
  if (device < 0 || device >= emu::deviceCount())
    return cudaErrorInvalidDevice;
  std::memset(prop, 0, sizeof(*prop));
  std::snprintf(prop->name, sizeof(prop->name),
                "CUDA emulator on the CPU (not a GPU), device %d", device);
  prop->totalGlobalMem = emu::deviceBytes();
  prop->major = 9;
  prop->minor = 0;
  prop->multiProcessorCount = 1;
  return cudaSuccess;
}

// Zero: no CUDA runtime or driver is involved, and a figure would claim one.
cudaError_t cudaRuntimeGetVersion(int *version) {
  *version = 0;
  return cudaSuccess;
}
cudaError_t cudaDriverGetVersion(int *version) {
  *version = 0;
  return cudaSuccess;
}

cudaError_t cudaDeviceSynchronize() {
  std::vector<CUstream_st *> streams;
  {
    std::lock_guard<std::mutex> lock(gMu);
    streams = emu::gStreams;
  }
  for (CUstream_st *s : streams)
    emu::drain(s);
  return emu::stickyError();
}

// ---------------------------------------------------------------- memory
cudaError_t cudaMalloc(void **p, size_t bytes) {
  *p = nullptr;
  if (cudaError_t sticky = emu::stickyError())
    return sticky;
  const size_t rounded = (std::max<size_t>(bytes, 1) + 255) / 256 * 256;
  std::lock_guard<std::mutex> lock(gMu);
  if (emu::gChecker.allocatedBytes() + rounded > emu::deviceBytes())
    return cudaErrorMemoryAllocation;
  void *memory = std::aligned_alloc(256, rounded);
  if (!memory)
    return cudaErrorMemoryAllocation;
  // Fresh device memory holds garbage: NaN bytes, so that a read before
  // any write shows.
  std::memset(memory, 0xff, rounded);
  emu::gChecker.allocate(reinterpret_cast<uintptr_t>(memory), rounded);
  emu::gArmed = true;
  *p = memory;
  return cudaSuccess;
}

cudaError_t cudaFree(void *p) {
  if (!p)
    return cudaSuccess;
  cudaDeviceSynchronize(); // cudaFree waits for the device, as on a GPU
  std::lock_guard<std::mutex> lock(gMu);
  if (!emu::gChecker.inAllocation(reinterpret_cast<uintptr_t>(p), 1))
    return cudaErrorInvalidValue;
  emu::gChecker.release(reinterpret_cast<uintptr_t>(p));
  std::free(p);
  return cudaSuccess;
}

cudaError_t cudaMemGetInfo(size_t *freeBytes, size_t *totalBytes) {
  std::lock_guard<std::mutex> lock(gMu);
  *totalBytes = emu::deviceBytes();
  *freeBytes = *totalBytes - emu::gChecker.allocatedBytes();
  return emu::stickyError();
}

namespace {
/// The device sides of a copy: the kind says which pointers are the
/// device's (cudaMemcpyDefault: whichever lies in an allocation).
std::vector<emu::Access> copyAccesses(void *dst, const void *src, size_t bytes,
                                      cudaMemcpyKind kind) {
  bool dstDevice =
      kind == cudaMemcpyHostToDevice || kind == cudaMemcpyDeviceToDevice;
  bool srcDevice =
      kind == cudaMemcpyDeviceToHost || kind == cudaMemcpyDeviceToDevice;
  if (kind == cudaMemcpyDefault) {
    std::lock_guard<std::mutex> lock(gMu);
    dstDevice = emu::gChecker.inAllocation(uintptr_t(dst), 1);
    srcDevice = emu::gChecker.inAllocation(uintptr_t(src), 1);
  }
  std::vector<emu::Access> accesses;
  if (srcDevice)
    accesses.push_back({src, bytes, false});
  if (dstDevice)
    accesses.push_back({dst, bytes, true});
  return accesses;
}
} // namespace

cudaError_t cudaMemcpyAsync(void *dst, const void *src, size_t bytes,
                            cudaMemcpyKind kind, cudaStream_t stream) {
  if (int(kind) < 0 || int(kind) > 4)
    return cudaErrorInvalidValue;
  return emu::enqueue(stream, "cudaMemcpyAsync",
                      copyAccesses(dst, src, bytes, kind), [=] {
                        if (bytes)
                          std::memmove(dst, src, bytes);
                      });
}

cudaError_t cudaMemcpy(void *dst, const void *src, size_t bytes,
                       cudaMemcpyKind kind) {
  // Synchronous, on the legacy default stream: the host's own access.
  return cudaMemcpyAsync(dst, src, bytes, kind, nullptr);
}

cudaError_t cudaMemsetAsync(void *p, int value, size_t bytes,
                            cudaStream_t stream) {
  return emu::enqueue(stream, "cudaMemsetAsync", {{p, bytes, true}}, [=] {
    if (bytes)
      std::memset(p, value, bytes);
  });
}

cudaError_t cudaMemset2DAsync(void *p, size_t pitch, int value, size_t width,
                              size_t height, cudaStream_t stream) {
  if (width > pitch && height > 1)
    return cudaErrorInvalidValue;
  size_t extent = height == 0 ? 0 : pitch * (height - 1) + width;
  return emu::enqueue(stream, "cudaMemset2DAsync", {{p, extent, true}}, [=] {
    for (size_t r = 0; r < height; ++r)
      std::memset(static_cast<char *>(p) + r * pitch, value, width);
  });
}

// ---------------------------------------------------------------- streams
cudaError_t cudaStreamCreateWithFlags(cudaStream_t *stream, unsigned) {
  auto *s = new CUstream_st;
  {
    std::lock_guard<std::mutex> lock(gMu);
    emu::gStreams.push_back(s);
    s->id = int(emu::gStreams.size());
    s->clock.assign(s->id + 1, 0);
  }
  s->worker = std::thread(emu::workerLoop, s);
  *stream = s;
  return cudaSuccess;
}

cudaError_t cudaStreamCreate(cudaStream_t *stream) {
  return cudaStreamCreateWithFlags(stream, cudaStreamDefault);
}

cudaError_t cudaStreamDestroy(cudaStream_t stream) {
  if (!stream)
    return cudaErrorInvalidResourceHandle;
  {
    std::lock_guard<std::mutex> lock(gMu);
    stream->stop = true; // it runs what it holds, then ends
    emu::gCv.notify_all();
  }
  if (stream->worker.joinable())
    stream->worker.join();
  // The object stays (events and clocks may name it); its thread is gone.
  return cudaSuccess;
}

cudaError_t cudaStreamSynchronize(cudaStream_t stream) {
  emu::drain(stream);
  return emu::stickyError();
}

cudaError_t cudaStreamQuery(cudaStream_t stream) {
  if (cudaError_t sticky = emu::stickyError())
    return sticky;
  if (!stream)
    return cudaSuccess;
  std::lock_guard<std::mutex> lock(gMu);
  if (stream->completed != stream->enqueued)
    return cudaErrorNotReady;
  emu::joinClock(emu::gHost, stream->clock);
  return cudaSuccess;
}

// ---------------------------------------------------------------- events
cudaError_t cudaEventCreateWithFlags(cudaEvent_t *event, unsigned flags) {
  *event = new CUevent_st;
  (*event)->timing = !(flags & cudaEventDisableTiming);
  return cudaSuccess;
}
cudaError_t cudaEventCreate(cudaEvent_t *event) {
  return cudaEventCreateWithFlags(event, cudaEventDefault);
}
cudaError_t cudaEventDestroy(cudaEvent_t event) {
  // A wait enqueued on it holds what it needs by value.
  delete event;
  return cudaSuccess;
}

namespace {
int64_t steadyNow() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}
} // namespace

cudaError_t cudaEventRecord(cudaEvent_t event, cudaStream_t stream) {
  if (!event)
    return cudaErrorInvalidResourceHandle;
  if (cudaError_t sticky = emu::stickyError())
    return sticky;
  std::shared_ptr<std::atomic<int64_t>> stamp;
  if (event->timing) {
    // Stamped when the stream reaches the record (at once on the legacy
    // stream), as a GPU stamps a timing event.
    stamp = std::make_shared<std::atomic<int64_t>>(-1);
    if (!stream)
      stamp->store(steadyNow());
    else if (cudaError_t code =
                 emu::enqueue(stream, "cudaEventRecord", {},
                              [stamp] { stamp->store(steadyNow()); }))
      return code;
  }
  std::lock_guard<std::mutex> lock(gMu);
  event->stamp = std::move(stamp);
  event->recorded = true;
  event->stream = stream;
  event->target = stream ? stream->enqueued : 0;
  event->clock = stream ? stream->clock : emu::gHost;
  return cudaSuccess;
}

cudaError_t cudaEventQuery(cudaEvent_t event) {
  if (cudaError_t sticky = emu::stickyError())
    return sticky;
  std::lock_guard<std::mutex> lock(gMu);
  if (event->recorded && event->stream &&
      event->stream->completed < event->target)
    return cudaErrorNotReady;
  emu::joinClock(emu::gHost, event->clock);
  return cudaSuccess;
}

cudaError_t cudaEventSynchronize(cudaEvent_t event) {
  std::unique_lock<std::mutex> lock(gMu);
  if (event->recorded && event->stream) {
    CUstream_st *s = event->stream;
    uint64_t target = event->target;
    emu::gCv.wait(lock, [&] { return s->completed >= target; });
  }
  emu::joinClock(emu::gHost, event->clock);
  return emu::stickyError();
}

cudaError_t cudaEventElapsedTime(float *ms, cudaEvent_t start,
                                 cudaEvent_t end) {
  if (!ms || !start || !end)
    return !ms ? cudaErrorInvalidValue : cudaErrorInvalidResourceHandle;
  if (cudaError_t sticky = emu::stickyError())
    return sticky;
  std::lock_guard<std::mutex> lock(gMu);
  // As CUDA: an event without timing, or never recorded, is not a handle
  // this call can use; one whose stream has not reached it is not ready.
  if (!start->timing || !end->timing || !start->recorded || !end->recorded)
    return cudaErrorInvalidResourceHandle;
  int64_t from = start->stamp->load(), to = end->stamp->load();
  if (from < 0 || to < 0)
    return cudaErrorNotReady;
  *ms = float(double(to - from) * 1e-6);
  return cudaSuccess;
}

cudaError_t cudaStreamWaitEvent(cudaStream_t stream, cudaEvent_t event,
                                unsigned) {
  if (!event)
    return cudaErrorInvalidResourceHandle;
  if (cudaError_t sticky = emu::stickyError())
    return sticky;
  CUstream_st *source;
  uint64_t target;
  {
    std::lock_guard<std::mutex> lock(gMu);
    if (!event->recorded)
      return cudaSuccess; // waiting for an event never recorded: nothing
    source = event->stream;
    target = event->target;
    if (stream)
      emu::joinClock(stream->clock, event->clock);
    else
      emu::joinClock(emu::gHost, event->clock);
  }
  if (!source)
    return cudaSuccess;
  if (!stream) { // the legacy stream waits at once
    cudaEventSynchronize(event);
    return emu::stickyError();
  }
  return emu::enqueue(stream, "cudaStreamWaitEvent", {}, [source, target] {
    std::unique_lock<std::mutex> lock(gMu);
    emu::gCv.wait(lock, [&] { return source->completed >= target; });
  });
}

// ---------------------------------------------------------------- cuBLAS
cublasStatus_t cublasCreate(cublasHandle_t *handle) {
  *handle = new cublasContext;
  return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasDestroy(cublasHandle_t handle) {
  delete handle;
  return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasSetStream(cublasHandle_t handle, cudaStream_t stream) {
  if (!handle)
    return CUBLAS_STATUS_NOT_INITIALIZED;
  handle->stream = stream;
  return CUBLAS_STATUS_SUCCESS;
}
// The emulated GEMMs sum in double and round once: every math mode gets
// the same (better than pedantic fp32) results.
cublasStatus_t cublasSetMathMode(cublasHandle_t handle, cublasMath_t) {
  return handle ? CUBLAS_STATUS_SUCCESS : CUBLAS_STATUS_NOT_INITIALIZED;
}
cublasStatus_t cublasSetWorkspace(cublasHandle_t handle, void *workspace,
                                  size_t bytes) {
  if (!handle)
    return CUBLAS_STATUS_NOT_INITIALIZED;
  std::lock_guard<std::mutex> lock(gMu);
  // cuBLAS's workspace is device memory the caller owns.
  return bytes == 0 || emu::gChecker.inAllocation(uintptr_t(workspace), bytes)
             ? CUBLAS_STATUS_SUCCESS
             : CUBLAS_STATUS_INVALID_VALUE;
}
cublasStatus_t cublasGetVersion(cublasHandle_t, int *version) {
  *version = 0;
  return CUBLAS_STATUS_SUCCESS;
}

namespace emu {
cudaStream_t blasStream(cublasHandle_t handle) {
  return handle ? handle->stream : nullptr;
}
} // namespace emu

// ---------------------------------------------------------------- emulator
void cudaEmuDeclareAccess(cudaStream_t stream, const void *p, size_t bytes,
                          bool write, const char *what) {
  emu::enqueue(stream, what, {{p, bytes, write}}, [] {});
}
