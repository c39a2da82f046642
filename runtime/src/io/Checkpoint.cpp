//===- Checkpoint.cpp - sharded checkpoints written atomically ------------===//
//
// The writer: each rank's safetensors file (temporary, fsync, rename,
// directory fsync), a barrier that also carries any rank's failure, rank
// 0's manifest last, then --keep-last. The fault points (checkpointFault)
// lie between those steps. prepare() claims the directory (rank 0's lock,
// found by every other rank in its own: CheckpointLock.h) and allocates at
// setup what every write needs (the staging buffer, the texts with room
// for any step: see PreparedJson.h), so that a write allocates nothing
// while training.
// CheckpointResume.cpp reads them back; CheckpointJson.cpp has the
// manifest's JSON.
//
//===----------------------------------------------------------------------===//

#include "fsdp/runtime/io/Checkpoint.h"
#include "fsdp/runtime/PlanFormat.h"
#include "fsdp/runtime/comm/Agreement.h"
#include "fsdp/runtime/comm/FlightRecorder.h"
#include "fsdp/runtime/io/SafeTensors.h"
#include "fsdp/runtime/support/OutputFile.h"

#include "io/CheckpointFiles.h"
#include "io/CheckpointLock.h"
#include "io/PreparedJson.h"
#include "io/SafeTensorsHeader.h"

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <climits>
#include <csignal>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

namespace fsdp::rt {

std::vector<ManifestUnit> planLayout(const Plan &plan) {
  std::vector<ManifestUnit> units;
  for (const UnitDesc &unit : plan.units)
    units.push_back({unit.name, unit.flatSize, {}});
  for (const ParamDesc &param : plan.params)
    units[param.unit].params.push_back(
        {param.name, param.shape, param.unitOffset});
  return units;
}

OptimizerSettings optimizerSettings(const Plan &plan,
                                    std::optional<double> lrOverride) {
  using plan::Opcode;
  OptimizerSettings settings;
  for (const Instruction &inst : plan.program) {
    Opcode op = inst.kernel->opcode;
    auto param = [&](const char *name) {
      return inst.params[plan::paramIndex(op, name)];
    };
    if ((op == Opcode::AdamW || op == Opcode::AdamWShard) && !settings.known)
      settings = {true,
                  lrOverride.value_or(param("lr")),
                  param("beta1"),
                  param("beta2"),
                  param("eps"),
                  param("weight_decay"),
                  settings.gradClip};
    else if (op == Opcode::ClipCoefficient && !settings.gradClip)
      settings.gradClip = param("max_norm");
  }
  return settings;
}

std::string shardTensorName(const std::string &unit, const char *part) {
  return unit + "/" + part;
}

std::string rankFileName(int rank, int worldSize) {
  return "rank-" + std::to_string(rank) + "-of-" + std::to_string(worldSize) +
         ".safetensors";
}

std::string stepDirectory(const std::string &dir, int64_t step) {
  return dir + "/step-" + std::to_string(step);
}

void checkpointFault(const char *point, int64_t step, int rank) {
  const char *spec = std::getenv("FSDP_CHECKPOINT_FAULT");
  if (!spec || !*spec)
    return;
  std::string text = spec, name = text.substr(0, text.find(':'));
  long long atStep = -1, atRank = 0;
  size_t colon = text.find(':');
  if (colon != std::string::npos)
    std::sscanf(text.c_str() + colon + 1, "%lld:%lld", &atStep, &atRank);
  if (name != point || (atStep >= 0 && atStep != step) || atRank != rank)
    return;
  std::fprintf(stderr,
               "fsdp-run: rank %d: FSDP_CHECKPOINT_FAULT: SIGKILL at %s of "
               "the checkpoint of step %lld\n",
               rank, point, (long long)step);
  std::fflush(stderr);
  raise(SIGKILL);
}

/// Per unit, the buffers a rank file holds: its shard and AdamW moments.
std::vector<std::pair<const char *, uint32_t>>
unitShardBuffers(const Plan &plan, uint32_t unit) {
  std::vector<std::pair<const char *, uint32_t>> parts = {
      {"param", plan.units[unit].shardBuffer}};
  for (size_t b = 0; b < plan.buffers.size(); ++b) {
    const BufferDesc &buffer = plan.buffers[b];
    if (buffer.unit != int32_t(unit))
      continue;
    if (buffer.kind == plan::BufferKind::AdamM)
      parts.push_back({"adam_m", uint32_t(b)});
    else if (buffer.kind == plan::BufferKind::AdamV)
      parts.push_back({"adam_v", uint32_t(b)});
  }
  return parts;
}

/// What write() uses, allocated by prepare().
struct Checkpointer::Prepared {
  /// The rank file's tensors go through it from the arena to the file.
  std::vector<char> staging;
  unsigned char length[8] = {};
  /// The rank file: [0] its header's length, [1] the header, then each
  /// tensor's data (a fill from the arena).
  std::vector<FileChunk> rankChunks;
  PreparedJson header;
  int headerStep = -1;
  /// Rank 0's manifest: its step and each rank file's size and CRC-32.
  PreparedJson manifest;
  int manifestStep = -1;
  std::vector<int> fileBytes, fileCrcs;
  std::vector<FileChunk> manifestChunks;
  /// Every rank's file, with the figures of the last write.
  std::vector<ManifestFile> files;
  /// The step directories under the checkpoint directory, ascending: the
  /// ones there at setup and those written since (rank 0, --keep-last).
  std::vector<int64_t> steps;
  /// The flight recorder's labels of the write's collectives (their step
  /// set at each write; the recorder's records copy them, as they do every
  /// collective's).
  CollectiveLabel barrier{0, -1, "checkpoint barrier"},
      sizes{0, -1, "checkpoint file sizes"};
  /// Rank 0: the directory's lock, held while the run lasts.
  CheckpointLock lock;
};

namespace {
/// The widest values the prepared texts hold: their room is reserved.
constexpr char kWidestStep[] = "9223372036854775807";
constexpr uint64_t kWidestBytes = UINT64_MAX;
constexpr char kWidestCrc[] = "ffffffff";
/// What the checkpoint directory's path leaves for "/step-<k>/<file>.tmp".
constexpr size_t kLongestSuffix = 96;

/// kStagingBytes, or FSDP_CHECKPOINT_STAGING=BYTES (testing only: a small
/// buffer splits every tensor into pieces), rounded down to whole floats.
size_t stagingLimit() {
  const char *text = std::getenv("FSDP_CHECKPOINT_STAGING");
  long long bytes = text ? std::atoll(text) : 0;
  return bytes >= 4 ? size_t(bytes) / 4 * 4 : kStagingBytes;
}

/// A path formatted into `out` on the stack (prepare() checked that the
/// checkpoint directory leaves room for every path a write makes).
[[gnu::format(printf, 2, 3)]] void formatPath(char (&out)[PATH_MAX],
                                              const char *format, ...) {
  va_list args;
  va_start(args, format);
  std::vsnprintf(out, sizeof(out), format, args);
  va_end(args);
}
} // namespace

Checkpointer::Checkpointer(const Plan &plan, Session &session,
                           Communicator &comm, CheckpointOptions options,
                           RunIdentity run)
    : plan(plan), session(session), comm(comm), options(std::move(options)),
      run(std::move(run)), prepared(std::make_unique<Prepared>()) {}

Checkpointer::~Checkpointer() = default;

bool Checkpointer::prepare(std::string &error) {
  RecordScope scope(CollectiveLabel{0, -1, "checkpoint directory agreement"});
  bool ok = checkSetup(error);
  if (!allRanksSucceeded(comm, ok, error) || !claimDirectory(error))
    return false;
  Prepared &p = *prepared;
  for (int r = 0; r < comm.size(); ++r)
    p.files.push_back({rankFileName(r, comm.size()), r, 0, 0});
  // --keep-last M: rank 0's list of the step directories, pruned after
  // each write to those here at setup, the M kept and the one written:
  // room for that (M at most the writes this run makes), never one entry
  // per planned step (--steps may be 10^12).
  if (options.keepLast > 0 && comm.rank() == 0) {
    int64_t writes = (options.every > 0 ? run.steps / options.every : 0) + 2;
    p.steps = listCheckpointSteps(options.dir);
    p.steps.reserve(p.steps.size() + 2 +
                    size_t(std::min(options.keepLast, writes)));
  }
  note.reserve(PATH_MAX + 160);
  ok = prepareRankFile(error) && (comm.rank() != 0 || prepareManifest(error));
  return allRanksSucceeded(comm, ok, error);
}

/// What this rank can check alone: the build, the plan's shards, the
/// path's length.
bool Checkpointer::checkSetup(std::string &error) {
  if (!checkpointsAvailable()) {
    error = "--checkpoint-dir " + options.dir + ": " +
            safeTensorsUnavailableReason();
    return false;
  }
  for (uint32_t u = 0; u < plan.units.size(); ++u)
    for (auto [part, buffer] : unitShardBuffers(plan, u))
      if (plan.buffers[buffer].dtype != plan::DType::F32) {
        error = plan.path + ": unit '" + plan.units[u].name + "': its " + part +
                " shard is not f32 (checkpoints hold f32 shards)";
        return false;
      }
  if (options.dir.size() + kLongestSuffix >= PATH_MAX) {
    error = options.dir + ": the checkpoint directory's path is too long";
    return false;
  }
  return true;
}

/// Rank 0 creates the directory and takes its lock (one job writes it);
/// every other rank must find that lock, with this job's id, in its own
/// --checkpoint-dir: the ranks write into one directory, whatever its
/// path on each node. A collective; the same error on every rank.
bool Checkpointer::claimDirectory(std::string &error) {
  bool lead = comm.rank() == 0, created = false;
  bool ok = !lead ||
            (((created = mkdir(options.dir.c_str(), 0755) == 0) ||
              errno == EEXIST || failCreate(error)) &&
             checkWritableDirectory(options.dir, error) &&
             prepared->lock.acquire(options.dir, comm.size(), lockNote, error));
  if (allRanksSucceeded(comm, ok, error)) {
    std::string lock = broadcastText(comm, prepared->lock.text(), 0);
    std::string leadDir = broadcastText(comm, options.dir, 0);
    ok = lead || (findLock(lock, leadDir, error) &&
                  checkWritableDirectory(options.dir, error));
    if (allRanksSucceeded(comm, ok, error))
      return true;
  }
  // Refused: nothing of this run is left in the directory.
  prepared->lock.release();
  if (created)
    rmdir(options.dir.c_str());
  return false;
}

bool Checkpointer::failCreate(std::string &error) {
  error = options.dir +
          ": cannot create the checkpoint directory: " + std::strerror(errno);
  return false;
}

/// Whether this rank's --checkpoint-dir holds rank 0's lock `lock` (rank 0
/// writes into `leadDir`). A shared filesystem may show another node's new
/// file a moment late: a missing or other lock is read again for up to
/// two seconds.
bool Checkpointer::findLock(const std::string &lock, const std::string &leadDir,
                            std::string &error) {
  std::string text, why;
  for (int attempt = 0; attempt < 20; ++attempt) {
    if (attempt)
      usleep(100000);
    if (readCheckpointLock(options.dir, text, why) && text == lock)
      return true;
  }
  if (why.empty())
    why = std::string(kCheckpointLockName) + " is another job's (" +
          describeLockOwner(text) + ")";
  error = "--checkpoint-dir " + options.dir +
          " is not the directory rank 0 writes (" + leadDir +
          "): it lacks rank 0's lock (" + why +
          "); every rank writes its file into one directory that all share "
          "(on several nodes: a shared filesystem, mounted at any path)";
  return false;
}

/// The rank file's tensors and metadata, its header prepared for any step,
/// and the staging buffer for its largest tensor (at most kStagingBytes).
bool Checkpointer::prepareRankFile(std::string &error) {
  int rank = comm.rank(), ranks = comm.size();
  Prepared &p = *prepared;
  std::vector<TensorToWrite> tensors;
  TensorMetadata meta = {{"format", "fsdp-checkpoint"},
                         {"version", std::to_string(kCheckpointVersion)},
                         {"step", "0"},
                         {"rank", std::to_string(rank)},
                         {"world_size", std::to_string(ranks)}};
  p.rankChunks = {{p.length, 8}, {nullptr, 0}};
  size_t largest = 0;
  for (uint32_t u = 0; u < plan.units.size(); ++u) {
    plan::ShardRange range = plan.shardOf(u, rank);
    meta.push_back(
        {plan.units[u].name + "/range",
         std::to_string(range.begin) + ":" + std::to_string(range.end)});
    // An expert-parallel unit's range is of one expert slice's flat
    // parameter: which slice, for resume to read from its own slice's
    // files (docs/runtime.md). Absent elsewhere, so that other plans'
    // files keep their bytes.
    if (plan.units[u].expertParallel)
      meta.push_back({plan.units[u].name + "/expert_slice",
                      std::to_string(plan.unitExpertSlice(u, rank))});
    for (auto [part, buffer] : unitShardBuffers(plan, u)) {
      size_t bytes = size_t(range.end - range.begin) * sizeof(float);
      largest = std::max(largest, bytes);
      p.rankChunks.push_back(
          {nullptr, bytes,
           [this, buffer = buffer](void *out, size_t first, size_t n) {
             session.readBufferRange(buffer, int64_t(first / sizeof(float)),
                                     int64_t(n / sizeof(float)),
                                     static_cast<float *>(out));
           }});
      tensors.push_back({shardTensorName(plan.units[u].name, part),
                         TensorDType::F32,
                         {range.end - range.begin},
                         {}});
    }
  }
  if (!p.header.prepare(emitSafeTensorsHeader(tensors, meta), -1, false) ||
      (p.headerStep = p.header.slot("/__metadata__/step")) < 0) {
    error = options.dir + ": cannot prepare the rank files' header";
    return false;
  }
  p.header.setString(p.headerStep, kWidestStep);
  p.header.reserve(8); // and its padding
  p.staging.assign(std::min(largest, stagingLimit()), 0);
  return true;
}

/// Rank 0's manifest with every field but the step and the files' figures,
/// prepared for any of those.
bool Checkpointer::prepareManifest(std::string &error) {
  Prepared &p = *prepared;
  Manifest manifest;
  manifest.worldSize = comm.size();
  manifest.planChecksum = plan.checksum;
  manifest.run = run;
  manifest.units = planLayout(plan);
  manifest.files = p.files;
  bool ok = p.manifest.prepare(emitManifest(manifest), 1, true) &&
            (p.manifestStep = p.manifest.slot("/step")) >= 0;
  for (int r = 0; ok && r < comm.size(); ++r) {
    std::string at = "/files/" + std::to_string(r) + "/";
    p.fileBytes.push_back(p.manifest.slot(at + "bytes"));
    p.fileCrcs.push_back(p.manifest.slot(at + "crc32"));
    ok = p.fileBytes.back() >= 0 && p.fileCrcs.back() >= 0;
  }
  if (!ok) {
    error = options.dir + ": cannot prepare the manifest";
    return false;
  }
  p.manifest.setNumber(p.manifestStep, uint64_t(INT64_MAX));
  for (int r = 0; r < comm.size(); ++r) {
    p.manifest.setNumber(p.fileBytes[r], kWidestBytes);
    p.manifest.setString(p.fileCrcs[r], kWidestCrc);
  }
  p.manifest.reserve(1);
  p.manifestChunks = {{nullptr, 0}};
  return true;
}

bool Checkpointer::writeRankFile(const char *stepDir, int64_t step,
                                 ManifestFile &file, std::string &error) {
  Prepared &p = *prepared;
  char number[24], path[PATH_MAX];
  std::snprintf(number, sizeof(number), "%lld", (long long)step);
  p.header.setString(p.headerStep, number);
  const std::string &header = p.header.print(8);
  for (int i = 0; i < 8; ++i)
    p.length[i] = uint8_t(uint64_t(header.size()) >> (8 * i));
  p.rankChunks[1].data = header.data();
  p.rankChunks[1].bytes = header.size();
  formatPath(path, "%s/%s", stepDir, p.files[size_t(comm.rank())].name.c_str());
  FaultPoints faults{"mid-rank-file", "rank-file-written", step, comm.rank()};
  return writeFileAtomic(path, p.rankChunks,
                         {p.staging.data(), p.staging.size()}, faults,
                         file.bytes, file.crc32, error);
}

/// The barrier after every rank's file: every rank learns whether all
/// wrote theirs, and the error of the highest failing rank.
bool Checkpointer::agree(int64_t step, bool ok, std::string &error) {
  uint64_t failed;
  {
    prepared->barrier.step = step;
    RecordScope scope(prepared->barrier);
    failed = comm.allReduceMax(ok ? 0 : uint64_t(comm.rank()) + 1);
  }
  if (!failed)
    return true;
  char text[1024] = {};
  std::snprintf(text, sizeof(text), "%s", error.c_str());
  RecordScope scope(CollectiveLabel{step, -1, "checkpoint error broadcast"});
  comm.broadcast(text, sizeof(text), int(failed - 1));
  error = text;
  return false;
}

bool Checkpointer::writeManifest(const char *stepDir, int64_t step,
                                 std::string &error) {
  Prepared &p = *prepared;
  p.manifest.setNumber(p.manifestStep, uint64_t(step));
  for (size_t r = 0; r < p.files.size(); ++r) {
    char crc[16];
    std::snprintf(crc, sizeof(crc), "%08x", p.files[r].crc32);
    p.manifest.setNumber(p.fileBytes[r], p.files[r].bytes);
    p.manifest.setString(p.fileCrcs[r], crc);
  }
  const std::string &text = p.manifest.print();
  p.manifestChunks[0].data = text.data();
  p.manifestChunks[0].bytes = text.size();
  char path[PATH_MAX];
  formatPath(path, "%s/manifest.json", stepDir);
  uint64_t bytes;
  uint32_t crc;
  FaultPoints faults{"mid-manifest", "manifest-written", step, 0};
  return writeFileAtomic(path, p.manifestChunks, {}, faults, bytes, crc, error);
}

bool Checkpointer::write(int64_t step, std::string &error) {
  auto start = std::chrono::steady_clock::now();
  Prepared &p = *prepared;
  char stepDir[PATH_MAX], path[PATH_MAX];
  formatPath(stepDir, "%s/step-%lld", options.dir.c_str(), (long long)step);
  int rank = comm.rank();
  // A manifest left by an earlier run of this step would vouch for files
  // about to change: gone first (the checkpoint is rewritten whole).
  formatPath(path, "%s/manifest.json", stepDir);
  if (rank == 0)
    unlink(path);
  noteStep(step);
  ManifestFile file;
  bool ok = makeDirectory(stepDir, error) &&
            writeRankFile(stepDir, step, file, error);
  auto since = [](std::chrono::steady_clock::time_point t) {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t)
        .count();
  };
  double fileSeconds = since(start);
  checkpointFault("rank-file-renamed", step, rank);
  if (!agree(step, ok, error))
    return discardStep(stepDir);
  // Every rank's size and CRC-32 to rank 0, one broadcast each.
  p.sizes.step = step;
  for (int r = 0; r < comm.size(); ++r) {
    uint64_t fields[2] = {file.bytes, file.crc32};
    RecordScope scope(p.sizes);
    comm.broadcast(fields, sizeof(fields), r);
    p.files[size_t(r)].bytes = fields[0];
    p.files[size_t(r)].crc32 = uint32_t(fields[1]);
  }
  checkpointFault("before-manifest", step, rank);
  ok = rank != 0 || writeManifest(stepDir, step, error);
  // Without its manifest the step is no checkpoint: its files go too.
  if (!agree(step, ok, error))
    return discardStep(stepDir);
  written = step;
  if (rank == 0 && options.keepLast > 0)
    pruneOld(step);
  uint64_t total = 0;
  for (const ManifestFile &f : p.files)
    total += f.bytes;
  char text[PATH_MAX + 160];
  std::snprintf(text, sizeof(text),
                "checkpoint %s written: %d rank files, %.2f MiB, %.3f s "
                "(rank 0's file %.3f s)",
                stepDir, comm.size(), double(total) / (1 << 20), since(start),
                fileSeconds);
  note.assign(text); // within the room prepare() reserved
  return true;
}

/// A failed write: this rank's file of the step goes, and the step's
/// directory with the last of them (each rank removes its file, then tries
/// the directory: whichever comes last finds it empty). Returns false.
bool Checkpointer::discardStep(const char *stepDir) {
  char path[PATH_MAX];
  formatPath(path, "%s/%s", stepDir,
             prepared->files[size_t(comm.rank())].name.c_str());
  unlink(path);
  rmdir(stepDir);
  return false;
}

/// Step `step`'s directory among the known ones (sorted; room reserved),
/// where --keep-last prunes them (rank 0).
void Checkpointer::noteStep(int64_t step) {
  std::vector<int64_t> &steps = prepared->steps;
  if (options.keepLast == 0 || comm.rank() != 0)
    return;
  auto at = std::lower_bound(steps.begin(), steps.end(), step);
  // Never more than prepare() made room for (nothing allocated while
  // training); the bound holds, this only guards it.
  if ((at == steps.end() || *at != step) && steps.size() < steps.capacity())
    steps.insert(at, step);
}

/// --keep-last M: every checkpoint older than the newest M complete ones
/// goes, its manifest first (it stops existing at once), never the one
/// just written.
void Checkpointer::pruneOld(int64_t step) {
  std::vector<int64_t> &steps = prepared->steps;
  char path[PATH_MAX];
  int64_t kept = 0, oldestKept = step;
  for (auto it = steps.rbegin(); it != steps.rend() && kept < options.keepLast;
       ++it) {
    formatPath(path, "%s/step-%lld/manifest.json", options.dir.c_str(),
               (long long)*it);
    if (*it <= step && access(path, F_OK) == 0) {
      oldestKept = *it;
      ++kept;
    }
  }
  auto gone = [&](int64_t s) {
    if (s >= oldestKept || s == step)
      return false;
    formatPath(path, "%s/step-%lld", options.dir.c_str(), (long long)s);
    removeCheckpoint(path);
    return true;
  };
  steps.erase(std::remove_if(steps.begin(), steps.end(), gone), steps.end());
}

namespace {
volatile sig_atomic_t gStopSignal = 0;

extern "C" void onStopSignal(int signal) {
  if (gStopSignal) {
    removeTemporaryFiles();
    _exit(128 + signal);
  }
  gStopSignal = signal;
  removeReservedOutputs();
}
} // namespace

void installStopSignals() {
  struct sigaction action = {};
  action.sa_handler = onStopSignal;
  sigemptyset(&action.sa_mask);
  sigaction(SIGTERM, &action, nullptr);
  sigaction(SIGINT, &action, nullptr);
}

int stopSignal() { return gStopSignal; }

bool StepControl::afterStep(int64_t step, Communicator &comm, bool &stop,
                            std::string &error) {
  uint64_t signal = uint64_t(stopSignal());
  if (comm.size() > 1) {
    RecordScope scope(CollectiveLabel{step, -1, "stop-signal all-reduce"});
    signal = comm.allReduceMax(signal);
  }
  stop = signal != 0;
  stoppedBy = int(signal);
  bool due = checkpointer && (stop || checkpointer->due(step, lastStep)) &&
             checkpointer->lastWritten() != step;
  return !due || checkpointer->write(step, error);
}

} // namespace fsdp::rt
