//===- CollectiveStreams.cpp - collectives on threads of their own --------===//

#include "cpu/CollectiveStreams.h"

namespace fsdp::rt {

CollectiveStreams::CollectiveStreams(
    std::vector<std::unique_ptr<Communicator>> comms) {
  for (auto &comm : comms) {
    streams.push_back(std::make_unique<Stream>());
    streams.back()->comm = std::move(comm);
  }
  for (auto &stream : streams)
    stream->thread = std::thread([this, s = stream.get()] { serve(*s); });
}

CollectiveStreams::~CollectiveStreams() {
  {
    std::lock_guard<std::mutex> lock(mutex);
    stopping = true;
  }
  queued.notify_all();
  for (auto &stream : streams)
    stream->thread.join();
}

void CollectiveStreams::setGroup(uint32_t stream, plan::CommAxis axis,
                                 std::unique_ptr<Communicator> group) {
  std::lock_guard<std::mutex> lock(mutex);
  streams.at(stream - 1)->groups[uint32_t(axis)] = std::move(group);
}

void CollectiveStreams::start(uint32_t stream, plan::CommAxis axis,
                              std::vector<uint32_t> tokens, Job job) {
  {
    std::lock_guard<std::mutex> lock(mutex);
    streams.at(stream - 1)
        ->queue.push_back({axis, std::move(tokens), std::move(job)});
  }
  queued.notify_all();
}

Backend::Span CollectiveStreams::wait(uint32_t token) {
  std::unique_lock<std::mutex> lock(mutex);
  finished.wait(lock, [&] { return done.count(token) != 0; });
  Backend::Span span = done[token];
  done.erase(token);
  return span;
}

void CollectiveStreams::serve(Stream &stream) {
  std::unique_lock<std::mutex> lock(mutex);
  while (true) {
    queued.wait(lock, [&] { return stopping || !stream.queue.empty(); });
    // Stopping: on a normal exit every started collective has been waited
    // for; one still queued belongs to an error path and is dropped, not
    // started (its peers may be gone).
    if (stopping)
      return;
    Queued next = std::move(stream.queue.front());
    stream.queue.pop_front();
    Communicator &comm = stream.groups[uint32_t(next.axis)]
                             ? *stream.groups[uint32_t(next.axis)]
                             : *stream.comm;
    lock.unlock();
    Backend::Span span;
    span.startNanos = steadyNanos();
    next.job(comm);
    std::vector<uint32_t> &tokens = next.tokens;
    span.endNanos = steadyNanos();
    lock.lock();
    for (uint32_t token : tokens)
      done[token] = span;
    finished.notify_all();
  }
}

} // namespace fsdp::rt
