//===- Nccl.h - one NCCL communicator over the job's ranks ------*- C++ -*-===//
//
// Bootstrapped over the host communicator (MPI, or none for one rank):
// rank 0 creates the unique id and broadcasts it. Collectives are enqueued
// on a CUDA stream and return at once; errors NCCL detects while they run
// are read with asyncError() (ncclCommGetAsyncError), and abort() tears
// the communicator down so that no kernel waits on a dead peer forever.
//
// The seed's shard layout is uneven (rank k owns floor(kP/N) ..
// floor((k+1)P/N) - 1). NCCL's all-gather and reduce-scatter need equal
// counts, so they serve the case N divides P; otherwise the collective is a
// group of N broadcasts (all-gather) or N reduces (reduce-scatter), one
// rooted at each rank over its range: the same bytes cross the wire, in one
// fused launch.
//
// A group of one rank has nothing to exchange: no NCCL communicator is
// created for it (NCCL's state costs about 1 GiB of device memory per
// communicator even without peers, docs/cuda.md), and each collective is
// the copy its semantics leave (none when in place) on the same stream.
//
// Expert parallelism's all-to-alls (counts, then rows of uneven counts) are
// grouped point-to-point calls: NCCL has no all-to-all of its own.
//
// Element types come from the plan (NcclTypes.h): f32, or bf16 (a bf16
// reduce-scatter is NCCL's bf16 ncclAvg). A mixed-precision all-gather
// (an f32 shard, a bf16 result) is gathered in place: the backend rounds
// its shard into its own slot of the result first, and allGatherInPlace
// moves the slots, two bytes per element, with no staging buffer.
//
//===----------------------------------------------------------------------===//

#ifndef FSDP_RUNTIME_CUDA_NCCL_H
#define FSDP_RUNTIME_CUDA_NCCL_H

#include "fsdp/runtime/PlanFormat.h"
#include "fsdp/runtime/comm/Communicator.h"

#include <cuda_runtime_api.h>
#include <nccl.h>

#include <memory>
#include <string>

namespace fsdp::rt::cuda {

class Nccl {
public:
  /// Collective over every rank of `host` (every rank must call it, in the
  /// same order); null with `error` on failure.
  static std::unique_ptr<Nccl> create(Communicator &host, std::string &error);
  ~Nccl();

  /// `full` (total elements of `type`) receives every rank's shard;
  /// `shard` holds this rank's range (the same type).
  bool allGather(const void *shard, void *full, plan::DType type, int64_t total,
                 cudaStream_t stream, std::string &error);
  /// allGather whose shard is already in place: this rank's range of
  /// `full` holds it (NCCL's in-place forms: ncclAllGather from
  /// full + rank * count, the broadcasts rooted here from their own range).
  bool allGatherInPlace(void *full, plan::DType type, int64_t total,
                        cudaStream_t stream, std::string &error);
  /// `shard` receives this rank's range of the mean over ranks of `full`
  /// (both of `type`).
  bool reduceScatterMean(const void *full, void *shard, plan::DType type,
                         int64_t total, cudaStream_t stream,
                         std::string &error);
  /// `out` receives the sum over ranks of the f32 scalar `in` (gradient
  /// clipping's sum of squares): ncclAllReduce, the same on every rank.
  bool allReduceSum(const float *in, float *out, cudaStream_t stream,
                    std::string &error);
  /// Hybrid sharding's replica all-reduce: `data` (count elements of
  /// `type`) becomes, in place, the mean over this communicator's ranks
  /// (ncclAllReduce with ncclAvg).
  bool allReduceMean(void *data, plan::DType type, int64_t count,
                     cudaStream_t stream, std::string &error);
  /// Expert parallelism's counts exchange: `perPeer` int64 values to each
  /// rank (rank j gets send[j * perPeer ..]) and each rank's block in rank
  /// order into `recv` (rank i's at recv[i * perPeer]); both device
  /// memory, not overlapping. NCCL has no all-to-all: a ncclSend and a
  /// ncclRecv per rank (itself included) in one ncclGroupStart/End, which
  /// NCCL runs as one fused operation (so no pair waits on another).
  bool allToAllCounts(const int64_t *send, int64_t *recv, int64_t perPeer,
                      cudaStream_t stream, std::string &error);
  /// Expert parallelism's rows: sendRows[j] rows of `rowElements` elements
  /// of `type` to rank j, consecutive in `send` in rank order, and
  /// recvRows[i] rows from rank i, consecutive in `recv` in rank order
  /// (Communicator::allToAllV's semantics). The row counts are host
  /// memory (NCCL takes its sizes on the host: counts exchanged on the
  /// device are copied back first); the rows are device memory. One
  /// ncclSend/ncclRecv per rank with rows in one group; a count of 0 posts
  /// nothing on either side (both know it). NCCL's counts are size_t: no
  /// int limit.
  bool allToAllV(const void *send, const int64_t *sendRows, void *recv,
                 const int64_t *recvRows, int64_t rowElements, plan::DType type,
                 cudaStream_t stream, std::string &error);
  int rankId() const { return rank; }
  /// A one-rank group: collectives are local copies, NCCL is not used.
  bool local() const { return comm == nullptr; }
  int worldSize() const { return size; }
  /// ncclSuccess, or the error NCCL found while collectives ran.
  ncclResult_t asyncError();
  void abort();
  static std::string version();

private:
  Nccl(ncclComm_t comm, int rank, int size)
      : comm(comm), rank(rank), size(size) {}
  /// `bytes` from `from` to `to` on `stream` (a one-rank collective);
  /// nothing when they are the same.
  static bool copy(const void *from, void *to, size_t bytes,
                   cudaStream_t stream, std::string &error);
  ncclComm_t comm; ///< null for a one-rank group
  int rank, size;
  bool aborted = false;
};

} // namespace fsdp::rt::cuda

#endif // FSDP_RUNTIME_CUDA_NCCL_H
