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
//===----------------------------------------------------------------------===//

#ifndef FSDP_RUNTIME_CUDA_NCCL_H
#define FSDP_RUNTIME_CUDA_NCCL_H

#include "fsdp/runtime/Communicator.h"

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

  /// `full` (total elements) receives every rank's shard; `shard` holds this
  /// rank's range.
  bool allGather(const float *shard, float *full, int64_t total,
                 cudaStream_t stream, std::string &error);
  /// `shard` receives this rank's range of the mean over ranks of `full`.
  bool reduceScatterMean(const float *full, float *shard, int64_t total,
                         cudaStream_t stream, std::string &error);
  /// ncclSuccess, or the error NCCL found while collectives ran.
  ncclResult_t asyncError();
  void abort();
  static std::string version();

private:
  Nccl(ncclComm_t comm, int rank, int size)
      : comm(comm), rank(rank), size(size) {}
  ncclComm_t comm;
  int rank, size;
  bool aborted = false;
};

} // namespace fsdp::rt::cuda

#endif // FSDP_RUNTIME_CUDA_NCCL_H
