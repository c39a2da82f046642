//===- FlightRecorder.h - collectives recorded, and a watchdog --*- C++ -*-===//
//
// Every collective a rank issues, compiled (the plan's all-gathers and
// reduce-scatters) or not (the loss all-reduce, start-up agreement, the
// high-water mark, the final gather), passes through a watched
// communicator (createWatchedCommunicator) that records it here: its
// channel (the communicator: 0 is the main one, s its duplicate for plan
// stream s), a per-channel sequence number, the step, the kernel, what it is,
// its bytes (an all-to-all's sent and received), and when it was issued,
// started and finished. The last
// `capacity` records are kept in a ring, as PyTorch's NCCL flight recorder
// keeps them.
//
// Ranks on one node also publish their progress (per channel, the last
// sequence number started and finished, and a heartbeat) on a shared
// "progress board" in /dev/shm. When a rank's collective has waited longer
// than the timeout, the watchdog asks every rank to dump its recorder (to
// stderr and, with a directory, to a file), and one rank reads the board
// and names the rank(s) whose sequence number lags and the collective they
// have not entered. A rank that is stopped (SIGSTOP, a debugger) cannot
// answer but its last published position stays on the board.
//
//===----------------------------------------------------------------------===//

#ifndef FSDP_RUNTIME_FLIGHTRECORDER_H
#define FSDP_RUNTIME_FLIGHTRECORDER_H

#include "fsdp/runtime/comm/Communicator.h"

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

namespace fsdp::rt {

/// What issued a collective: the step and the plan kernel (-1 for the
/// runtime's own collectives) and a phrase for messages ("all_gather of
/// unit 'h0'", "loss all-reduce").
struct CollectiveLabel {
  int64_t step = 0;
  int64_t kernel = -1;
  std::string what;
};

class FlightRecorder {
public:
  enum class State : uint32_t { Issued, Started, Finished };
  struct Record {
    uint64_t id = 0;  ///< 1-based, in issue order over all channels
    uint64_t seq = 0; ///< 1-based per channel once started; 0 before
    uint32_t channel = 0;
    State state = State::Issued;
    CollectiveLabel label;
    std::string kind; ///< "all_gather", "reduce_scatter", "all_reduce", ...
    /// What it moves; for an all-to-all, the bytes this rank sends.
    uint64_t bytes = 0;
    /// An all-to-all's bytes received (its sizes differ by rank and by
    /// step: known when it starts); unset for the other collectives.
    std::optional<uint64_t> received;
    int64_t issuedNanos = 0, startedNanos = 0, finishedNanos = 0;
  };
  /// Most channels a rank uses: its main communicator, one per stream,
  /// and under hybrid sharding the groups split from them (the main
  /// thread's shard and replica groups, each stream's group).
  static constexpr uint32_t kMaxChannels = 12;

  FlightRecorder(int rank, int size, size_t capacity = 256);
  ~FlightRecorder();
  FlightRecorder(const FlightRecorder &) = delete;
  FlightRecorder &operator=(const FlightRecorder &) = delete;

  int rank() const { return rank_; }
  int size() const { return size_; }

  /// Opens (creating it if needed) the node's progress board named `name`
  /// in /dev/shm; every rank of the job on this node passes the same name.
  /// Without a board the recorder still records and dumps, but cannot
  /// name a lagging rank.
  bool attachBoard(const std::string &name, std::string &error);
  /// Removes the board's name (the ranks that have it mapped keep it), so
  /// that nothing is left in /dev/shm however the job ends; call once all
  /// ranks of the node have attached.
  void unlinkBoard();

  /// A collective that a kernel will issue (state Issued); the calling
  /// thread's next collective on a watched communicator takes it over (see
  /// RecordScope). Returns its id.
  uint64_t issue(const CollectiveLabel &label, const std::string &kind,
                 uint64_t bytes);
  /// The collective `id` (0: a new one with the calling thread's label)
  /// entered the communicator of `channel`, which spans `group` (a mesh
  /// axis's group, named in the record; empty or "world": every rank).
  /// `received` (an all-to-all's) sets the record's bytes sent and
  /// received, replacing what issue() guessed.
  uint64_t start(uint64_t id, uint32_t channel, const std::string &kind,
                 uint64_t bytes, const std::string &group = "",
                 std::optional<uint64_t> received = std::nullopt);
  void finish(uint64_t id);
  /// Marks `id` finished if it still is open: a collective that no host
  /// communicator ran (a GPU's NCCL) ends at its wait.
  void finishIfOpen(uint64_t id);

  /// The longest-running started collective, if any, and since when.
  bool oldestStarted(Record &record) const;
  /// The last records, oldest first.
  std::vector<Record> snapshot() const;
  /// The records as text, one line each (the last `limit`; 0: all).
  std::string format(size_t limit = 0) const;

  /// Progress board access for the watchdog.
  void heartbeat();
  /// Asks every rank of the node to dump its recorder now.
  void requestDump();
  bool dumpRequested() const;
  void markDumped();
  /// True for exactly one caller on the node: it prints the analysis.
  bool claimReporter();
  /// Waits up to `seconds` for every live rank on the board to dump.
  void waitForDumps(double seconds) const;
  /// The reporter has printed its analysis; others wait for that (up to
  /// `seconds`) before they exit, since an exit ends the whole job.
  void markReported();
  void waitForReport(double seconds) const;
  /// One line naming the ranks that lag and the collective they have not
  /// entered, from the board (or why it cannot tell).
  std::string analyze() const;

private:
  struct Board;
  Record &slot(uint64_t id) { return ring[(id - 1) % ring.size()]; }
  const Record &slot(uint64_t id) const { return ring[(id - 1) % ring.size()]; }
  void publish(const Record &record, bool started);
  /// A fresh record in the ring (the caller holds the mutex).
  uint64_t newRecord(const CollectiveLabel &label, const std::string &kind,
                     uint64_t bytes, int64_t now);

  int rank_, size_;
  mutable std::mutex mutex;
  std::vector<Record> ring;
  uint64_t nextId = 1;
  uint64_t nextSeq[kMaxChannels] = {};
  Board *board = nullptr;
  size_t boardBytes = 0;
  std::string boardName;
};

/// The record(s) the calling thread's next collectives belong to, in
/// order: set by the executor around a kernel and by a stream thread
/// around a job. Nested scopes restore the outer one.
class RecordScope {
public:
  explicit RecordScope(std::vector<uint64_t> ids);
  explicit RecordScope(const CollectiveLabel &label);
  ~RecordScope();
  /// The records of the calling thread's scope not taken yet, in order.
  static std::vector<uint64_t> remaining();
  /// The label for collectives without a record (the runtime's own).
  static const CollectiveLabel &currentLabel();
  /// Takes the next record of the scope, or 0 when none is left.
  static uint64_t take();

private:
  std::vector<uint64_t> savedIds;
  size_t savedNext;
  CollectiveLabel savedLabel;
};

/// Wraps `inner` so that every collective on it (and on its duplicates,
/// channels 1, 2, ...) is recorded in `recorder`.
std::unique_ptr<Communicator>
createWatchedCommunicator(std::unique_ptr<Communicator> inner,
                          FlightRecorder &recorder);

/// Ends the job when a collective of this rank has been running longer
/// than `timeout` seconds: prints the collective, dumps the recorder (to
/// stderr and to `dumpDir`/flight-recorder.rank<r>.txt when `dumpDir` is
/// set), names the lagging rank(s), runs `beforeExit` (removing temporary
/// files) and exits with 3. Also dumps when another rank asks for it.
class Watchdog {
public:
  Watchdog(FlightRecorder &recorder, double timeout, std::string dumpDir,
           void (*beforeExit)() = nullptr);
  ~Watchdog();

private:
  void run();
  void dump(bool toStderr);

  FlightRecorder &recorder;
  double timeout;
  std::string dumpDir;
  void (*beforeExit)();
  std::atomic<bool> stopping{false};
  bool dumped = false;
  std::thread thread;
};

/// The watchdog of a multi-rank job, with the node's progress board
/// attached: its name comes from the launcher's job id (PMIX_NAMESPACE,
/// SLURM_JOB_ID), else from rank 0 (a broadcast), and is registered as a
/// temporary file so that an error or signal removes it. Without a board
/// (no /dev/shm) it warns and still watches.
std::unique_ptr<Watchdog> startWatchdog(FlightRecorder &recorder,
                                        Communicator &comm, double timeout,
                                        const std::string &dumpDir,
                                        void (*beforeExit)());

} // namespace fsdp::rt

#endif // FSDP_RUNTIME_FLIGHTRECORDER_H
