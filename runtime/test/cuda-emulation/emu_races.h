//===- emu_races.h - the emulator's race and bounds checks ------*- C++ -*-===//
//
// Streams on a GPU run concurrently unless an event orders them; the CPU
// backend (a thread per plan stream, joined by the host) cannot show a
// missing cudaStreamWaitEvent, because its waits are the host's. This
// checker can: every stream (and the host, index 0) carries a vector
// clock; an operation enqueued on a stream ticks that stream's entry;
// cudaEventRecord snapshots the clock, cudaStreamWaitEvent joins it into
// the waiting stream's, and a host synchronisation (cudaStreamSynchronize,
// a successful cudaStreamQuery or cudaEventQuery, ...) joins it into the
// host's, which every later enqueue inherits. Device memory is shadowed in
// byte intervals holding the last write and the reads since; an access
// that is not ordered after a conflicting one (read after an unordered
// write, write after an unordered read or write, on another stream) is a
// race, whatever the threads' timing was: the check runs when the
// operation is enqueued, on the clocks alone.
//
// It also checks that every device access lies inside one cudaMalloc'd
// allocation (the device's own illegal-address fault).
//
// Accesses come from the operations that know their extents (copies,
// memsets, cuBLAS from its dimensions and leading dimensions, NCCL from
// its counts) and, for our kernels, from the host code's declarations
// (cudaEmuDeclareAccess): a launch's pointers do not say how far the
// kernel reaches.
//
//===----------------------------------------------------------------------===//
#ifndef CUEMU_EMU_RACES_H
#define CUEMU_EMU_RACES_H

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace emu {

using VectorClock = std::vector<uint64_t>;

/// Joins `from` into `into` (element-wise maximum).
void joinClock(VectorClock &into, const VectorClock &from);

/// One side of a conflict: which stream, at which tick, doing what.
struct Epoch {
  int stream = -1; ///< -1: none
  uint64_t clock = 0;
  uint32_t what = 0; ///< an index into the checker's names
};

class RaceChecker {
public:
  /// Device memory the checker knows; an access outside every allocation
  /// is reported.
  void allocate(uintptr_t base, size_t bytes);
  void release(uintptr_t base);
  /// The allocation holding [p, p + bytes), or false.
  bool inAllocation(uintptr_t p, size_t bytes) const;
  size_t allocatedBytes() const { return allocated; }

  /// Records an access by the operation at `stream`'s tick `clock` whose
  /// knowledge of the others is `seen`; returns a report (empty when the
  /// access is ordered and in bounds). `streamName` names streams in it.
  std::string access(int stream, uint64_t clock, const VectorClock &seen,
                     uintptr_t p, size_t bytes, bool write,
                     const std::string &what, std::string (*streamName)(int));

private:
  struct Cell {
    uintptr_t end;
    Epoch write;
    std::vector<Epoch> reads; ///< the latest per stream since the write
  };
  uint32_t intern(const std::string &name);
  void splitAt(uintptr_t at);
  std::string where(uintptr_t p, size_t bytes) const;

  std::map<uintptr_t, size_t> allocations; ///< base -> bytes
  size_t allocated = 0;
  std::map<uintptr_t, Cell> cells; ///< begin -> cell, disjoint
  std::vector<std::string> names;
  std::map<std::string, uint32_t> nameIds;
};

} // namespace emu

#endif
