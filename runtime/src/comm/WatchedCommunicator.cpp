//===- WatchedCommunicator.cpp - every collective through the recorder ----===//
//
// A Communicator that records each collective of the one it wraps in the
// flight recorder before entering it and after leaving it, so that the
// watchdog sees every collective the runtime issues: the plan's, and the
// runtime's own (loss, agreement, high-water mark, final gather). Its
// duplicates are watched too, each on a channel of its own.
//
//===----------------------------------------------------------------------===//

#include "fsdp/runtime/comm/FlightRecorder.h"

#include <cstdlib>

namespace fsdp::rt {
namespace {
class WatchedCommunicator : public Communicator {
public:
  WatchedCommunicator(std::unique_ptr<Communicator> inner,
                      FlightRecorder &recorder, uint32_t channel,
                      std::shared_ptr<uint32_t> channels)
      : inner(std::move(inner)), recorder(recorder), channel(channel),
        channels(std::move(channels)) {}

  int rank() const override { return inner->rank(); }
  int size() const override { return inner->size(); }
  std::string description() const override { return inner->description(); }
  int localRank() const override { return inner->localRank(); }
  int localSize() const override { return inner->localSize(); }

  // The bytes recorded are the full tensor's in its element type: a bf16
  // collective moves half those of an f32 one.
  void allGather(void *full, int64_t total, plan::DType type) override {
    watched("all_gather", uint64_t(total) * plan::dtypeSize(type),
            [&] { inner->allGather(full, total, type); });
  }
  void reduceScatterMean(void *full, void *shard, int64_t total,
                         plan::DType type) override {
    watched("reduce_scatter", uint64_t(total) * plan::dtypeSize(type),
            [&] { inner->reduceScatterMean(full, shard, total, type); });
  }
  void allReduceMeanInPlace(void *data, int64_t count,
                            plan::DType type) override {
    watched("all_reduce_mean", uint64_t(count) * plan::dtypeSize(type),
            [&] { inner->allReduceMeanInPlace(data, count, type); });
  }
  double allReduceMean(double value) override {
    double result = 0.0;
    watched("all_reduce", sizeof(double),
            [&] { result = inner->allReduceMean(value); });
    return result;
  }
  double allReduceSum(double value) override {
    double result = 0.0;
    watched("all_reduce", sizeof(double),
            [&] { result = inner->allReduceSum(value); });
    return result;
  }
  uint64_t allReduceMax(uint64_t value) override {
    uint64_t result = 0;
    watched("all_reduce", sizeof(uint64_t),
            [&] { result = inner->allReduceMax(value); });
    return result;
  }
  void broadcast(void *data, uint64_t bytes, int root) override {
    watched("broadcast", bytes, [&] { inner->broadcast(data, bytes, root); });
  }
  // An all-to-all records the bytes this rank sends and those it
  // receives, which differ by rank and by step (the routing decides).
  void allToAllCounts(const int64_t *send, int64_t *recv,
                      int64_t perPeer) override {
    uint64_t bytes = uint64_t(perPeer) * uint64_t(size()) * sizeof(int64_t);
    watched(
        "all_to_all", bytes,
        [&] { inner->allToAllCounts(send, recv, perPeer); }, bytes);
  }
  void allToAllV(const void *send, const int64_t *sendRows, void *recv,
                 const int64_t *recvRows, int64_t rowElements,
                 plan::DType type) override {
    uint64_t sent = 0, received = 0;
    for (int r = 0; r < size(); ++r) {
      sent += uint64_t(sendRows[r]);
      received += uint64_t(recvRows[r]);
    }
    uint64_t row = uint64_t(rowElements) * plan::dtypeSize(type);
    watched(
        "all_to_all", sent * row,
        [&] {
          inner->allToAllV(send, sendRows, recv, recvRows, rowElements, type);
        },
        received * row);
  }
  std::unique_ptr<Communicator> duplicate(std::string &why) override {
    std::unique_ptr<Communicator> copy;
    watched("comm_dup", 0, [&] { copy = inner->duplicate(why); });
    if (!copy)
      return nullptr;
    uint32_t next = ++*channels;
    return std::make_unique<WatchedCommunicator>(std::move(copy), recorder,
                                                 next, channels);
  }
  std::unique_ptr<Communicator> split(int color, int key,
                                      const std::string &name,
                                      std::string &why) override {
    std::unique_ptr<Communicator> part;
    watched("comm_split", 0,
            [&] { part = inner->split(color, key, name, why); });
    if (!part)
      return nullptr;
    uint32_t next = ++*channels;
    return std::make_unique<WatchedCommunicator>(std::move(part), recorder,
                                                 next, channels);
  }
  std::string groupName() const override { return inner->groupName(); }
  [[noreturn]] void abort(int code) override {
    inner->abort(code);
    std::_Exit(code); // not reached: inner's abort does not return
  }

private:
  template <typename Fn>
  void watched(const char *kind, uint64_t bytes, Fn fn,
               std::optional<uint64_t> received = std::nullopt) {
    uint64_t id = recorder.start(RecordScope::take(), channel, kind, bytes,
                                 inner->groupName(), received);
    fn();
    recorder.finish(id);
  }

  std::unique_ptr<Communicator> inner;
  FlightRecorder &recorder;
  uint32_t channel;
  /// The last channel handed out, shared by a communicator and its copies.
  std::shared_ptr<uint32_t> channels;
};
} // namespace

std::unique_ptr<Communicator>
createWatchedCommunicator(std::unique_ptr<Communicator> inner,
                          FlightRecorder &recorder) {
  return std::make_unique<WatchedCommunicator>(std::move(inner), recorder, 0,
                                               std::make_shared<uint32_t>(0));
}

} // namespace fsdp::rt
