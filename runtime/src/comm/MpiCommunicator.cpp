//===- MpiCommunicator.cpp - collectives over MPI -------------------------===//
//
// MPI_Allgatherv and MPI_Reduce_scatter take per-rank counts, which is
// exactly the seed's uneven layout: no padding ever crosses the wire.
// Elements are f32 (MPI_FLOAT) or bf16 (MPI_UINT16_T: 2 bytes on the wire,
// added by our code, never by MPI's built-in operations); the all-to-all
// also moves i32 (MPI_INT32_T), in rows of one contiguous datatype each.
// Errors return (MPI_ERRORS_RETURN) and end the job with MPI_Abort, so a
// failing rank takes every rank down instead of leaving them in a
// collective forever.
//
//===----------------------------------------------------------------------===//

#include "fsdp/runtime/PlanFormat.h"
#include "fsdp/runtime/comm/Communicator.h"
#include "fsdp/runtime/support/OutputFile.h"

#include "comm/CollectiveMath.h"

#ifdef FSDP_HAVE_MPI
#include <mpi.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

namespace fsdp::rt {
namespace {
/// How the reduce-scatter adds and scales chunks of an element type. f32:
/// float arithmetic. bf16: as a GPU's bf16 reduction (NCCL's) does it, each
/// operation on the two values widened to float, rounded back to nearest
/// even, so every hop of the ring rounds (CollectiveMath.h).
struct F32Elements {
  using T = float;
  static constexpr plan::DType kType = plan::DType::F32;
  static void add(float *sum, const float *a, const float *b, int n) {
    for (int i = 0; i < n; ++i)
      sum[i] = a[i] + b[i];
  }
  static void scale(float *x, float s, int n) {
    for (int i = 0; i < n; ++i)
      x[i] *= s;
  }
};
struct BF16Elements {
  using T = uint16_t;
  static constexpr plan::DType kType = plan::DType::BF16;
  static void add(uint16_t *sum, const uint16_t *a, const uint16_t *b, int n) {
    addBF16(sum, a, b, n);
  }
  static void scale(uint16_t *x, float s, int n) { scaleBF16(x, s, n); }
};

/// MPI_Reduce_scatter's sum of bf16 elements (FSDP_REDUCE_SCATTER=mpi):
/// MPI has no bf16 type, and MPI_SUM on MPI_UINT16_T would add the bits.
void bf16Sum(void *in, void *inout, int *length, MPI_Datatype *) {
  auto *b = static_cast<uint16_t *>(inout);
  addBF16(b, static_cast<const uint16_t *>(in), b, *length);
}

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
    if (bf16SumOp != MPI_OP_NULL)
      MPI_Op_free(&bf16SumOp);
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

  void allGather(void *full, int64_t total, plan::DType type) override {
    layout(total);
    check(MPI_Allgatherv(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, full,
                         counts.data(), displs.data(), mpiType(type), comm),
          "MPI_Allgatherv");
  }

  void reduceScatterMean(void *full, void *shard, int64_t total,
                         plan::DType type) override {
    layout(total);
    if (type == plan::DType::BF16)
      reduceScatterMeanOf<BF16Elements>(static_cast<uint16_t *>(full),
                                        static_cast<uint16_t *>(shard));
    else
      reduceScatterMeanOf<F32Elements>(static_cast<float *>(full),
                                       static_cast<float *>(shard));
  }

  void allReduceMeanInPlace(void *data, int64_t count,
                            plan::DType type) override {
    if (count > INT32_MAX) {
      std::fprintf(stderr,
                   "fsdp-run: rank %d: error: an all-reduce of %lld elements "
                   "exceeds MPI's int counts\n",
                   rank_, (long long)count);
      abort(1);
    }
    // Open MPI's all-reduce algorithms (reduce and broadcast, recursive
    // doubling of a commutative sum, ring) leave every rank the same bits;
    // bf16 adds with our rounding operation, as the MPI reduce-scatter.
    if (type == plan::DType::BF16) {
      check(MPI_Allreduce(MPI_IN_PLACE, data, int(count), MPI_UINT16_T,
                          sumOp<BF16Elements>(), comm),
            "MPI_Allreduce");
      BF16Elements::scale(static_cast<uint16_t *>(data), 1.0f / float(size_),
                          int(count));
      return;
    }
    check(
        MPI_Allreduce(MPI_IN_PLACE, data, int(count), MPI_FLOAT, MPI_SUM, comm),
        "MPI_Allreduce");
    F32Elements::scale(static_cast<float *>(data), 1.0f / float(size_),
                       int(count));
  }

  double allReduceMean(double value) override {
    double sum = 0.0;
    check(MPI_Allreduce(&value, &sum, 1, MPI_DOUBLE, MPI_SUM, comm),
          "MPI_Allreduce");
    return sum / size_;
  }

  double allReduceSum(double value) override {
    double sum = 0.0;
    check(MPI_Allreduce(&value, &sum, 1, MPI_DOUBLE, MPI_SUM, comm),
          "MPI_Allreduce");
    return sum;
  }

  void broadcast(void *data, uint64_t bytes, int root) override {
    check(MPI_Bcast(data, int(bytes), MPI_BYTE, root, comm), "MPI_Bcast");
  }

  /// An all-to-all's `n` (what `what` names) as MPI's int, or the job
  /// stops with the reason: MPI 3.1 here has no large-count calls.
  void requireIntCount(int64_t n, const char *what) {
    if (n >= 0 && n <= INT32_MAX)
      return;
    std::fprintf(stderr,
                 "fsdp-run: rank %d: error: an all-to-all of %lld %s "
                 "exceeds MPI's int counts\n",
                 rank_, (long long)n, what);
    abort(1);
  }

  void allToAllCounts(const int64_t *send, int64_t *recv,
                      int64_t perPeer) override {
    requireIntCount(perPeer, "counts per rank");
    check(MPI_Alltoall(send, int(perPeer), MPI_INT64_T, recv, int(perPeer),
                       MPI_INT64_T, comm),
          "MPI_Alltoall");
  }

  /// MPI_Alltoallv of rows: one row is one MPI datatype (a contiguous run
  /// of its elements), so the counts and displacements, which MPI takes
  /// as int, count rows, and only the rows sent or received in all must
  /// fit an int (MPI 3.1 here: no MPI_Alltoallv_c).
  void allToAllV(const void *send, const int64_t *sendRows, void *recv,
                 const int64_t *recvRows, int64_t rowElements,
                 plan::DType type) override {
    requireIntCount(rowElements, "elements per row");
    rowLayout(sendRows, "sends", sendCounts, sendDispls);
    rowLayout(recvRows, "receives", recvCounts, recvDispls);
    MPI_Datatype row;
    check(MPI_Type_contiguous(int(rowElements), mpiType(type), &row),
          "MPI_Type_contiguous");
    check(MPI_Type_commit(&row), "MPI_Type_commit");
    int code =
        MPI_Alltoallv(send, sendCounts.data(), sendDispls.data(), row, recv,
                      recvCounts.data(), recvDispls.data(), row, comm);
    MPI_Type_free(&row);
    check(code, "MPI_Alltoallv");
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
    auto result = std::make_unique<MpiCommunicator>(copy, true);
    result->group = group;
    return result;
  }

  std::unique_ptr<Communicator>
  split(int color, int key, const std::string &name, std::string &) override {
    MPI_Comm part;
    check(MPI_Comm_split(comm, color, key, &part), "MPI_Comm_split");
    auto result = std::make_unique<MpiCommunicator>(part, threadMultiple);
    result->group = name;
    return result;
  }
  std::string groupName() const override { return group; }

  uint64_t allReduceMax(uint64_t value) override {
    uint64_t max = 0;
    check(MPI_Allreduce(&value, &max, 1, MPI_UINT64_T, MPI_MAX, comm),
          "MPI_Allreduce");
    return max;
  }

  [[noreturn]] void abort(int code) override {
    // Whatever ends the job this way (an MPI error such as a dead peer's,
    // a rank's error), this rank's temporaries go first: MPI_Abort's
    // launcher then kills the processes.
    removeTemporaryFiles();
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
  /// In bf16 the chunk travels in bf16 (half the bytes) and every hop's
  /// addition rounds to bf16, in the same fixed order.
  template <typename E>
  void ringReduceScatter(typename E::T *full, typename E::T *shard) {
    using T = typename E::T;
    MPI_Datatype type = mpiType(E::kType);
    int next = (rank_ + 1) % size_, prev = (rank_ + size_ - 1) % size_;
    auto chunk = [&](int c) { return ((c % size_) + size_) % size_; };
    for (int step = 0; step + 1 < size_; ++step) {
      int out = chunk(rank_ - 1 - step), in = chunk(rank_ - 2 - step);
      check(MPI_Sendrecv(full + displs[out], counts[out], type, next,
                         /*tag=*/step, shard, counts[in], type, prev,
                         /*tag=*/step, comm, MPI_STATUS_IGNORE),
            "MPI_Sendrecv (ring reduce-scatter)");
      T *own = full + displs[in];
      T *sum = step + 2 == size_ ? shard : own;
      E::add(sum, shard, own, counts[in]);
    }
  }

  /// The ring (or MPI's reduce-scatter), then the scale by 1/N, which
  /// rounds once more in bf16.
  template <typename E>
  void reduceScatterMeanOf(typename E::T *full, typename E::T *shard) {
    if (ring && size_ > 1)
      ringReduceScatter<E>(full, shard);
    else
      check(MPI_Reduce_scatter(full, shard, counts.data(), mpiType(E::kType),
                               sumOp<E>(), comm),
            "MPI_Reduce_scatter");
    float scale = 1.0f / float(size_);
    E::scale(shard, scale, counts[rank_]);
  }

  static MPI_Datatype mpiType(plan::DType type) {
    switch (type) {
    case plan::DType::BF16:
      return MPI_UINT16_T;
    case plan::DType::I32:
      return MPI_INT32_T;
    case plan::DType::F32:
      break;
    }
    return MPI_FLOAT;
  }
  /// MPI_SUM for f32; for bf16 our own operation, created on first use
  /// (only FSDP_REDUCE_SCATTER=mpi needs it) by the one thread that uses
  /// this communicator.
  template <typename E> MPI_Op sumOp() {
    if (E::kType != plan::DType::BF16)
      return MPI_SUM;
    if (bf16SumOp == MPI_OP_NULL)
      check(MPI_Op_create(&bf16Sum, /*commute=*/1, &bf16SumOp),
            "MPI_Op_create");
    return bf16SumOp;
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

  /// An all-to-all's per-rank row counts as MPI's ints, with their
  /// displacements (rows, in rank order); aborts the job where a count is
  /// negative or the rows in all exceed INT_MAX.
  void rowLayout(const int64_t *rows, const char *verb, std::vector<int> &out,
                 std::vector<int> &at) {
    out.resize(size_);
    at.resize(size_);
    int64_t sum = 0;
    for (int r = 0; r < size_; ++r) {
      if (rows[r] < 0) {
        std::fprintf(stderr,
                     "fsdp-run: rank %d: error: an all-to-all %s %lld rows "
                     "with rank %d\n",
                     rank_, verb, (long long)rows[r], r);
        abort(1);
      }
      // Saturating: the sum is only reported past INT32_MAX.
      sum = rows[r] > INT64_MAX - sum ? INT64_MAX : sum + rows[r];
    }
    if (sum > INT32_MAX) {
      std::fprintf(stderr,
                   "fsdp-run: rank %d: error: an all-to-all %s %lld rows in "
                   "all, more than MPI's int counts allow (%d)\n",
                   rank_, verb, (long long)sum, INT32_MAX);
      abort(1);
    }
    sum = 0;
    for (int r = 0; r < size_; ++r) {
      out[r] = int(rows[r]);
      at[r] = int(sum);
      sum += rows[r];
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
  std::string group = "world";
  /// Our ring reduce-scatter, or MPI's (FSDP_REDUCE_SCATTER=mpi).
  bool ring = !std::getenv("FSDP_REDUCE_SCATTER") ||
              std::string(std::getenv("FSDP_REDUCE_SCATTER")) != "mpi";
  int rank_ = 0, size_ = 1, localRank_ = 0, localSize_ = 1;
  std::vector<int> counts, displs;
  /// allToAllV's, kept so that a step allocates nothing.
  std::vector<int> sendCounts, sendDispls, recvCounts, recvDispls;
  MPI_Op bf16SumOp = MPI_OP_NULL;
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

void abortMpiJob(int code) {
  int initialized = 0, finalized = 0, size = 1;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  if (!initialized || finalized)
    return;
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  if (size > 1)
    MPI_Abort(MPI_COMM_WORLD, code);
}

} // namespace fsdp::rt
#else
namespace fsdp::rt {
std::unique_ptr<Communicator> createMpiCommunicator(int *, char ***) {
  return nullptr;
}
bool haveMpi() { return false; }
void abortMpiJob(int) {}
} // namespace fsdp::rt
#endif
