//===- emu_nccl.cpp - the emulated NCCL: collectives over MPI -------------===//
//
// NCCL's collectives as the CUDA backend calls them, run on the emulated
// streams (each call is one operation of its stream's queue, so a
// collective waits for what its stream waited for, and a peer that never
// comes blocks the stream, not the host) and moved between ranks by MPI on
// a communicator of their own: one MPI_Comm_split of MPI_COMM_WORLD per
// ncclCommInitRank, keyed by the rank that made the unique id. That makes
// ncclCommInitRank collective over the whole job, which the backend's
// set-up is (every rank creates the same communicators in the same order);
// a rank that does not is told so. Streams run their collectives
// concurrently, so MPI must give MPI_THREAD_MULTIPLE.
//
// Before moving data, every collective checks that its ranks agree on it
// (the call, count, type, operation and root): NCCL itself hangs or
// corrupts memory on a mismatch, the emulator names it and faults the
// device.
//
// Reductions follow NCCL's ring: the chunk that ends at rank r is summed
// starting from rank r+1 around the ring to r, each hop rounded to the
// element type (bf16 rounds at every hop, as NCCL's bf16 reduction does);
// ncclAvg multiplies each contribution by 1/N first (NCCL's pre-multiplied
// sum for floating types). A GPU's NCCL may pick a tree or another ring
// order by topology, so the emulator's order is one NCCL may use, not the
// one it will (docs/cuda.md states the tolerance this leaves).
//
// Send and receive: outside a group each is one blocking exchange; inside
// a group, a stream's point-to-point calls on one communicator run as one
// operation that posts them all and waits for all (NCCL's fused group,
// which is what lets an all-to-all of sends and receives not deadlock).
//
// Not emulated (the backend does not call them): ncclCommSplit,
// user-defined reductions, non-blocking communicators.
//
//===----------------------------------------------------------------------===//
#include "emu_streams.h"
#include "nccl.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <climits>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#if FSDP_EMU_HAVE_MPI
#include <mpi.h>
#endif

struct ncclComm {
  int rank = 0, size = 1;
#if FSDP_EMU_HAVE_MPI
  MPI_Comm mpi = MPI_COMM_NULL; ///< null for a communicator of one rank
#endif
  std::atomic<int> asyncError{ncclSuccess};
  std::mutex streamsMu;
  std::set<cudaStream_t> streams; ///< where its collectives were enqueued
};

namespace {
std::mutex gLastErrorMu;
std::string gLastError;

ncclResult_t failWith(ncclResult_t result, const std::string &why) {
  std::lock_guard<std::mutex> lock(gLastErrorMu);
  gLastError = why;
  return result;
}

size_t typeBytes(ncclDataType_t t) {
  switch (t) {
  case ncclInt8:
  case ncclUint8:
    return 1;
  case ncclFloat16:
  case ncclBfloat16:
    return 2;
  case ncclInt64:
  case ncclUint64:
  case ncclFloat64:
    return 8;
  default:
    return 4;
  }
}

const char *typeName(ncclDataType_t t) {
  switch (t) {
  case ncclFloat32:
    return "float32";
  case ncclBfloat16:
    return "bfloat16";
  case ncclInt32:
    return "int32";
  default:
    return "another type";
  }
}

// ---------------------------------------------------------------- math
float load(const void *p, size_t i, ncclDataType_t t) {
  return emu::loadElement(p, int64_t(i), t == ncclBfloat16);
}
void store(void *p, size_t i, ncclDataType_t t, float v) {
  emu::storeElement(p, int64_t(i), t == ncclBfloat16, v);
}
/// v rounded to the element type.
float rounded(float v, ncclDataType_t t) {
  return t == ncclBfloat16 ? __bfloat162float(__float2bfloat16_rn(v)) : v;
}
float apply(ncclRedOp_t op, float a, float b) {
  switch (op) {
  case ncclProd:
    return a * b;
  case ncclMax:
    return a > b ? a : b;
  case ncclMin:
    return a < b ? a : b;
  default:
    return a + b;
  }
}

/// out[i] (count elements) = the reduction of contributions[j] (rank j's
/// chunk, in `parts` laid out count apart) around the ring ending at `end`.
void ringReduce(void *out, const char *parts, size_t count, ncclDataType_t t,
                ncclRedOp_t op, int size, int end) {
  const size_t stride = count * typeBytes(t);
  const float pre = op == ncclAvg ? 1.0f / float(size) : 1.0f;
  auto contribution = [&](int rank, size_t i) {
    float v = load(parts + size_t(rank) * stride, i, t);
    return op == ncclAvg ? rounded(v * pre, t) : v;
  };
  for (size_t i = 0; i < count; ++i) {
    float acc = contribution((end + 1) % size, i);
    for (int hop = 2; hop <= size; ++hop)
      acc = rounded(apply(op, acc, contribution((end + hop) % size, i)), t);
    store(out, i, t, acc);
  }
}

bool reducible(ncclDataType_t t) {
  return t == ncclFloat32 || t == ncclBfloat16;
}

// ---------------------------------------------------------------- groups
/// A collective waiting for its group's end.
struct Pending {
  cudaStream_t stream;
  std::string what;
  std::vector<emu::Access> accesses;
  std::function<void()> work;
};
thread_local int tGroupDepth = 0;
thread_local std::vector<Pending> tGroup;

/// One send or receive of a group, until its group's end.
struct PointToPoint {
  ncclComm_t comm;
  cudaStream_t stream;
  bool send;
  void *buffer;
  size_t bytes;
  int peer;
};
thread_local std::vector<PointToPoint> tPointToPoint;

/// Exchanges `ops` (one communicator's, on one stream): every send and
/// receive posted, then all waited for.
void exchange(const std::vector<PointToPoint> &ops) {
#if FSDP_EMU_HAVE_MPI
  std::vector<MPI_Request> requests;
  for (const PointToPoint &op : ops) {
    if (op.peer == op.comm->rank)
      continue; // to itself: matched below
    requests.emplace_back();
    if (op.send)
      MPI_Isend(op.buffer, int(op.bytes), MPI_BYTE, op.peer, 0, op.comm->mpi,
                &requests.back());
    else
      MPI_Irecv(op.buffer, int(op.bytes), MPI_BYTE, op.peer, 0, op.comm->mpi,
                &requests.back());
  }
  if (!requests.empty())
    MPI_Waitall(int(requests.size()), requests.data(), MPI_STATUSES_IGNORE);
#endif
  // A rank's sends to itself land in its receives from itself, in order.
  std::vector<const PointToPoint *> selfSends, selfRecvs;
  for (const PointToPoint &op : ops)
    if (op.peer == op.comm->rank)
      (op.send ? selfSends : selfRecvs).push_back(&op);
  for (size_t i = 0; i < selfSends.size() && i < selfRecvs.size(); ++i)
    std::memmove(selfRecvs[i]->buffer, selfSends[i]->buffer,
                 std::min(selfSends[i]->bytes, selfRecvs[i]->bytes));
}

/// The group's sends and receives as one operation per (communicator,
/// stream), ahead of its collectives.
void flushPointToPoint(std::vector<Pending> &group) {
  std::vector<PointToPoint> ops = std::move(tPointToPoint);
  tPointToPoint.clear();
  std::vector<Pending> merged;
  while (!ops.empty()) {
    std::vector<PointToPoint> batch;
    std::vector<emu::Access> accesses;
    const ncclComm_t comm = ops.front().comm;
    const cudaStream_t stream = ops.front().stream;
    for (auto it = ops.begin(); it != ops.end();)
      if (it->comm == comm && it->stream == stream) {
        accesses.push_back({it->buffer, it->bytes, !it->send});
        batch.push_back(*it);
        it = ops.erase(it);
      } else {
        ++it;
      }
    merged.push_back({stream, "ncclSend/ncclRecv group", std::move(accesses),
                      [batch] { exchange(batch); }});
  }
  group.insert(group.begin(), merged.begin(), merged.end());
}

ncclResult_t submit(ncclComm_t comm, cudaStream_t stream, std::string what,
                    std::vector<emu::Access> accesses,
                    std::function<void()> work) {
  {
    std::lock_guard<std::mutex> lock(comm->streamsMu);
    comm->streams.insert(stream);
  }
  if (tGroupDepth > 0) {
    tGroup.push_back(
        {stream, std::move(what), std::move(accesses), std::move(work)});
    return ncclSuccess;
  }
  cudaError_t queued = emu::enqueue(stream, what, accesses, std::move(work));
  return queued == cudaSuccess
             ? ncclSuccess
             : failWith(ncclUnhandledCudaError,
                        what + ": " + cudaGetErrorString(queued));
}

// ---------------------------------------------------------------- moving
/// What every rank must pass alike to one collective.
struct Call {
  int32_t kind, type, op, root;
  int64_t count;
};

/// Fault injection for the watchdog's tests: FSDP_CUDA_EMULATOR_STALL=
/// RANK:N:SECONDS makes the job's rank RANK (MPI_COMM_WORLD) stall for
/// SECONDS inside its N-th collective (counted from 1 over every
/// communicator), as a GPU whose peer link hangs would.
void maybeStall() {
  static std::atomic<int> count{0};
  static const char *spec = std::getenv("FSDP_CUDA_EMULATOR_STALL");
  int rank = -1, nth = 0;
  double seconds = 0;
  if (!spec || std::sscanf(spec, "%d:%d:%lf", &rank, &nth, &seconds) != 3)
    return;
  int world = 0;
#if FSDP_EMU_HAVE_MPI
  MPI_Comm_rank(MPI_COMM_WORLD, &world);
#endif
  if (world == rank && ++count == nth) {
    std::fprintf(stderr,
                 "[cuda-emu] rank %d stalls %g s inside collective "
                 "%d (FSDP_CUDA_EMULATOR_STALL)\n",
                 rank, seconds, nth);
    std::this_thread::sleep_for(std::chrono::duration<double>(seconds));
  }
}

/// The collective's ranks agree on `call`, or the device faults naming the
/// difference; false then (every rank sees it and moves nothing).
bool agree(ncclComm_t comm, const char *name, const Call &call) {
  maybeStall();
#if FSDP_EMU_HAVE_MPI
  if (comm->size == 1)
    return true;
  std::vector<Call> all(size_t(comm->size));
  MPI_Allgather(&call, int(sizeof(Call)), MPI_BYTE, all.data(),
                int(sizeof(Call)), MPI_BYTE, comm->mpi);
  for (int r = 0; r < comm->size; ++r) {
    const Call &other = all[size_t(r)];
    if (std::memcmp(&other, &call, sizeof(Call)) == 0)
      continue;
    std::string why = std::string(name) + " on a communicator of " +
                      std::to_string(comm->size) + " ranks: rank " +
                      std::to_string(comm->rank) + " passes count " +
                      std::to_string(call.count) + " of " +
                      typeName(ncclDataType_t(call.type)) + " (root " +
                      std::to_string(call.root) + "), its rank " +
                      std::to_string(r) + " count " +
                      std::to_string(other.count) + " of " +
                      typeName(ncclDataType_t(other.type)) + " (root " +
                      std::to_string(other.root) +
                      "): ranks disagree on a collective (on a GPU, a hang "
                      "or corrupt data)";
    if (other.kind != call.kind)
      why = std::string(name) + ": rank " + std::to_string(r) +
            " of the communicator runs another collective at this point: "
            "ranks disagree on the order of collectives";
    comm->asyncError.store(ncclInvalidUsage);
    emu::fault(cudaErrorLaunchFailure, why);
    return false;
  }
#endif
  return true;
}

bool fitsInt(size_t bytes) { return bytes <= size_t(INT_MAX); }

void allGatherBytes(ncclComm_t comm, const void *send, void *recv,
                    size_t bytes) {
  char *slot = static_cast<char *>(recv) + size_t(comm->rank) * bytes;
#if FSDP_EMU_HAVE_MPI
  if (comm->size > 1) {
    MPI_Allgather(send == slot ? MPI_IN_PLACE : send, int(bytes), MPI_BYTE,
                  recv, int(bytes), MPI_BYTE, comm->mpi);
    return;
  }
#endif
  if (send != slot)
    std::memmove(slot, send, bytes);
}

} // namespace

// ---------------------------------------------------------------- set-up
ncclResult_t ncclGetVersion(int *version) {
  *version = 0; // no NCCL is involved; a version would claim one
  return ncclSuccess;
}

ncclResult_t ncclGetUniqueId(ncclUniqueId *id) {
  static std::atomic<int> counter{0};
  std::memset(id, 0, sizeof(*id));
  int world = 0;
#if FSDP_EMU_HAVE_MPI
  int initialized = 0;
  MPI_Initialized(&initialized);
  if (initialized)
    MPI_Comm_rank(MPI_COMM_WORLD, &world);
#endif
  const int count = ++counter;
  std::snprintf(id->internal, sizeof(id->internal), "fsdp-emu-nccl %d %d",
                world, count);
  return ncclSuccess;
}

ncclResult_t ncclCommInitRank(ncclComm_t *out, int nranks, ncclUniqueId id,
                              int rank) {
  *out = nullptr;
  int creator = -1, serial = 0;
  if (std::sscanf(id.internal, "fsdp-emu-nccl %d %d", &creator, &serial) != 2)
    return failWith(ncclInvalidArgument,
                    "ncclCommInitRank: not an emulated NCCL unique id");
  if (nranks < 1 || rank < 0 || rank >= nranks)
    return failWith(ncclInvalidArgument, "ncclCommInitRank: rank " +
                                             std::to_string(rank) + " of " +
                                             std::to_string(nranks));
  auto comm = new ncclComm;
  comm->rank = rank;
  comm->size = nranks;
#if FSDP_EMU_HAVE_MPI
  int initialized = 0, worldSize = 1;
  MPI_Initialized(&initialized);
  if (initialized)
    MPI_Comm_size(MPI_COMM_WORLD, &worldSize);
  if (worldSize > 1) {
    int provided = 0;
    MPI_Query_thread(&provided);
    if (provided < MPI_THREAD_MULTIPLE) {
      delete comm;
      return failWith(ncclSystemError,
                      "the emulated NCCL runs collectives on stream threads "
                      "and needs MPI_THREAD_MULTIPLE, which this MPI does "
                      "not give");
    }
    MPI_Comm_split(MPI_COMM_WORLD, creator, rank, &comm->mpi);
    int size = 0, mine = -1;
    MPI_Comm_size(comm->mpi, &size);
    MPI_Comm_rank(comm->mpi, &mine);
    if (size != nranks || mine != rank) {
      MPI_Comm_free(&comm->mpi);
      delete comm;
      return failWith(
          ncclInvalidUsage,
          "ncclCommInitRank: " + std::to_string(size) +
              " ranks joined the id of rank " + std::to_string(creator) +
              ", the call says " + std::to_string(nranks) +
              " (the emulator's ncclCommInitRank is collective over the "
              "whole job: every rank creates its communicators in one "
              "order)");
    }
    *out = comm;
    return ncclSuccess;
  }
#endif
  if (nranks != 1) {
    delete comm;
    return failWith(ncclInvalidUsage,
                    "ncclCommInitRank: " + std::to_string(nranks) +
                        " ranks, but this process has no MPI peers");
  }
  *out = comm;
  return ncclSuccess;
}

ncclResult_t ncclCommDestroy(ncclComm_t comm) {
  if (!comm)
    return ncclInvalidArgument;
  // As NCCL does: the communicator's operations finish first.
  for (cudaStream_t s : comm->streams)
    emu::drain(s);
#if FSDP_EMU_HAVE_MPI
  if (comm->mpi != MPI_COMM_NULL)
    MPI_Comm_free(&comm->mpi);
#endif
  delete comm;
  return ncclSuccess;
}

ncclResult_t ncclCommAbort(ncclComm_t comm) {
  // A collective may still block in MPI on a stream: the communicator is
  // left to the job's end (MPI_Abort), not freed under it.
  if (comm)
    comm->asyncError.store(ncclRemoteError);
  return ncclSuccess;
}

ncclResult_t ncclCommGetAsyncError(ncclComm_t comm, ncclResult_t *state) {
  *state = ncclResult_t(comm->asyncError.load());
  return ncclSuccess;
}

const char *ncclGetErrorString(ncclResult_t result) {
  switch (result) {
  case ncclSuccess:
    return "no error";
  case ncclUnhandledCudaError:
    return "unhandled cuda error (run with NCCL_DEBUG=INFO for details)";
  case ncclSystemError:
    return "unhandled system error";
  case ncclInternalError:
    return "internal error";
  case ncclInvalidArgument:
    return "invalid argument";
  case ncclInvalidUsage:
    return "invalid usage";
  case ncclRemoteError:
    return "remote process exited or there was a network error";
  case ncclInProgress:
    return "NCCL operation in progress";
  }
  return "unknown result code";
}

const char *ncclGetLastError(ncclComm_t) {
  static thread_local std::string copy;
  std::lock_guard<std::mutex> lock(gLastErrorMu);
  copy = gLastError;
  return copy.c_str();
}

ncclResult_t ncclGroupStart() {
  ++tGroupDepth;
  return ncclSuccess;
}

ncclResult_t ncclGroupEnd() {
  if (tGroupDepth == 0)
    return failWith(ncclInvalidUsage, "ncclGroupEnd without ncclGroupStart");
  if (--tGroupDepth > 0)
    return ncclSuccess;
  // The group's collectives, in the order they were called: every rank
  // calls them in the same order, so MPI pairs them.
  std::vector<Pending> group = std::move(tGroup);
  tGroup.clear();
  flushPointToPoint(group);
  for (Pending &p : group) {
    cudaError_t queued =
        emu::enqueue(p.stream, p.what, p.accesses, std::move(p.work));
    if (queued != cudaSuccess)
      return failWith(ncclUnhandledCudaError,
                      p.what + ": " + cudaGetErrorString(queued));
  }
  return ncclSuccess;
}

// ---------------------------------------------------------------- collectives
namespace {
enum Kind { kAllGather = 1, kReduceScatter, kAllReduce, kBroadcast, kReduce };

ncclResult_t checkArgs(const char *name, ncclComm_t comm, ncclDataType_t t,
                       size_t bytes, int root, bool reduces) {
  if (!comm)
    return failWith(ncclInvalidArgument,
                    std::string(name) + ": no communicator");
  if (root < 0 || root >= comm->size)
    return failWith(ncclInvalidArgument,
                    std::string(name) + ": root " + std::to_string(root));
  if (reduces && !reducible(t))
    return failWith(ncclInvalidArgument,
                    std::string(name) + ": the emulator reduces float32 and "
                                        "bfloat16 only");
  if (!fitsInt(bytes))
    return failWith(ncclInvalidArgument,
                    std::string(name) + ": over 2 GiB per rank (an emulator "
                                        "limit)");
  return ncclSuccess;
}
} // namespace

ncclResult_t ncclAllGather(const void *send, void *recv, size_t count,
                           ncclDataType_t t, ncclComm_t comm,
                           cudaStream_t stream) {
  const size_t bytes = count * typeBytes(t);
  if (ncclResult_t r = checkArgs("ncclAllGather", comm, t, bytes, 0, false))
    return r;
  const Call call{kAllGather, int32_t(t), 0, 0, int64_t(count)};
  return submit(comm, stream, "ncclAllGather",
                {{send, bytes, false}, {recv, bytes * comm->size, true}}, [=] {
                  if (agree(comm, "ncclAllGather", call))
                    allGatherBytes(comm, send, recv, bytes);
                });
}

ncclResult_t ncclReduceScatter(const void *send, void *recv, size_t count,
                               ncclDataType_t t, ncclRedOp_t op,
                               ncclComm_t comm, cudaStream_t stream) {
  const size_t bytes = count * typeBytes(t);
  if (ncclResult_t r = checkArgs("ncclReduceScatter", comm, t, bytes, 0, true))
    return r;
  const Call call{kReduceScatter, int32_t(t), int32_t(op), 0, int64_t(count)};
  return submit(comm, stream, "ncclReduceScatter",
                {{send, bytes * comm->size, false}, {recv, bytes, true}}, [=] {
                  if (!agree(comm, "ncclReduceScatter", call))
                    return;
                  // Every rank's chunk for this rank, then the ring's sum over
                  // them.
                  std::vector<char> parts(bytes * comm->size);
#if FSDP_EMU_HAVE_MPI
                  if (comm->size > 1)
                    MPI_Alltoall(send, int(bytes), MPI_BYTE, parts.data(),
                                 int(bytes), MPI_BYTE, comm->mpi);
                  else
#endif
                    std::memcpy(parts.data(), send, bytes);
                  ringReduce(recv, parts.data(), count, t, op, comm->size,
                             comm->rank);
                });
}

ncclResult_t ncclAllReduce(const void *send, void *recv, size_t count,
                           ncclDataType_t t, ncclRedOp_t op, ncclComm_t comm,
                           cudaStream_t stream) {
  const size_t bytes = count * typeBytes(t);
  if (ncclResult_t r = checkArgs("ncclAllReduce", comm, t, bytes, 0, true))
    return r;
  const Call call{kAllReduce, int32_t(t), int32_t(op), 0, int64_t(count)};
  return submit(comm, stream, "ncclAllReduce",
                {{send, bytes, false}, {recv, bytes, true}}, [=] {
                  if (!agree(comm, "ncclAllReduce", call))
                    return;
                  // A ring all-reduce: chunk k (of size-way split) is summed
                  // around the ring ending at rank k, then gathered; every rank
                  // computes the same from everyone's contribution.
                  const size_t es = typeBytes(t), n = size_t(comm->size);
                  std::vector<char> all(bytes * n);
                  allGatherBytes(comm, send, all.data(), bytes); // rank order
                  for (size_t k = 0; k < n; ++k) {
                    size_t begin = count * k / n, end = count * (k + 1) / n;
                    if (begin == end)
                      continue;
                    std::vector<char> parts((end - begin) * es * n);
                    for (size_t r = 0; r < n; ++r)
                      std::memcpy(parts.data() + r * (end - begin) * es,
                                  all.data() + r * bytes + begin * es,
                                  (end - begin) * es);
                    ringReduce(static_cast<char *>(recv) + begin * es,
                               parts.data(), end - begin, t, op, comm->size,
                               int(k));
                  }
                });
}

ncclResult_t ncclBroadcast(const void *send, void *recv, size_t count,
                           ncclDataType_t t, int root, ncclComm_t comm,
                           cudaStream_t stream) {
  const size_t bytes = count * typeBytes(t);
  if (ncclResult_t r = checkArgs("ncclBroadcast", comm, t, bytes, root, false))
    return r;
  const Call call{kBroadcast, int32_t(t), 0, root, int64_t(count)};
  std::vector<emu::Access> accesses{{recv, bytes, true}};
  if (comm->rank == root)
    accesses.insert(accesses.begin(), {send, bytes, false});
  return submit(comm, stream, "ncclBroadcast", accesses, [=] {
    if (!agree(comm, "ncclBroadcast", call))
      return;
    if (comm->rank == root && send != recv)
      std::memmove(recv, send, bytes);
#if FSDP_EMU_HAVE_MPI
    if (comm->size > 1)
      MPI_Bcast(recv, int(bytes), MPI_BYTE, root, comm->mpi);
#endif
  });
}

ncclResult_t ncclReduce(const void *send, void *recv, size_t count,
                        ncclDataType_t t, ncclRedOp_t op, int root,
                        ncclComm_t comm, cudaStream_t stream) {
  const size_t bytes = count * typeBytes(t);
  if (ncclResult_t r = checkArgs("ncclReduce", comm, t, bytes, root, true))
    return r;
  const Call call{kReduce, int32_t(t), int32_t(op), root, int64_t(count)};
  std::vector<emu::Access> accesses{{send, bytes, false}};
  if (comm->rank == root)
    accesses.push_back({recv, bytes, true});
  return submit(comm, stream, "ncclReduce", accesses, [=] {
    if (!agree(comm, "ncclReduce", call))
      return;
    std::vector<char> parts(comm->rank == root ? bytes * comm->size : 0);
#if FSDP_EMU_HAVE_MPI
    if (comm->size > 1)
      MPI_Gather(send, int(bytes), MPI_BYTE, parts.data(), int(bytes), MPI_BYTE,
                 root, comm->mpi);
    else
#endif
      std::memcpy(parts.data(), send, bytes);
    if (comm->rank == root)
      ringReduce(recv, parts.data(), count, t, op, comm->size, root);
  });
}

namespace {
ncclResult_t pointToPoint(const char *name, bool send, void *buffer,
                          size_t count, ncclDataType_t t, int peer,
                          ncclComm_t comm, cudaStream_t stream) {
  const size_t bytes = count * typeBytes(t);
  if (ncclResult_t r = checkArgs(name, comm, t, bytes, 0, false))
    return r;
  if (peer < 0 || peer >= comm->size)
    return failWith(ncclInvalidArgument,
                    std::string(name) + ": peer " + std::to_string(peer));
  {
    std::lock_guard<std::mutex> lock(comm->streamsMu);
    comm->streams.insert(stream);
  }
  const PointToPoint op{comm, stream, send, buffer, bytes, peer};
  if (tGroupDepth > 0) {
    tPointToPoint.push_back(op);
    return ncclSuccess;
  }
  cudaError_t queued = emu::enqueue(stream, name, {{buffer, bytes, !send}},
                                    [op] { exchange({op}); });
  return queued == cudaSuccess
             ? ncclSuccess
             : failWith(ncclUnhandledCudaError,
                        std::string(name) + ": " + cudaGetErrorString(queued));
}
} // namespace

ncclResult_t ncclSend(const void *send, size_t count, ncclDataType_t t,
                      int peer, ncclComm_t comm, cudaStream_t stream) {
  return pointToPoint("ncclSend", true, const_cast<void *>(send), count, t,
                      peer, comm, stream);
}

ncclResult_t ncclRecv(void *recv, size_t count, ncclDataType_t t, int peer,
                      ncclComm_t comm, cudaStream_t stream) {
  return pointToPoint("ncclRecv", false, recv, count, t, peer, comm, stream);
}
