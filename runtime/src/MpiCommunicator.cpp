//===- MpiCommunicator.cpp - collectives over MPI -------------------------===//
//
// MPI_Allgatherv and MPI_Reduce_scatter take per-rank counts, which is
// exactly the seed's uneven layout: no padding ever crosses the wire.
// Errors return (MPI_ERRORS_RETURN) and end the job with MPI_Abort, so a
// failing rank takes every rank down instead of leaving them in a
// collective forever.
//
//===----------------------------------------------------------------------===//

#include "fsdp/runtime/Communicator.h"
#include "fsdp/runtime/PlanFormat.h"

#ifdef FSDP_HAVE_MPI
#include <mpi.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <vector>

namespace fsdp::rt {
namespace {
class MpiCommunicator : public Communicator {
public:
  /// `comm` is MPI_COMM_WORLD (owned: finalizes MPI) or a duplicate of it.
  MpiCommunicator(MPI_Comm comm, bool threadMultiple)
      : comm(comm), threadMultiple(threadMultiple) {
    MPI_Comm_rank(comm, &rank_);
    MPI_Comm_size(comm, &size_);
    MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN);
    MPI_Comm node;
    MPI_Comm_split_type(comm, MPI_COMM_TYPE_SHARED, rank_, MPI_INFO_NULL,
                        &node);
    MPI_Comm_rank(node, &localRank_);
    MPI_Comm_size(node, &localSize_);
    MPI_Comm_free(&node);
  }
  ~MpiCommunicator() override {
    if (comm == MPI_COMM_WORLD)
      MPI_Finalize();
    else
      MPI_Comm_free(&comm);
  }

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  std::string description() const override {
    char version[MPI_MAX_LIBRARY_VERSION_STRING];
    int length = 0;
    MPI_Get_library_version(version, &length);
    std::string text(version, length);
    text = text.substr(0, text.find_first_of(",\n"));
    return "MPI (" + text + "), " + std::to_string(size_) + " ranks";
  }

  void allGather(const float *shard, float *full, int64_t total) override {
    layout(total);
    check(MPI_Allgatherv(shard, counts[rank_], MPI_FLOAT, full, counts.data(),
                         displs.data(), MPI_FLOAT, comm),
          "MPI_Allgatherv");
  }

  void reduceScatterMean(float *full, float *shard, int64_t total) override {
    layout(total);
    if (ring && size_ > 1)
      ringReduceScatter(full, shard);
    else
      check(MPI_Reduce_scatter(full, shard, counts.data(), MPI_FLOAT, MPI_SUM,
                               comm),
            "MPI_Reduce_scatter");
    float scale = 1.0f / float(size_);
    for (int i = 0; i < counts[rank_]; ++i)
      shard[i] *= scale;
  }

  double allReduceMean(double value) override {
    double sum = 0.0;
    check(MPI_Allreduce(&value, &sum, 1, MPI_DOUBLE, MPI_SUM, comm),
          "MPI_Allreduce");
    return sum / size_;
  }

  void broadcast(void *data, uint64_t bytes, int root) override {
    check(MPI_Bcast(data, int(bytes), MPI_BYTE, root, comm), "MPI_Bcast");
  }

  int localRank() const override { return localRank_; }
  int localSize() const override { return localSize_; }

  std::unique_ptr<Communicator> duplicate(std::string &why) override {
    if (!threadMultiple) {
      why = "this MPI library gives no MPI_THREAD_MULTIPLE";
      return nullptr;
    }
    MPI_Comm copy;
    check(MPI_Comm_dup(comm, &copy), "MPI_Comm_dup");
    return std::make_unique<MpiCommunicator>(copy, true);
  }

  uint64_t allReduceMax(uint64_t value) override {
    uint64_t max = 0;
    check(MPI_Allreduce(&value, &max, 1, MPI_UINT64_T, MPI_MAX, comm),
          "MPI_Allreduce");
    return max;
  }

  [[noreturn]] void abort(int code) override {
    MPI_Abort(MPI_COMM_WORLD, code);
    std::_Exit(code);
  }

private:
  /// Reduce-scatter as a ring: chunk c (rank c's range) starts at rank
  /// c + 1 and travels once around, each rank adding its contribution, so
  /// it ends complete at rank c. N - 1 steps of one MPI_Sendrecv of one
  /// chunk each: every rank sends and receives (N-1)/N of the tensor, the
  /// bus-bandwidth optimum, and the sum's order is fixed (c+1, c+2, ..., c).
  /// Open MPI's own MPI_Reduce_scatter is 5-10x slower than its all-gather
  /// on one node (docs/collectives.md).
  ///
  /// It allocates nothing: a partial sum travels in `full` itself (each
  /// rank adds the chunk it receives into its own copy of that chunk, and
  /// sends it on from there), and `shard`, whose final value is only
  /// written at the last step, receives each incoming chunk (no chunk is
  /// larger than the largest shard, which is `shard`'s size). The sums are
  /// the same floating-point additions as with separate staging buffers.
  void ringReduceScatter(float *full, float *shard) {
    int next = (rank_ + 1) % size_, prev = (rank_ + size_ - 1) % size_;
    auto chunk = [&](int c) { return ((c % size_) + size_) % size_; };
    for (int step = 0; step + 1 < size_; ++step) {
      int out = chunk(rank_ - 1 - step), in = chunk(rank_ - 2 - step);
      check(MPI_Sendrecv(full + displs[out], counts[out], MPI_FLOAT, next,
                         /*tag=*/step, shard, counts[in], MPI_FLOAT, prev,
                         /*tag=*/step, comm, MPI_STATUS_IGNORE),
            "MPI_Sendrecv (ring reduce-scatter)");
      float *own = full + displs[in];
      float *sum = step + 2 == size_ ? shard : own;
      for (int i = 0; i < counts[in]; ++i)
        sum[i] = shard[i] + own[i];
    }
  }

  void layout(int64_t total) {
    counts.resize(size_);
    displs.resize(size_);
    for (int r = 0; r < size_; ++r) {
      plan::ShardRange range = plan::shardRange(total, r, size_);
      if (range.end - range.begin > INT32_MAX) {
        std::fprintf(stderr,
                     "fsdp-run: rank %d: error: a shard of %lld elements "
                     "exceeds MPI's int counts\n",
                     rank_, (long long)(range.end - range.begin));
        abort(1);
      }
      counts[r] = int(range.end - range.begin);
      displs[r] = int(range.begin);
    }
  }

  void check(int code, const char *what) {
    if (code == MPI_SUCCESS)
      return;
    char text[MPI_MAX_ERROR_STRING];
    int length = 0;
    MPI_Error_string(code, text, &length);
    std::fprintf(stderr, "fsdp-run: rank %d: error: %s failed: %.*s\n", rank_,
                 what, length, text);
    abort(1);
  }

  MPI_Comm comm;
  bool threadMultiple;
  /// Our ring reduce-scatter, or MPI's (FSDP_REDUCE_SCATTER=mpi).
  bool ring = !std::getenv("FSDP_REDUCE_SCATTER") ||
              std::string(std::getenv("FSDP_REDUCE_SCATTER")) != "mpi";
  int rank_ = 0, size_ = 1, localRank_ = 0, localSize_ = 1;
  std::vector<int> counts, displs;
};
} // namespace

std::unique_ptr<Communicator> createMpiCommunicator(int *argc, char ***argv) {
  // Collectives run on a thread per stream, each stream on its own
  // duplicate of MPI_COMM_WORLD, concurrently with each other and with the
  // main thread's scalar reductions: that needs MPI_THREAD_MULTIPLE. With
  // less, started collectives run synchronously (see duplicate()).
  // A stream thread that busy-polls inside a collective takes a core from
  // the compute it should overlap; Open MPI yields instead when asked (the
  // environment still decides where it says otherwise).
  setenv("OMPI_MCA_mpi_yield_when_idle", "1", /*overwrite=*/0);
  int provided = 0;
  MPI_Init_thread(argc, argv, MPI_THREAD_MULTIPLE, &provided);
  return std::make_unique<MpiCommunicator>(MPI_COMM_WORLD,
                                           provided >= MPI_THREAD_MULTIPLE);
}

bool haveMpi() { return true; }

} // namespace fsdp::rt
#else
namespace fsdp::rt {
std::unique_ptr<Communicator> createMpiCommunicator(int *, char ***) {
  return nullptr;
}
bool haveMpi() { return false; }
} // namespace fsdp::rt
#endif
