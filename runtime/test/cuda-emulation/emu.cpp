//===- emu.cpp - the emulator: fibers, collectives, fake CUDA, cuBLAS ---===//
#include "emu.h"
#include "emu_streams.h"

#include <algorithm>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <random>
#include <string>
#include <ucontext.h>

// Switching fibers. ucontext's swapcontext saves and restores the signal
// mask with a system call at every switch, which made the kernels' barriers
// most of a training step's time under the emulator; on x86-64 a switch is
// the callee-saved registers, the SSE and x87 control words and the stack
// pointer (as Boost.Context's fcontext does), ucontext elsewhere and
// under AddressSanitizer (whose fiber annotations are made for ucontext's
// switches; with ours it reported the fibers' own frames as overflows).
#if defined(__x86_64__) && !defined(__SANITIZE_ADDRESS__)
#define EMU_FAST_SWITCH 1
extern "C" void emu_switch_stack(void **save, void *load);
asm(R"(
  .text
  .p2align 4
  .globl emu_switch_stack
  .hidden emu_switch_stack
  .type emu_switch_stack,@function
emu_switch_stack:
  pushq %rbp
  pushq %rbx
  pushq %r12
  pushq %r13
  pushq %r14
  pushq %r15
  subq $8, %rsp
  stmxcsr (%rsp)
  fnstcw 4(%rsp)
  movq %rsp, (%rdi)
  movq %rsi, %rsp
  ldmxcsr (%rsp)
  fldcw 4(%rsp)
  addq $8, %rsp
  popq %r15
  popq %r14
  popq %r13
  popq %r12
  popq %rbx
  popq %rbp
  ret
  .size emu_switch_stack,.-emu_switch_stack
)");
#endif
#include <vector>

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/asan_interface.h>
#include <sanitizer/common_interface_defs.h>
#define EMU_ASAN 1
#endif

namespace emu {

// Options the harness sets.
int gThreadOrder = 0; // 0 forward, 1 reverse, 2 random
int gBlockOrder = 0;
unsigned gSeed = 1;
int gProblems = 0; // count of emulation-detected device problems
bool gQuiet = false;
std::string *gNoteLog = nullptr; // where a test collects the reports

void note(const char *fmt, ...) {
  ++gProblems;
  char text[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(text, sizeof(text), fmt, ap);
  va_end(ap);
  if (gNoteLog)
    *gNoteLog += std::string(text) + "\n";
  fprintf(stderr, "[emu] %s\n", text);
  if (gProblemsFault)
    fault(cudaErrorLaunchFailure, std::string("kernel problem: ") + text);
}

float fastExp(float x) {
  // ex2.approx.ftz(x * log2 e): the rounding of the product as on the GPU.
  const float y = x * 1.44269504f;
  float r = std::exp2(y);
  if (std::fpclassify(r) == FP_SUBNORMAL)
    r = 0.0f;
  return r;
}

struct Fiber {
#if EMU_FAST_SWITCH
  void *sp = nullptr; // the saved stack pointer while switched out
#else
  ucontext_t ctx;
#endif
  uint3 tid;
  int linear = 0, warp = 0, lane = 0;
  bool done = false, started = false;
  int waiting = 0; // 0 none, 1 block barrier, 2 warp barrier
  unsigned waitGen = 0;
  char *stack = nullptr;
};

struct Barrier {
  int arrived = 0;
  unsigned gen = 0;
  uint64_t acc[2] = {0, 0};
  int line = -1;
  int mode = -1; // for warp barriers: the shuffle kind
  bool lineMismatch = false;
  unsigned mask = 0;          // lanes arrived (warp)
  unsigned maskP[2] = {0, 0}; // lanes that took part, per parity
  unsigned led = 0; // generation + 1 whose first leaver has been told so
};

Fiber *cur = nullptr;
dim3 gBlockIdx, gBlockDim, gGridDim;
#if EMU_FAST_SWITCH
static void *gSchedSp = nullptr;
#else
static ucontext_t gSched;
#endif
static std::vector<Fiber> gFibers;
static const std::function<void()> *gBody = nullptr;
static Barrier gBlockBar;
static std::vector<Barrier> gWarpBar;
static std::vector<int> gWarpLive, gWarpSize;
static int gLive = 0;
static const char *gKernel = "";
static uint64_t gShfl[64][2][32]; // [warp][parity][lane]
// warpCollective's arguments and the generation (+ 1) each was left for.
static const void *gCollArgs[64][2][32];
static unsigned gCollGen[64][2][32];
static constexpr size_t kStack = 256 * 1024;
static bool gDeadlock = false;
#ifdef EMU_ASAN
static void *gSchedFake = nullptr;
static const void *gSchedBottom = nullptr;
static size_t gSchedSize = 0;
#endif

const uint3 &curTid() { return cur->tid; }
int curThread() { return cur->linear; }
const char *curKernel() { return gKernel; }

struct SharedArray {
  void *p;
  size_t bytes, align;
};
static std::vector<SharedArray> gShared;
void regShared(void *p, size_t bytes, size_t align) {
  for (auto &r : gShared)
    if (r.p == p)
      return;
  gShared.push_back({p, bytes, align});
  memset(p, 0xff, bytes); // first use: nobody has written it yet
}

size_t sharedAlignment(const void *p) {
  const auto *c = static_cast<const char *>(p);
  for (const SharedArray &r : gShared) {
    const auto *base = static_cast<const char *>(r.p);
    if (c < base || c >= base + r.bytes || r.align == 0)
      continue;
    // The largest power of two dividing both the base's alignment and
    // the offset into the array.
    const size_t offset = size_t(c - base);
    const size_t both = offset | r.align;
    return both & (~both + 1);
  }
  return 0;
}

static void toSched() {
  Fiber *f = cur;
#ifdef EMU_ASAN
  void *fake = nullptr;
  __sanitizer_start_switch_fiber(f->done ? nullptr : &fake, gSchedBottom,
                                 gSchedSize);
#endif
#if EMU_FAST_SWITCH
  emu_switch_stack(&f->sp, gSchedSp);
#else
  swapcontext(&f->ctx, &gSched);
#endif
#ifdef EMU_ASAN
  __sanitizer_finish_switch_fiber(fake, nullptr, nullptr);
#endif
}

static void entry() {
#ifdef EMU_ASAN
  __sanitizer_finish_switch_fiber(nullptr, &gSchedBottom, &gSchedSize);
#endif
  (*gBody)();
  Fiber *f = cur;
  f->done = true;
  --gLive;
  --gWarpLive[f->warp];
  // An exit may complete a barrier the others wait at.
  if (gBlockBar.arrived > 0 && gBlockBar.arrived == gLive) {
    note("%s block (%u,%u,%u): thread %d exited while others wait at "
         "__syncthreads (line %d); released",
         gKernel, gBlockIdx.x, gBlockIdx.y, gBlockIdx.z, f->linear,
         gBlockBar.line);
    gBlockBar.arrived = 0;
    gBlockBar.acc[(gBlockBar.gen + 1) & 1] = 0;
    ++gBlockBar.gen;
  }
  Barrier &w = gWarpBar[f->warp];
  if (w.arrived > 0 && w.arrived == gWarpLive[f->warp]) {
    note("%s block %u: lane %d exited while its warp waits at a warp "
         "collective (line %d)",
         gKernel, gBlockIdx.x, f->lane, w.line);
    w.arrived = 0;
    w.acc[(w.gen + 1) & 1] = 0;
    ++w.gen;
  }
  toSched();
}

static bool runnable(const Fiber &f) {
  if (f.done)
    return false;
  if (f.waiting == 1)
    return gBlockBar.gen != f.waitGen;
  if (f.waiting == 2)
    return gWarpBar[f.warp].gen != f.waitGen;
  return true;
}

static void resume(Fiber &f) {
  cur = &f;
#ifdef EMU_ASAN
  void *fake = nullptr;
  __sanitizer_start_switch_fiber(&fake, f.stack, kStack);
#endif
#if EMU_FAST_SWITCH
  emu_switch_stack(&gSchedSp, f.sp);
#else
  swapcontext(&gSched, &f.ctx);
#endif
#ifdef EMU_ASAN
  __sanitizer_finish_switch_fiber(fake, nullptr, nullptr);
#endif
  cur = nullptr;
}

static void runBlock(int nthreads, std::mt19937 &rng) {
  if ((int)gFibers.size() < nthreads)
    gFibers.resize(nthreads);
  const int warps = (nthreads + 31) / 32;
  gWarpBar.assign(warps, Barrier());
  // Generations count from 0 again: no stamp of the last block may match.
  memset(gCollGen, 0, sizeof gCollGen[0] * warps);
  gWarpLive.assign(warps, 0);
  gWarpSize.assign(warps, 0);
  gBlockBar = Barrier();
  gLive = nthreads;
  for (auto &r : gShared) // shared memory starts as garbage: NaN bytes
    memset(r.p, 0xff, r.bytes);
  for (int t = 0; t < nthreads; ++t) {
    Fiber &f = gFibers[t];
    if (!f.stack)
      f.stack = static_cast<char *>(malloc(kStack));
#ifdef EMU_ASAN
    // A fiber of an earlier block never returned from its frames (it ended
    // by switching away): their redzones are still poisoned.
    ASAN_UNPOISON_MEMORY_REGION(f.stack, kStack);
#endif
    f.done = false;
    f.waiting = 0;
    f.linear = t;
    f.tid = {t % gBlockDim.x, (t / gBlockDim.x) % gBlockDim.y,
             t / (gBlockDim.x * gBlockDim.y)};
    f.warp = t / 32;
    f.lane = t % 32;
    ++gWarpLive[f.warp];
    ++gWarpSize[f.warp];
#if EMU_FAST_SWITCH
    // The stack as emu_switch_stack leaves it, returning into entry() with
    // the alignment of a call (rsp + 8 a multiple of 16).
    auto top = reinterpret_cast<uintptr_t>(f.stack + kStack) & ~uintptr_t(15);
    void **sp = reinterpret_cast<void **>(top);
    *--sp = nullptr;                          // alignment
    *--sp = reinterpret_cast<void *>(&entry); // the return address
    for (int r = 0; r < 6; ++r)               // rbp rbx r12-r15
      *--sp = nullptr;
    *--sp = reinterpret_cast<void *>(uintptr_t(0x037F) << 32 | 0x1F80);
    f.sp = sp;
#else
    getcontext(&f.ctx);
    f.ctx.uc_stack.ss_sp = f.stack;
    f.ctx.uc_stack.ss_size = kStack;
    f.ctx.uc_link = nullptr;
    makecontext(&f.ctx, entry, 0);
#endif
  }
  std::vector<int> order(nthreads);
  for (int t = 0; t < nthreads; ++t)
    order[t] = gThreadOrder == 1 ? nthreads - 1 - t : t;
  while (true) {
    if (gThreadOrder == 2)
      std::shuffle(order.begin(), order.end(), rng);
    bool progress = false, all = true;
    for (int t : order) {
      Fiber &f = gFibers[t];
      if (f.done)
        continue;
      all = false;
      if (runnable(f)) {
        progress = true;
        resume(f);
      }
    }
    if (all)
      break;
    if (!progress) {
      note("%s block (%u,%u,%u): DEADLOCK (block barrier arrived %d of %d "
           "live, line %d)",
           gKernel, gBlockIdx.x, gBlockIdx.y, gBlockIdx.z, gBlockBar.arrived,
           gLive, gBlockBar.line);
      gDeadlock = true;
      break; // abandon the fibers (their stacks are reinitialised next time)
    }
  }
}

// ---------------------------------------------------------------- barriers
static uint64_t blockArrive(uint64_t contrib, int line) {
  Fiber *f = cur;
  Barrier &b = gBlockBar;
  if (b.arrived == 0)
    b.line = line;
  else if (b.line != line && !b.lineMismatch) {
    b.lineMismatch = true;
    note("%s block %u: __syncthreads at different lines (%d and %d)", gKernel,
         gBlockIdx.x, b.line, line);
  }
  const unsigned p = b.gen & 1;
  b.acc[p] |= contrib;
  if (++b.arrived == gLive) {
    b.arrived = 0;
    b.acc[p ^ 1] = 0;
    ++b.gen;
  } else {
    f->waiting = 1;
    f->waitGen = b.gen;
    toSched();
    f->waiting = 0;
  }
  return b.acc[p];
}

void syncthreads(int line) { blockArrive(0, line); }
int syncthreadsOr(int pred, int line) {
  return blockArrive(pred ? 1 : 0, line) != 0;
}

// Warp barrier; returns the parity used.
static unsigned warpArrive(unsigned mask, uint64_t contrib, int line,
                           int mode) {
  Fiber *f = cur;
  Barrier &b = gWarpBar[f->warp];
  const int size = gWarpSize[f->warp];
  if (mask != 0xffffffffu)
    note("%s: warp collective with partial mask %08x (line %d)", gKernel, mask,
         line);
  if (b.arrived == 0) {
    b.line = line;
    b.mode = mode;
    b.mask = 0;
    if (size != 32 || gWarpLive[f->warp] != 32)
      note("%s block %u warp %d: full-mask collective (line %d) with %d "
           "lanes present, %d live",
           gKernel, gBlockIdx.x, f->warp, line, size, gWarpLive[f->warp]);
  } else if (b.line != line || b.mode != mode) {
    note("%s block %u warp %d: lanes at different collectives (lines %d, %d)",
         gKernel, gBlockIdx.x, f->warp, b.line, line);
  }
  b.mask |= 1u << f->lane;
  const unsigned p = b.gen & 1;
  b.acc[p] |= contrib;
  b.maskP[p] |= 1u << f->lane;
  if (++b.arrived == gWarpLive[f->warp]) {
    b.arrived = 0;
    b.acc[p ^ 1] = 0;
    b.maskP[p ^ 1] = 0;
    ++b.gen;
  } else {
    f->waiting = 2;
    f->waitGen = b.gen;
    toSched();
    f->waiting = 0;
  }
  return p;
}

unsigned ballot(unsigned mask, int pred, int line) {
  Fiber *f = cur;
  const unsigned p =
      warpArrive(mask, pred ? (uint64_t(1) << f->lane) : 0, line, 10);
  return unsigned(gWarpBar[f->warp].acc[p]);
}

uint64_t shflRaw(unsigned mask, uint64_t bits, int arg, int mode, int line) {
  Fiber *f = cur;
  // The parity of this collective's generation selects the buffer.
  const unsigned p = gWarpBar[f->warp].gen & 1;
  gShfl[f->warp][p][f->lane] = bits;
  warpArrive(mask, 0, line, mode);
  int src;
  if (mode == 0)
    src = f->lane ^ arg;
  else if (mode == 1)
    src = arg & 31;
  else
    src = f->lane + arg < 32 ? f->lane + arg : f->lane;
  if (src >= gWarpSize[f->warp] ||
      !((gWarpBar[f->warp].maskP[p] >> (src & 31)) & 1)) {
    note("%s: shuffle reads lane %d that is absent/exited (line %d)", gKernel,
         src, line);
  }
  return gShfl[f->warp][p][src & 31];
}

void syncwarp(unsigned mask, int line) { warpArrive(mask, 0, line, 11); }

bool warpCollective(const void *args, const void *lanes[32], int mode,
                    int line) {
  Fiber *f = cur;
  Barrier &b = gWarpBar[f->warp];
  const unsigned gen = b.gen, p = gen & 1;
  gCollArgs[f->warp][p][f->lane] = args;
  gCollGen[f->warp][p][f->lane] = gen + 1;
  warpArrive(0xffffffffu, 0, line, mode);
  // Until every lane has left this generation no other can complete, so
  // its parity's slots and mask still hold this one's.
  for (int l = 0; l < 32; ++l)
    lanes[l] = (b.maskP[p] >> l & 1) && gCollGen[f->warp][p][l] == gen + 1
                   ? gCollArgs[f->warp][p][l]
                   : nullptr;
  const bool first = b.led != gen + 1;
  b.led = gen + 1;
  return first;
}

// ---------------------------------------------------------------- launch
// Per host thread, as CUDA's: a launch's configuration error.
static thread_local cudaError_t gLastError = cudaSuccess;
static std::mt19937 gRng(1);
// One kernel at a time: the fibers and the block state above are the
// emulator's, whichever stream's worker runs the kernel.
static std::mutex gKernelMutex;

static void runKernel(const char *name, const Cfg &cfg,
                      const std::function<void()> &body) {
  std::lock_guard<std::mutex> lock(gKernelMutex);
  const uint64_t threads = uint64_t(cfg.block.x) * cfg.block.y * cfg.block.z;
  gKernel = name;
  gBody = &body;
  gBlockDim = cfg.block;
  gGridDim = cfg.grid;
  const uint64_t nblocks = uint64_t(cfg.grid.x) * cfg.grid.y * cfg.grid.z;
  std::vector<uint64_t> order(nblocks);
  for (uint64_t i = 0; i < nblocks; ++i)
    order[i] = gBlockOrder == 1 ? nblocks - 1 - i : i;
  if (gBlockOrder == 2)
    std::shuffle(order.begin(), order.end(), gRng);
  for (uint64_t bi : order) {
    gBlockIdx = dim3(unsigned(bi % cfg.grid.x),
                     unsigned((bi / cfg.grid.x) % cfg.grid.y),
                     unsigned(bi / (uint64_t(cfg.grid.x) * cfg.grid.y)));
    runBlock(int(threads), gRng);
    if (gDeadlock) {
      gDeadlock = false;
      break;
    }
  }
  gBody = nullptr;
}

void launchImpl(const char *name, const Cfg &cfg,
                const std::function<void()> &body) {
  const uint64_t threads = uint64_t(cfg.block.x) * cfg.block.y * cfg.block.z;
  if (threads == 0 || threads > 1024 || cfg.block.z > 64 || cfg.grid.x == 0 ||
      cfg.grid.y == 0 || cfg.grid.z == 0 || cfg.grid.y > 65535 ||
      cfg.grid.z > 65535 || cfg.grid.x > 2147483647u) {
    note("%s: invalid launch configuration grid (%u,%u,%u) block (%u,%u,%u)",
         name, cfg.grid.x, cfg.grid.y, cfg.grid.z, cfg.block.x, cfg.block.y,
         cfg.block.z);
    gLastError = cudaErrorInvalidConfiguration;
    return;
  }
  if (cfg.block.x * cfg.block.y * cfg.block.z % 32 != 0 && !gQuiet)
    fprintf(stderr,
            "[emu info] %s: block of %llu threads (not a multiple "
            "of 32)\n",
            name, (unsigned long long)threads);
  // On a stream the kernel runs later, on its worker: `body` holds its
  // arguments by value (preprocess.py's [=]).
  cudaError_t queued = enqueue(
      cfg.stream, name, {}, [name, cfg, body] { runKernel(name, cfg, body); });
  if (queued != cudaSuccess)
    gLastError = queued;
}

} // namespace emu

// ---------------------------------------------------------------- runtime
cudaError_t cudaGetLastError() {
  cudaError_t e = emu::gLastError;
  emu::gLastError = cudaSuccess;
  return e != cudaSuccess ? e : emu::stickyError();
}
cudaError_t cudaPeekAtLastError() {
  return emu::gLastError != cudaSuccess ? emu::gLastError : emu::stickyError();
}
