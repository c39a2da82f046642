//===- CollectiveStreams.h - collectives on their own threads -*- C++ -*-===//
//
// The CPU backend's streams: one thread per plan stream, each with its own
// communicator (a duplicate, so that two streams' collectives never match
// each other's), running its collectives in the order they were started,
// while the main thread computes. wait(token) blocks until that
// collective has finished. Every rank starts the same collectives on the
// same streams in the same order (the plan says so), which is all MPI
// needs to match them.
//
//===----------------------------------------------------------------------===//

#ifndef FSDP_RUNTIME_COLLECTIVESTREAMS_H
#define FSDP_RUNTIME_COLLECTIVESTREAMS_H

#include "fsdp/runtime/comm/Communicator.h"
#include "fsdp/runtime/exec/Backend.h"

#include <array>
#include <condition_variable>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

namespace fsdp::rt {

class CollectiveStreams {
public:
  using Job = std::function<void(Communicator &)>;

  /// Stream s (1-based) runs on `comms[s - 1]`.
  explicit CollectiveStreams(std::vector<std::unique_ptr<Communicator>> comms);
  ~CollectiveStreams();

  size_t numStreams() const { return streams.size(); }
  /// Stream s's own communicator (every rank), to split groups from.
  Communicator &communicator(uint32_t stream) {
    return *streams.at(stream - 1)->comm;
  }
  /// Hybrid sharding: stream s runs the collectives over `axis` on
  /// `group` (split from its communicator). Call before any start.
  void setGroup(uint32_t stream, plan::CommAxis axis,
                std::unique_ptr<Communicator> group);
  /// Queues `job` on `stream`, over `axis`'s group (the stream's own
  /// communicator where no group was set); it completes the collectives
  /// `tokens`.
  void start(uint32_t stream, plan::CommAxis axis, std::vector<uint32_t> tokens,
             Job job);
  /// Blocks until collective `token` has run; returns when it ran.
  Backend::Span wait(uint32_t token);

private:
  struct Queued {
    plan::CommAxis axis;
    std::vector<uint32_t> tokens;
    Job job;
  };
  struct Stream {
    std::unique_ptr<Communicator> comm;
    std::array<std::unique_ptr<Communicator>, plan::kNumCommAxes> groups;
    std::deque<Queued> queue;
    std::thread thread;
  };
  void serve(Stream &stream);

  std::vector<std::unique_ptr<Stream>> streams;
  std::mutex mutex;
  std::condition_variable queued, finished;
  std::map<uint32_t, Backend::Span> done;
  bool stopping = false;
};

} // namespace fsdp::rt

#endif // FSDP_RUNTIME_COLLECTIVESTREAMS_H
