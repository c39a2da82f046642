//===- Communicator.h - the collectives a sharded step needs ----*- C++ -*-===//
//
// All-gather and reduce-scatter of flat tensors, f32 or bf16, in the seed's
// uneven layout (rank k owns floor(kP/N) .. floor((k+1)P/N) - 1), the
// all-to-alls of expert parallelism (counts, then rows), plus the few
// scalars a step reports. One process per rank. The local communicator
// serves one rank with no MPI at all; the MPI one is built when MPI is
// found, and aborts the whole job on any error instead of letting the
// other ranks hang.
//
//===----------------------------------------------------------------------===//

#ifndef FSDP_RUNTIME_COMMUNICATOR_H
#define FSDP_RUNTIME_COMMUNICATOR_H

#include "fsdp/runtime/PlanFormat.h"

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

  /// All-gather in place: `full` (total elements of `type`, f32 or bf16)
  /// holds this rank's range shardRange(total, rank, size) at its offset,
  /// and receives every other rank's at theirs. In place, so that a shard
  /// of another type (mixed precision: an f32 master shard, a bf16
  /// gathered parameter) is converted straight into its slot and moves in
  /// the gathered type, with no staging buffer.
  virtual void allGather(void *full, int64_t total, plan::DType type) = 0;
  /// `shard` receives this rank's range of the element-wise mean over
  /// ranks of `full` (both of `type`, f32 or bf16; bf16 sums round to
  /// nearest even after each addition and after the scale by 1/N, as a
  /// bf16 reduction on a GPU does). The reduce-scatter consumes `full`:
  /// its contents are unspecified afterwards (the MPI ring accumulates in
  /// it, so that it needs no staging memory; a compiled step frees it
  /// right after, which --fsdp-verify checks). `shard` must hold the
  /// largest shard.
  virtual void reduceScatterMean(void *full, void *shard, int64_t total,
                                 plan::DType type) = 0;
  /// The plan's all_gather: this rank's range, from a separate `shard` of
  /// `shardType` (a plan's shard buffer), converted into its slot of
  /// `full` (rounded to nearest even where `type` is bf16 and the shard
  /// f32, widened the other way), then allGather in place.
  void allGatherFrom(const void *shard, plan::DType shardType, void *full,
                     plan::DType type, int64_t total);
  /// The same in f32 (the runtime's own gathers: --export, tests).
  void allGatherFrom(const float *shard, float *full, int64_t total) {
    allGatherFrom(shard, plan::DType::F32, full, plan::DType::F32, total);
  }
  /// Hybrid sharding's replica all-reduce: `data` (count elements of
  /// `type`, f32 or bf16) becomes, in place, the element-wise mean over
  /// this communicator's ranks, bit for bit the same on every rank (sum,
  /// then the scale by 1/size, which rounds once more in bf16).
  virtual void allReduceMeanInPlace(void *data, int64_t count,
                                    plan::DType type) = 0;
  virtual double allReduceMean(double value) = 0;
  /// The sum over ranks of `value` (MPI_SUM in double), the same on every
  /// rank: gradient clipping's global sum of squares.
  virtual double allReduceSum(double value) = 0;
  /// Copies `bytes` bytes from rank `root` to every rank.
  virtual void broadcast(void *data, uint64_t bytes, int root) = 0;
  /// Expert parallelism's counts exchange (MPI_Alltoall): every rank sends
  /// `perPeer` values to each rank of this communicator, rank j getting
  /// send[j * perPeer .. (j + 1) * perPeer - 1], and receives each rank's
  /// block in rank order, rank i's in recv[i * perPeer ..]. Both arrays
  /// hold size() * perPeer values and must not overlap; the block to
  /// itself is copied. Every rank passes the same `perPeer` (0 moves
  /// nothing). Values are moved, never combined: the result is exact and
  /// the same whatever the algorithm.
  virtual void allToAllCounts(const int64_t *send, int64_t *recv,
                              int64_t perPeer) = 0;
  /// Expert parallelism's dispatch and combine (MPI_Alltoallv): rows of
  /// `rowElements` elements of `type` (f32, bf16 or i32; every rank passes
  /// the same both). This rank sends sendRows[j] rows to rank j, taken
  /// consecutively from `send` in rank order (rank 0's first, then rank
  /// 1's, ...), and receives recvRows[i] rows from rank i, placed
  /// consecutively in `recv` in rank order; the rows keep their order
  /// within a block. sendRows and recvRows hold size() counts each, in
  /// host memory, and must match across ranks: rank i's sendRows[j] is
  /// rank j's recvRows[i] (allToAllCounts makes it so); a count may be 0.
  /// `send` and `recv` must not overlap, and nothing past the received
  /// rows is written. Bits are moved unchanged, so the result is exact and
  /// deterministic. Row counts are int64, but MPI's are int: the MPI
  /// communicator aborts the job, with a message, where a rank's rows sent
  /// or received in all exceed INT_MAX (each row moves as one MPI datatype,
  /// so the elements may exceed it).
  virtual void allToAllV(const void *send, const int64_t *sendRows, void *recv,
                         const int64_t *recvRows, int64_t rowElements,
                         plan::DType type) = 0;
  /// This rank's index among the ranks on its node (picks its GPU), and
  /// how many ranks share the node.
  virtual int localRank() const = 0;
  virtual int localSize() const = 0;
  /// A communicator over the same ranks whose collectives never match this
  /// one's, for a stream of its own; null when this one's collectives may
  /// not run on another thread (MPI without MPI_THREAD_MULTIPLE), with the
  /// reason in `why`. Every rank must call it, in the same order.
  virtual std::unique_ptr<Communicator> duplicate(std::string &why) = 0;
  /// The ranks of this communicator that pass the same `color`, ordered
  /// by `key` (MPI_Comm_split): a mesh axis's group (`name` says which,
  /// for the flight recorder: "shard group 1 (ranks 2-3)"). Null where this
  /// communicator cannot split, with the reason in `why`. Every rank must
  /// call it, in the same order.
  virtual std::unique_ptr<Communicator>
  split(int color, int key, const std::string &name, std::string &why) = 0;
  /// The group this communicator spans, as split() named it ("world" for
  /// every rank).
  virtual std::string groupName() const { return "world"; }
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

/// Ends every rank of an MPI job of more than one rank with `code`
/// (MPI_Abort on MPI's world), no communicator object needed: for an
/// error where none can be used any more (an exception that escaped).
/// Returns where MPI is not running or runs one rank.
void abortMpiJob(int code);

} // namespace fsdp::rt

#endif // FSDP_RUNTIME_COMMUNICATOR_H
