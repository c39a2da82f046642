//===- Communicator.h - the collectives a sharded step needs ----*- C++ -*-===//
//
// All-gather and reduce-scatter of flat fp32 tensors in the seed's uneven
// layout (rank k owns floor(kP/N) .. floor((k+1)P/N) - 1), plus the few
// scalars a step reports. One process per rank. The local communicator
// serves one rank with no MPI at all; the MPI one is built when MPI is
// found, and aborts the whole job on any error instead of letting the
// other ranks hang.
//
//===----------------------------------------------------------------------===//

#ifndef FSDP_RUNTIME_COMMUNICATOR_H
#define FSDP_RUNTIME_COMMUNICATOR_H

#include <cstdint>
#include <memory>
#include <string>

namespace fsdp::rt {

class Communicator {
public:
  virtual ~Communicator() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  /// "local (1 rank)", "MPI (Open MPI ...), 4 ranks".
  virtual std::string description() const = 0;

  /// `full` (total elements) receives every rank's shard at its offset;
  /// `shard` holds this rank's shardRange(total, rank, size).
  virtual void allGather(const float *shard, float *full, int64_t total) = 0;
  /// `shard` receives this rank's range of the element-wise mean over
  /// ranks of `full`. The reduce-scatter consumes `full`: its contents are
  /// unspecified afterwards (the MPI ring accumulates in it, so that it
  /// needs no staging memory; a compiled step frees it right after, which
  /// --fsdp-verify checks). `shard` must hold the largest shard.
  virtual void reduceScatterMean(float *full, float *shard, int64_t total) = 0;
  virtual double allReduceMean(double value) = 0;
  /// Copies `bytes` bytes from rank `root` to every rank.
  virtual void broadcast(void *data, uint64_t bytes, int root) = 0;
  /// This rank's index among the ranks on its node (picks its GPU), and
  /// how many ranks share the node.
  virtual int localRank() const = 0;
  virtual int localSize() const = 0;
  /// A communicator over the same ranks whose collectives never match this
  /// one's, for a stream of its own; null when this one's collectives may
  /// not run on another thread (MPI without MPI_THREAD_MULTIPLE), with the
  /// reason in `why`. Every rank must call it, in the same order.
  virtual std::unique_ptr<Communicator> duplicate(std::string &why) = 0;
  virtual uint64_t allReduceMax(uint64_t value) = 0;
  /// Ends every rank of the job with `code`.
  [[noreturn]] virtual void abort(int code) = 0;
};

/// One rank, no communication.
std::unique_ptr<Communicator> createLocalCommunicator();

/// MPI_COMM_WORLD after MPI_Init_thread; null when this build has no MPI.
std::unique_ptr<Communicator> createMpiCommunicator(int *argc, char ***argv);

/// True when this build can run more than one rank.
bool haveMpi();

} // namespace fsdp::rt

#endif // FSDP_RUNTIME_COMMUNICATOR_H
