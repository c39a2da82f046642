//===- FlightRecorder.cpp - the last collectives of a rank ----------------===//

#include "fsdp/runtime/comm/FlightRecorder.h"
#include "fsdp/runtime/support/OutputFile.h"
#include "fsdp/runtime/support/SteadyClock.h"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <sstream>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

namespace fsdp::rt {

/// The node's shared progress board: a header, then one slot per rank of
/// the job. Only lock-free atomics and plain characters live here, so
/// processes can share it through mmap; a slot is written by its rank
/// alone.
struct FlightRecorder::Board {
  static constexpr uint64_t kMagic = 0x4653445042524431ull; // "FSDPBRD1"
  static constexpr size_t kText = 120, kHistory = 8;
  struct Slot {
    std::atomic<int64_t> heartbeatNanos; ///< 0: this rank never attached
    std::atomic<uint32_t> pid, dumped;
    std::atomic<uint64_t> started[kMaxChannels], finished[kMaxChannels];
    /// The last kHistory started collectives of each channel, as text:
    /// collective #s at [s % kHistory].
    char history[kMaxChannels][kHistory][kText];
    const char *label(uint32_t channel, uint64_t seq) const {
      return history[channel][seq % kHistory];
    }
  };
  std::atomic<uint64_t> magic;
  std::atomic<uint32_t> worldSize, dumpRequest;
  std::atomic<int32_t> reporter; ///< 1 + the reporting rank; 0: none yet
  std::atomic<uint32_t> reported;
  Slot *slots() { return reinterpret_cast<Slot *>(this + 1); }
  const Slot *slots() const { return reinterpret_cast<const Slot *>(this + 1); }
  static size_t bytes(int ranks) {
    return sizeof(Board) + sizeof(Slot) * size_t(ranks);
  }
};

namespace {
/// "all_gather of unit 'h0' at step 3 (kernel #17)".
std::string describe(const CollectiveLabel &label, const std::string &kind) {
  std::string text = label.what.empty() ? kind : label.what;
  if (label.step > 0)
    text += " at step " + std::to_string(label.step);
  if (label.kernel >= 0)
    text += " (kernel #" + std::to_string(label.kernel) + ")";
  return text;
}

const char *stateName(FlightRecorder::State state) {
  switch (state) {
  case FlightRecorder::State::Issued:
    return "issued";
  case FlightRecorder::State::Started:
    return "started";
  case FlightRecorder::State::Finished:
    return "finished";
  }
  return "?";
}

thread_local std::vector<uint64_t> tScopeIds;
thread_local size_t tScopeNext = 0;
thread_local CollectiveLabel tScopeLabel;
} // namespace

FlightRecorder::FlightRecorder(int rank, int size, size_t capacity)
    : rank_(rank), size_(size), ring(std::max<size_t>(capacity, 1)) {}

FlightRecorder::~FlightRecorder() {
  if (board)
    munmap(board, boardBytes);
}

bool FlightRecorder::attachBoard(const std::string &name, std::string &error) {
  boardName = "/" + name;
  int fd = shm_open(boardName.c_str(), O_CREAT | O_RDWR, 0600);
  if (fd < 0) {
    error = "/dev/shm" + boardName + ": " + std::strerror(errno);
    return false;
  }
  boardBytes = Board::bytes(size_);
  // Every rank sizes it the same; new bytes read as zero.
  if (ftruncate(fd, off_t(boardBytes)) != 0) {
    error = "/dev/shm" + boardName + ": " + std::strerror(errno);
    close(fd);
    return false;
  }
  void *memory =
      mmap(nullptr, boardBytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  close(fd);
  if (memory == MAP_FAILED) {
    error = "/dev/shm" + boardName + ": " + std::strerror(errno);
    return false;
  }
  board = static_cast<Board *>(memory);
  board->magic = Board::kMagic;
  board->worldSize = uint32_t(size_);
  Board::Slot &mine = board->slots()[rank_];
  mine.pid = uint32_t(getpid());
  mine.heartbeatNanos = steadyNanos();
  return true;
}

void FlightRecorder::unlinkBoard() {
  if (!boardName.empty())
    shm_unlink(boardName.c_str());
}

uint64_t FlightRecorder::newRecord(const CollectiveLabel &label,
                                   const std::string &kind, uint64_t bytes,
                                   int64_t now) {
  uint64_t id = nextId++;
  Record &r = slot(id);
  r = Record();
  r.id = id;
  r.label = label;
  r.kind = kind;
  r.bytes = bytes;
  r.issuedNanos = now;
  return id;
}

uint64_t FlightRecorder::issue(const CollectiveLabel &label,
                               const std::string &kind, uint64_t bytes) {
  std::lock_guard<std::mutex> lock(mutex);
  return newRecord(label, kind, bytes, steadyNanos());
}

uint64_t FlightRecorder::start(uint64_t id, uint32_t channel,
                               const std::string &kind, uint64_t bytes,
                               const std::string &group,
                               std::optional<uint64_t> received) {
  channel = std::min(channel, kMaxChannels - 1);
  int64_t now = steadyNanos();
  std::lock_guard<std::mutex> lock(mutex);
  if (id == 0 || slot(id).id != id || slot(id).state != State::Issued) {
    // The runtime's own collective, or one more call of a record already
    // started (a bucket's members share none): a record of its own.
    id = newRecord(tScopeLabel, kind, bytes, now);
  }
  Record &r = slot(id);
  r.channel = channel;
  r.seq = ++nextSeq[channel];
  r.state = State::Started;
  r.startedNanos = now;
  if (r.kind.empty())
    r.kind = kind;
  if (received) {
    r.bytes = bytes;
    r.received = received;
  }
  // A mesh axis's group (hybrid sharding) is part of what the collective
  // is: the dump, the board and the watchdog's message name it.
  if (!group.empty() && group != "world")
    r.label.what =
        (r.label.what.empty() ? r.kind : r.label.what) + " over " + group;
  publish(r, /*started=*/true);
  return id;
}

void FlightRecorder::finish(uint64_t id) {
  std::lock_guard<std::mutex> lock(mutex);
  Record &r = slot(id);
  if (r.id != id)
    return;
  r.state = State::Finished;
  r.finishedNanos = steadyNanos();
  publish(r, /*started=*/false);
}

void FlightRecorder::finishIfOpen(uint64_t id) {
  {
    std::lock_guard<std::mutex> lock(mutex);
    if (slot(id).id != id || slot(id).state == State::Finished)
      return;
  }
  finish(id);
}

void FlightRecorder::publish(const Record &r, bool started) {
  if (!board)
    return;
  Board::Slot &mine = board->slots()[rank_];
  if (started) {
    std::string text = describe(r.label, r.kind);
    std::snprintf(mine.history[r.channel][r.seq % Board::kHistory],
                  Board::kText, "%s", text.c_str());
    mine.started[r.channel].store(r.seq, std::memory_order_release);
  } else if (r.seq > mine.finished[r.channel].load()) {
    mine.finished[r.channel].store(r.seq, std::memory_order_release);
  }
}

bool FlightRecorder::oldestStarted(Record &record) const {
  std::lock_guard<std::mutex> lock(mutex);
  bool found = false;
  for (const Record &r : ring)
    if (r.id && r.state == State::Started &&
        (!found || r.startedNanos < record.startedNanos)) {
      record = r;
      found = true;
    }
  return found;
}

std::vector<FlightRecorder::Record> FlightRecorder::snapshot() const {
  std::lock_guard<std::mutex> lock(mutex);
  std::vector<Record> records;
  uint64_t first = nextId > ring.size() ? nextId - ring.size() : 1;
  for (uint64_t id = first; id < nextId; ++id)
    if (slot(id).id == id)
      records.push_back(slot(id));
  return records;
}

std::string FlightRecorder::format(size_t limit) const {
  std::vector<Record> records = snapshot();
  size_t begin =
      limit && records.size() > limit ? records.size() - limit : size_t(0);
  int64_t now = steadyNanos();
  auto ago = [&](int64_t t) {
    char text[32];
    if (!t)
      return std::string("-");
    std::snprintf(text, sizeof(text), "%.3fs ago", double(now - t) * 1e-9);
    return std::string(text);
  };
  std::ostringstream os;
  for (size_t i = begin; i < records.size(); ++i) {
    const Record &r = records[i];
    os << "  #" << r.id << " channel " << r.channel << " seq " << r.seq << " "
       << stateName(r.state) << ": " << r.kind << ", " << r.bytes << " bytes";
    if (r.received)
      os << " sent, " << *r.received << " received";
    os << ", " << describe(r.label, r.kind) << "; issued " << ago(r.issuedNanos)
       << ", started " << ago(r.startedNanos) << ", finished "
       << ago(r.finishedNanos) << "\n";
  }
  return os.str();
}

void FlightRecorder::heartbeat() {
  if (board)
    board->slots()[rank_].heartbeatNanos = steadyNanos();
}

void FlightRecorder::requestDump() {
  if (board)
    board->dumpRequest = 1;
}

bool FlightRecorder::dumpRequested() const {
  return board && board->dumpRequest.load() != 0;
}

void FlightRecorder::markDumped() {
  if (board)
    board->slots()[rank_].dumped = 1;
}

bool FlightRecorder::claimReporter() {
  if (!board)
    return true;
  int32_t none = 0;
  return board->reporter.compare_exchange_strong(none, rank_ + 1);
}

void FlightRecorder::waitForDumps(double seconds) const {
  if (!board)
    return;
  int64_t deadline = steadyNanos() + int64_t(seconds * 1e9);
  while (steadyNanos() < deadline) {
    bool all = true;
    int64_t now = steadyNanos();
    for (int r = 0; r < size_; ++r) {
      const Board::Slot &s = board->slots()[r];
      bool alive = s.heartbeatNanos && now - s.heartbeatNanos < 1'000'000'000;
      all &= !alive || s.dumped;
    }
    if (all)
      return;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

void FlightRecorder::markReported() {
  if (board)
    board->reported = 1;
}

void FlightRecorder::waitForReport(double seconds) const {
  int64_t deadline = steadyNanos() + int64_t(seconds * 1e9);
  while (board && !board->reported && steadyNanos() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
}

std::string FlightRecorder::analyze() const {
  if (!board)
    return "no progress board on this node: see each rank's dump";
  const Board::Slot *slots = board->slots();
  int64_t now = steadyNanos();
  std::vector<std::string> findings;
  std::vector<int> elsewhere;
  std::vector<bool> lagging(size_, false);
  for (int r = 0; r < size_; ++r)
    if (!slots[r].heartbeatNanos)
      elsewhere.push_back(r);
  for (uint32_t c = 0; c < kMaxChannels; ++c) {
    int leader = -1;
    uint64_t most = 0;
    for (int r = 0; r < size_; ++r)
      if (slots[r].heartbeatNanos && slots[r].started[c] > most) {
        most = slots[r].started[c];
        leader = r;
      }
    if (leader < 0)
      continue;
    for (int r = 0; r < size_; ++r) {
      uint64_t at = slots[r].started[c];
      if (!slots[r].heartbeatNanos || at >= most || lagging[r])
        continue;
      lagging[r] = true;
      std::string text =
          "rank " + std::to_string(r) + " lags: it has not entered";
      const Board::Slot &lead = slots[leader];
      if (most - (at + 1) < Board::kHistory)
        text += std::string(" ") + lead.label(c, at + 1);
      else
        text += " a collective";
      text += " (channel " + std::to_string(c) + ", collective #" +
              std::to_string(at + 1) + ")";
      text += at + 1 == most
                  ? ", which rank " + std::to_string(leader) + " is in"
                  : ", which rank " + std::to_string(leader) +
                        " passed (it is in #" + std::to_string(most) + ": " +
                        lead.label(c, most) + ")";
      text +=
          "; its last collective was " +
          (at ? "#" + std::to_string(at) + " (" + slots[r].label(c, at) + ", " +
                    (slots[r].finished[c] >= at ? "finished" : "unfinished") +
                    ")"
              : std::string("none"));
      findings.push_back(text);
    }
  }
  for (int r = 0; r < size_; ++r) {
    int64_t beat = slots[r].heartbeatNanos;
    if (!beat || now - beat < 1'000'000'000)
      continue;
    char text[160];
    std::snprintf(text, sizeof(text),
                  "rank %d (pid %u) has not answered for %.1f s: stopped, in a "
                  "debugger or dead",
                  r, slots[r].pid.load(), double(now - beat) * 1e-9);
    findings.push_back(text);
  }
  if (!elsewhere.empty()) {
    std::string text = "rank(s)";
    for (int r : elsewhere)
      text += " " + std::to_string(r);
    findings.push_back(text + " run on another node: see their dumps");
  }
  if (findings.empty()) {
    std::string text = "no rank lags: every rank entered its latest collective";
    for (uint32_t c = 0; c < kMaxChannels; ++c)
      if (slots[rank_].started[c] > slots[rank_].finished[c])
        text += std::string(" (") +
                slots[rank_].label(c, slots[rank_].started[c]) + ")";
    return text + "; one may be stuck inside it, or the network is down";
  }
  std::string line;
  for (const std::string &f : findings)
    line += (line.empty() ? "" : "; ") + f;
  return line;
}

RecordScope::RecordScope(std::vector<uint64_t> ids)
    : savedIds(std::move(tScopeIds)), savedNext(tScopeNext),
      savedLabel(tScopeLabel) {
  tScopeIds = std::move(ids);
  tScopeNext = 0;
}

RecordScope::RecordScope(const CollectiveLabel &label)
    : savedIds(std::move(tScopeIds)), savedNext(tScopeNext),
      savedLabel(tScopeLabel) {
  tScopeIds.clear();
  tScopeNext = 0;
  tScopeLabel = label;
}

RecordScope::~RecordScope() {
  tScopeIds = std::move(savedIds);
  tScopeNext = savedNext;
  tScopeLabel = std::move(savedLabel);
}

std::vector<uint64_t> RecordScope::remaining() {
  if (tScopeNext >= tScopeIds.size())
    return {};
  return std::vector<uint64_t>(tScopeIds.begin() + tScopeNext, tScopeIds.end());
}

const CollectiveLabel &RecordScope::currentLabel() { return tScopeLabel; }

uint64_t RecordScope::take() {
  return tScopeNext < tScopeIds.size() ? tScopeIds[tScopeNext++] : 0;
}

Watchdog::Watchdog(FlightRecorder &recorder, double timeout,
                   std::string dumpDir, void (*beforeExit)())
    : recorder(recorder), timeout(timeout), dumpDir(std::move(dumpDir)),
      beforeExit(beforeExit) {
  thread = std::thread([this] { run(); });
}

Watchdog::~Watchdog() {
  stopping = true;
  thread.join();
}

void Watchdog::dump(bool toStderr) {
  if (dumped)
    return;
  dumped = true;
  std::string all = recorder.format();
  std::string where;
  if (!dumpDir.empty()) {
    std::string path = dumpDir + "/flight-recorder.rank" +
                       std::to_string(recorder.rank()) + ".txt";
    std::string tmp = path + ".tmp";
    if (FILE *f = std::fopen(tmp.c_str(), "w")) {
      std::fprintf(f, "rank %d of %d: the last collectives, oldest first\n%s",
                   recorder.rank(), recorder.size(), all.c_str());
      bool ok = std::fflush(f) == 0;
      ok &= std::fclose(f) == 0;
      if (ok && std::rename(tmp.c_str(), path.c_str()) == 0)
        where = " (all in " + path + ")";
      else
        std::remove(tmp.c_str());
    }
    if (where.empty())
      where = " (cannot write " + path + ": " + std::strerror(errno) + ")";
  }
  if (toStderr) {
    std::fprintf(stderr,
                 "fsdp-run: rank %d: flight recorder, last collectives%s:\n%s",
                 recorder.rank(), where.c_str(), recorder.format(8).c_str());
    std::fflush(stderr);
  }
  recorder.markDumped();
}

void Watchdog::run() {
  while (!stopping) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    recorder.heartbeat();
    if (recorder.dumpRequested())
      dump(/*toStderr=*/true);
    FlightRecorder::Record r;
    if (timeout <= 0.0 || !recorder.oldestStarted(r))
      continue;
    double waited = double(steadyNanos() - r.startedNanos) * 1e-9;
    if (waited < timeout)
      continue;
    std::string what = r.label.what.empty() ? r.kind : r.label.what;
    std::fprintf(stderr, "fsdp-run: rank %d: error: collective timeout: %s",
                 recorder.rank(), what.c_str());
    if (r.label.step > 0)
      std::fprintf(stderr, " at step %lld", (long long)r.label.step);
    if (r.label.kernel >= 0)
      std::fprintf(stderr, " (kernel #%lld)", (long long)r.label.kernel);
    std::fprintf(stderr,
                 " did not finish within %.1f s; another rank failed, stalled "
                 "or runs a different plan\n",
                 timeout);
    std::fflush(stderr);
    recorder.requestDump();
    dump(/*toStderr=*/true);
    if (recorder.claimReporter()) {
      recorder.waitForDumps(2.0);
      std::fprintf(stderr, "fsdp-run: rank %d: flight recorder: %s\n",
                   recorder.rank(), recorder.analyze().c_str());
      std::fflush(stderr);
      recorder.markReported();
    } else {
      // Exiting ends the job (mpirun): let the reporter finish first.
      recorder.waitForReport(3.0);
    }
    if (beforeExit)
      beforeExit();
    std::_Exit(3);
  }
}

namespace {
/// The same on every rank of the job.
std::string boardName(Communicator &comm) {
  for (const char *variable :
       {"PMIX_NAMESPACE", "OMPI_MCA_ess_base_jobid", "SLURM_JOB_ID"})
    if (const char *value = std::getenv(variable)) {
      std::string name = "fsdp-run.";
      for (const char *c = value; *c; ++c)
        name += std::isalnum((unsigned char)*c) ? *c : '_';
      return name;
    }
  uint64_t id = (uint64_t(getpid()) << 32) ^ uint64_t(steadyNanos());
  comm.broadcast(&id, sizeof(id), 0);
  return "fsdp-run." + std::to_string(id);
}
} // namespace

std::unique_ptr<Watchdog> startWatchdog(FlightRecorder &recorder,
                                        Communicator &comm, double timeout,
                                        const std::string &dumpDir,
                                        void (*beforeExit)()) {
  RecordScope scope(CollectiveLabel{0, -1, "progress-board set-up"});
  auto watchdog =
      std::make_unique<Watchdog>(recorder, timeout, dumpDir, beforeExit);
  std::string name = boardName(comm), error;
  registerTemporaryFile("/dev/shm/" + name);
  if (!recorder.attachBoard(name, error))
    std::fprintf(stderr,
                 "fsdp-run: rank %d: warning: no progress board (%s): a "
                 "timeout will not name the lagging rank\n",
                 comm.rank(), error.c_str());
  return watchdog;
}

} // namespace fsdp::rt
