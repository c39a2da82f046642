//===- Nccl.cpp - one NCCL communicator over the job's ranks --------------===//

#include "Nccl.h"
#include "NcclTypes.h"

#include "fsdp/runtime/PlanFormat.h"

#include <cstring>

namespace fsdp::rt::cuda {

static bool ok(ncclResult_t result, const char *what, std::string &error) {
  if (result == ncclSuccess)
    return true;
  error = std::string(what) + " failed: " + ncclGetErrorString(result);
  if (const char *last = ncclGetLastError(nullptr); last && *last)
    error += std::string(" (") + last + ")";
  return false;
}

bool Nccl::copy(const void *from, void *to, size_t bytes, cudaStream_t stream,
                std::string &error) {
  if (from == to || bytes == 0)
    return true;
  cudaError_t code =
      cudaMemcpyAsync(to, from, bytes, cudaMemcpyDeviceToDevice, stream);
  if (code == cudaSuccess)
    return true;
  error = std::string("cudaMemcpyAsync (a one-rank collective): ") +
          cudaGetErrorString(code);
  return false;
}

std::unique_ptr<Nccl> Nccl::create(Communicator &host, std::string &error) {
  // Every rank of the group decides alike (its size), so no rank waits
  // in a broadcast another skipped.
  if (host.size() == 1)
    return std::unique_ptr<Nccl>(new Nccl(nullptr, host.rank(), 1));
  ncclUniqueId id;
  std::memset(&id, 0, sizeof(id));
  bool haveId =
      host.rank() != 0 || ok(ncclGetUniqueId(&id), "ncclGetUniqueId", error);
  // Every rank joins the broadcast even when rank 0 failed (it then sends
  // zeros and ends the job below), so that no rank waits in it.
  host.broadcast(&id, sizeof(id), 0);
  if (!haveId)
    return nullptr;
  ncclComm_t comm;
  if (!ok(ncclCommInitRank(&comm, host.size(), id, host.rank()),
          "ncclCommInitRank", error))
    return nullptr;
  return std::unique_ptr<Nccl>(new Nccl(comm, host.rank(), host.size()));
}

Nccl::~Nccl() {
  if (comm && !aborted)
    ncclCommDestroy(comm);
}

bool Nccl::allGather(const void *shard, void *full, plan::DType dtype,
                     int64_t total, cudaStream_t stream, std::string &error) {
  const NcclType &type = ncclTypeOf(dtype);
  auto *base = static_cast<char *>(full);
  if (!comm)
    return copy(shard, full, size_t(total) * type.bytes, stream, error);
  if (total % size == 0)
    return ok(ncclAllGather(shard, full, total / size, type.nccl, comm, stream),
              "ncclAllGather", error);
  if (!ok(ncclGroupStart(), "ncclGroupStart", error))
    return false;
  for (int r = 0; r < size; ++r) {
    plan::ShardRange range = plan::shardRange(total, r, size);
    if (!ok(ncclBroadcast(r == rank ? shard : nullptr,
                          base + range.begin * type.bytes,
                          range.end - range.begin, type.nccl, r, comm, stream),
            "ncclBroadcast", error)) {
      ncclGroupEnd();
      return false;
    }
  }
  return ok(ncclGroupEnd(), "ncclGroupEnd", error);
}

bool Nccl::allGatherInPlace(void *full, plan::DType dtype, int64_t total,
                            cudaStream_t stream, std::string &error) {
  // Even split: begin = rank * total / size, NCCL's in-place address; else
  // the broadcast rooted here sends from its own receive range.
  const int64_t begin = plan::shardRange(total, rank, size).begin;
  return allGather(static_cast<char *>(full) + begin * ncclTypeOf(dtype).bytes,
                   full, dtype, total, stream, error);
}

bool Nccl::reduceScatterMean(const void *full, void *shard, plan::DType dtype,
                             int64_t total, cudaStream_t stream,
                             std::string &error) {
  const NcclType &type = ncclTypeOf(dtype);
  const auto *base = static_cast<const char *>(full);
  if (!comm) // the mean over one rank
    return copy(full, shard, size_t(total) * type.bytes, stream, error);
  if (total % size == 0)
    return ok(ncclReduceScatter(full, shard, total / size, type.nccl, ncclAvg,
                                comm, stream),
              "ncclReduceScatter", error);
  if (!ok(ncclGroupStart(), "ncclGroupStart", error))
    return false;
  for (int r = 0; r < size; ++r) {
    plan::ShardRange range = plan::shardRange(total, r, size);
    if (!ok(ncclReduce(base + range.begin * type.bytes,
                       r == rank ? shard : nullptr, range.end - range.begin,
                       type.nccl, ncclAvg, r, comm, stream),
            "ncclReduce", error)) {
      ncclGroupEnd();
      return false;
    }
  }
  return ok(ncclGroupEnd(), "ncclGroupEnd", error);
}

bool Nccl::allReduceSum(const float *in, float *out, cudaStream_t stream,
                        std::string &error) {
  if (!comm)
    return copy(in, out, sizeof(float), stream, error);
  return ok(ncclAllReduce(in, out, 1, ncclFloat32, ncclSum, comm, stream),
            "ncclAllReduce", error);
}

bool Nccl::allReduceMean(void *data, plan::DType dtype, int64_t count,
                         cudaStream_t stream, std::string &error) {
  if (!comm) // in place: the mean over one rank is the data
    return true;
  return ok(ncclAllReduce(data, data, size_t(count), ncclTypeOf(dtype).nccl,
                          ncclAvg, comm, stream),
            "ncclAllReduce", error);
}

bool Nccl::allToAllCounts(const int64_t *send, int64_t *recv, int64_t perPeer,
                          cudaStream_t stream, std::string &error) {
  if (perPeer <= 0) {
    if (perPeer < 0)
      error = "an all-to-all of " + std::to_string(perPeer) + " counts";
    return perPeer == 0;
  }
  if (!comm)
    return copy(send, recv, size_t(perPeer) * sizeof(int64_t), stream, error);
  if (!ok(ncclGroupStart(), "ncclGroupStart", error))
    return false;
  for (int r = 0; r < size; ++r)
    if (!ok(ncclSend(send + r * perPeer, size_t(perPeer), ncclInt64, r, comm,
                     stream),
            "ncclSend", error) ||
        !ok(ncclRecv(recv + r * perPeer, size_t(perPeer), ncclInt64, r, comm,
                     stream),
            "ncclRecv", error)) {
      ncclGroupEnd();
      return false;
    }
  return ok(ncclGroupEnd(), "ncclGroupEnd", error);
}

bool Nccl::allToAllV(const void *send, const int64_t *sendRows, void *recv,
                     const int64_t *recvRows, int64_t rowElements,
                     plan::DType dtype, cudaStream_t stream,
                     std::string &error) {
  const NcclType &type = ncclTypeOf(dtype);
  for (int r = 0; r < size; ++r)
    if (sendRows[r] < 0 || recvRows[r] < 0 || rowElements < 0) {
      error = "an all-to-all of " + std::to_string(sendRows[r]) +
              " rows sent to and " + std::to_string(recvRows[r]) +
              " received from rank " + std::to_string(r) + ", rows of " +
              std::to_string(rowElements) + " elements";
      return false;
    }
  const size_t row = size_t(rowElements);
  if (!comm) {
    if (sendRows[0] != recvRows[0]) {
      error = "a one-rank all-to-all sending " + std::to_string(sendRows[0]) +
              " rows to itself and receiving " + std::to_string(recvRows[0]);
      return false;
    }
    return copy(send, recv, size_t(sendRows[0]) * row * type.bytes, stream,
                error);
  }
  const auto *from = static_cast<const char *>(send);
  auto *to = static_cast<char *>(recv);
  if (!ok(ncclGroupStart(), "ncclGroupStart", error))
    return false;
  for (int r = 0; r < size; ++r) {
    const size_t out = size_t(sendRows[r]) * row,
                 in = size_t(recvRows[r]) * row;
    if ((out && !ok(ncclSend(from, out, type.nccl, r, comm, stream), "ncclSend",
                    error)) ||
        (in && !ok(ncclRecv(to, in, type.nccl, r, comm, stream), "ncclRecv",
                   error))) {
      ncclGroupEnd();
      return false;
    }
    from += out * type.bytes;
    to += in * type.bytes;
  }
  return ok(ncclGroupEnd(), "ncclGroupEnd", error);
}

ncclResult_t Nccl::asyncError() {
  ncclResult_t state = ncclSuccess;
  if (!comm)
    return state;
  ncclResult_t result = ncclCommGetAsyncError(comm, &state);
  return result != ncclSuccess ? result : state;
}

void Nccl::abort() {
  if (comm && !aborted)
    ncclCommAbort(comm);
  aborted = true;
}

std::string Nccl::version() {
  int v = 0;
  ncclGetVersion(&v);
  // NCCL >= 2.9 encodes major * 10000 + minor * 100 + patch.
  return std::to_string(v / 10000) + "." + std::to_string(v / 100 % 100) + "." +
         std::to_string(v % 100);
}

} // namespace fsdp::rt::cuda
