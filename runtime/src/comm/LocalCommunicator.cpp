//===- LocalCommunicator.cpp - one rank, no communication -----------------===//

#include "fsdp/runtime/comm/Communicator.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace fsdp::rt {
namespace {
class LocalCommunicator : public Communicator {
public:
  int rank() const override { return 0; }
  int size() const override { return 1; }
  std::string description() const override { return "local (1 rank)"; }
  // The one rank's range is the whole tensor, already in place.
  void allGather(void *, int64_t, plan::DType) override {}
  // The mean of one value is that value (x * 1 is exact in either type).
  void reduceScatterMean(void *full, void *shard, int64_t total,
                         plan::DType type) override {
    std::memmove(shard, full, uint64_t(total) * plan::dtypeSize(type));
  }
  void allReduceMeanInPlace(void *, int64_t, plan::DType) override {}
  double allReduceMean(double value) override { return value; }
  double allReduceSum(double value) override { return value; }
  uint64_t allReduceMax(uint64_t value) override { return value; }
  void broadcast(void *, uint64_t, int) override {}
  // To itself: a copy of its one block.
  void allToAllCounts(const int64_t *send, int64_t *recv,
                      int64_t perPeer) override {
    if (perPeer > 0)
      std::memmove(recv, send, uint64_t(perPeer) * sizeof(int64_t));
  }
  void allToAllV(const void *send, const int64_t *sendRows, void *recv,
                 const int64_t *recvRows, int64_t rowElements,
                 plan::DType type) override {
    if (sendRows[0] != recvRows[0] || sendRows[0] < 0 || rowElements < 0) {
      std::fprintf(stderr,
                   "fsdp-run: error: an all-to-all of one rank sends %lld "
                   "rows of %lld elements to itself but receives %lld\n",
                   (long long)sendRows[0], (long long)rowElements,
                   (long long)recvRows[0]);
      std::exit(1);
    }
    // Nothing to move may come with null buffers (memmove's are nonnull).
    uint64_t bytes =
        uint64_t(sendRows[0]) * uint64_t(rowElements) * plan::dtypeSize(type);
    if (bytes > 0)
      std::memmove(recv, send, bytes);
  }
  int localRank() const override { return 0; }
  int localSize() const override { return 1; }
  std::unique_ptr<Communicator> duplicate(std::string &) override {
    return std::make_unique<LocalCommunicator>();
  }
  std::unique_ptr<Communicator> split(int, int, const std::string &,
                                      std::string &) override {
    return std::make_unique<LocalCommunicator>();
  }
  [[noreturn]] void abort(int code) override { std::exit(code); }
};
} // namespace

std::unique_ptr<Communicator> createLocalCommunicator() {
  return std::make_unique<LocalCommunicator>();
}

} // namespace fsdp::rt
