//===- EmuNcclAllToAllTest.cpp - the CUDA backend's NCCL all-to-alls ------===//
//
//   mpirun -np N fsdp-cuda-emu-nccl-test
//
// The CUDA backend's own Nccl::allToAllCounts and Nccl::allToAllV
// (src/cuda/Nccl.cpp: grouped ncclSend/ncclRecv) on the emulated device and
// NCCL (emu_nccl.cpp: a group's sends and receives on one stream run as one
// exchange over MPI), against the reference the communicators are checked
// against (runtime/test/AllToAllCheck.h): the counts exchanged on the
// device, copied back to the host, then the rows of every case in f32,
// bf16 and i32, every received row bit for bit in rank order, nothing
// written past them (the emulator's bounds and race checks watch the
// device buffers), and neither a device fault nor an asynchronous NCCL
// error. No GPU is needed; a GPU's NCCL runs the same calls.
//
// Prints "emu-nccl all-to-all: rank R of N: C checks, F failed" and exits
// 1 on any rank's failure.
//
//===----------------------------------------------------------------------===//
#include "AllToAllCheck.h"
#include "Nccl.h"
#include "emu_runtime.h"

#include <mpi.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

using namespace fsdp;
using namespace fsdp::rt;

namespace {
int64_t checks = 0, failures = 0;
int me = 0;

void expect(bool ok, const std::string &what) {
  ++checks;
  if (!ok && ++failures <= 20)
    std::printf("FAILED rank %d: %s\n", me, what.c_str());
}

/// The host communicator Nccl::create bootstraps over (it broadcasts the
/// unique id): MPI_COMM_WORLD, nothing else used.
class MpiHost : public Communicator {
public:
  MpiHost() {
    MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
    MPI_Comm_size(MPI_COMM_WORLD, &size_);
  }
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  std::string description() const override { return "MPI (test host)"; }
  void broadcast(void *data, uint64_t bytes, int root) override {
    MPI_Bcast(data, int(bytes), MPI_BYTE, root, MPI_COMM_WORLD);
  }
  void allGather(void *, int64_t, plan::DType) override { unused(); }
  void reduceScatterMean(void *, void *, int64_t, plan::DType) override {
    unused();
  }
  void allReduceMeanInPlace(void *, int64_t, plan::DType) override { unused(); }
  double allReduceMean(double) override { unused(); }
  double allReduceSum(double) override { unused(); }
  uint64_t allReduceMax(uint64_t) override { unused(); }
  void allToAllCounts(const int64_t *, int64_t *, int64_t) override {
    unused();
  }
  void allToAllV(const void *, const int64_t *, void *, const int64_t *,
                 int64_t, plan::DType) override {
    unused();
  }
  int localRank() const override { return rank_; }
  int localSize() const override { return size_; }
  std::unique_ptr<Communicator> duplicate(std::string &) override { unused(); }
  std::unique_ptr<Communicator> split(int, int, const std::string &,
                                      std::string &) override {
    unused();
  }
  [[noreturn]] void abort(int code) override {
    MPI_Abort(MPI_COMM_WORLD, code);
    std::_Exit(code);
  }

private:
  [[noreturn]] void unused() {
    std::fprintf(stderr, "emu-nccl all-to-all: the test host was asked for "
                         "a collective Nccl::create does not use\n");
    abort(1);
    std::_Exit(1); // not reached: abort does not return
  }
  int rank_ = 0, size_ = 1;
};

/// Device memory of `bytes` (at least 1) holding `host`, then `fill`.
void *deviceCopy(const void *host, size_t bytes, size_t size,
                 unsigned char fill) {
  void *d = nullptr;
  cudaMalloc(&d, size ? size : 1);
  std::vector<unsigned char> init(size ? size : 1, fill);
  if (bytes)
    std::memcpy(init.data(), host, bytes);
  cudaMemcpy(d, init.data(), init.size(), cudaMemcpyHostToDevice);
  return d;
}

/// The stream ran without a fault and NCCL reports no error.
bool ran(cuda::Nccl &nccl, cudaStream_t s, bool called, std::string &error) {
  if (!called)
    return false;
  if (cudaStreamSynchronize(s) != cudaSuccess) {
    error =
        std::string("device fault: ") + cudaGetErrorString(cudaStreamQuery(s));
    return false;
  }
  if (nccl.asyncError() != ncclSuccess) {
    error = "asynchronous NCCL error";
    return false;
  }
  return true;
}

void checkCounts(cuda::Nccl &nccl, cudaStream_t s, int64_t perPeer) {
  int N = nccl.worldSize(), k = nccl.rankId();
  std::vector<int64_t> send(size_t(N * perPeer));
  for (int r = 0; r < N; ++r)
    for (int64_t v = 0; v < perPeer; ++v)
      send[size_t(r * perPeer + v)] = test::allToAllCount(k, r, v);
  size_t bytes = send.size() * 8;
  void *dSend = deviceCopy(send.data(), bytes, bytes, 0);
  void *dRecv = deviceCopy(nullptr, 0, bytes + 16, 0x5A);
  std::string what =
                  "allToAllCounts (" + std::to_string(perPeer) + " per peer): ",
              error;
  bool ok =
      ran(nccl, s,
          nccl.allToAllCounts(static_cast<int64_t *>(dSend),
                              static_cast<int64_t *>(dRecv), perPeer, s, error),
          error);
  expect(ok, what + error);
  std::vector<int64_t> recv(size_t(N * perPeer + 2));
  cudaMemcpy(recv.data(), dRecv, bytes + 16, cudaMemcpyDeviceToHost);
  bool right = true;
  for (int r = 0; r < N; ++r)
    for (int64_t v = 0; v < perPeer; ++v)
      right &= recv[size_t(r * perPeer + v)] == test::allToAllCount(r, k, v);
  expect(right, what + "wrong values");
  expect(recv[size_t(N * perPeer)] == int64_t(0x5A5A5A5A5A5A5A5A) &&
             recv[size_t(N * perPeer + 1)] == int64_t(0x5A5A5A5A5A5A5A5A),
         what + "wrote past the end");
  cudaFree(dSend);
  cudaFree(dRecv);
}

/// Case `c` in `type`: the row counts exchanged on the device and copied
/// back, then the rows.
void checkRows(cuda::Nccl &nccl, cudaStream_t s, int c, plan::DType type) {
  int N = nccl.worldSize(), k = nccl.rankId();
  test::AllToAllCase a = test::allToAllCase(c, N, k, type);
  std::string what = "allToAllV " +
                     std::string(plan::kDTypeNames[size_t(type)]) + " (" +
                     test::allToAllCaseName(c) + "): ",
              error;
  void *dCounts =
      deviceCopy(a.sendRows.data(), size_t(N) * 8, size_t(N) * 16, 0);
  int64_t *sendCounts = static_cast<int64_t *>(dCounts);
  expect(ran(nccl, s,
             nccl.allToAllCounts(sendCounts, sendCounts + N, 1, s, error),
             error),
         what + "counts: " + error);
  std::vector<int64_t> recvRows(size_t(N), -1);
  cudaMemcpy(recvRows.data(), sendCounts + N, size_t(N) * 8,
             cudaMemcpyDeviceToHost);
  expect(recvRows == a.recvRows, what + "the row counts exchanged differ");
  const size_t bytes = plan::dtypeSize(type);
  const size_t received = size_t(a.receivedRows * a.rowElements) * bytes;
  const size_t pad = 3 * size_t(a.rowElements) * bytes + 1;
  void *dSend = deviceCopy(a.send.data(), a.send.size(), a.send.size(), 0);
  void *dRecv = deviceCopy(nullptr, 0, received + pad, 0xA5);
  bool ok =
      ran(nccl, s,
          nccl.allToAllV(dSend, a.sendRows.data(), dRecv, a.recvRows.data(),
                         a.rowElements, type, s, error),
          error);
  expect(ok, what + error);
  std::vector<unsigned char> recv(received + pad);
  cudaMemcpy(recv.data(), dRecv, recv.size(), cudaMemcpyDeviceToHost);
  std::string wrong = test::allToAllWrong(c, N, k, type, a, recv.data());
  expect(wrong.empty(), what + "wrong element " + wrong);
  bool past = false;
  for (size_t b = received; b < recv.size(); ++b)
    past |= recv[b] != 0xA5;
  expect(!past, what + "wrote past the received rows");
  cudaFree(dCounts);
  cudaFree(dSend);
  cudaFree(dRecv);
}
} // namespace

int main(int argc, char **argv) {
  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
  int failed = 0;
  {
    MpiHost host;
    me = host.rank();
    std::string error;
    std::unique_ptr<cuda::Nccl> nccl = cuda::Nccl::create(host, error);
    if (!nccl) {
      std::printf("FAILED rank %d: Nccl::create: %s\n", me, error.c_str());
      MPI_Abort(MPI_COMM_WORLD, 1);
    }
    cudaStream_t s;
    cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
    for (int64_t perPeer : {1, 3})
      checkCounts(*nccl, s, perPeer);
    for (int c = 0; c < test::kAllToAllCases; ++c)
      for (plan::DType type :
           {plan::DType::F32, plan::DType::BF16, plan::DType::I32})
        checkRows(*nccl, s, c, type);
    std::printf("emu-nccl all-to-all: rank %d of %d: %lld checks, %lld "
                "failed\n",
                me, host.size(), (long long)checks, (long long)failures);
    std::fflush(stdout);
    nccl.reset();
    cudaStreamDestroy(s);
    int mine = failures ? 1 : 0;
    MPI_Allreduce(&mine, &failed, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  }
  MPI_Finalize();
  return failed;
}
