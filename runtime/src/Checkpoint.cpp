//===- Checkpoint.cpp - sharded checkpoints written atomically ------------===//
//
// The writer: each rank's safetensors file (temporary, fsync, rename,
// directory fsync), a barrier that also carries any rank's failure, rank
// 0's manifest last, then --keep-last. The fault points (checkpointFault)
// lie between those steps. CheckpointResume.cpp reads them back;
// CheckpointJson.cpp has the manifest's JSON.
//
//===----------------------------------------------------------------------===//

#include "fsdp/runtime/Checkpoint.h"
#include "fsdp/runtime/FlightRecorder.h"
#include "fsdp/runtime/OutputFile.h"
#include "fsdp/runtime/PlanFormat.h"
#include "fsdp/runtime/SafeTensors.h"

#include "CheckpointFiles.h"
#include "SafeTensorsHeader.h"

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <csignal>
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

bool Checkpointer::prepare(std::string &error) {
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
  // Every rank: the directory exists for each once its own mkdir returns.
  if (mkdir(options.dir.c_str(), 0755) != 0 && errno != EEXIST) {
    error = options.dir +
            ": cannot create the checkpoint directory: " + std::strerror(errno);
    return false;
  }
  return checkWritableDirectory(options.dir, error);
}

bool Checkpointer::writeRankFile(const std::string &stepDir, int64_t step,
                                 ManifestFile &file, std::string &error) {
  int rank = comm.rank(), ranks = comm.size();
  std::vector<TensorToWrite> tensors;
  std::vector<FileChunk> data;
  TensorMetadata meta = {{"format", "fsdp-checkpoint"},
                         {"version", std::to_string(kCheckpointVersion)},
                         {"step", std::to_string(step)},
                         {"rank", std::to_string(rank)},
                         {"world_size", std::to_string(ranks)}};
  for (uint32_t u = 0; u < plan.units.size(); ++u) {
    plan::ShardRange range =
        plan::shardRange(plan.units[u].flatSize, rank, ranks);
    meta.push_back(
        {plan.units[u].name + "/range",
         std::to_string(range.begin) + ":" + std::to_string(range.end)});
    for (auto [part, buffer] : unitShardBuffers(plan, u)) {
      int64_t count = range.end - range.begin;
      data.push_back({nullptr, size_t(count) * sizeof(float),
                      [this, buffer = buffer, count](void *out) {
                        session.readBuffer(buffer, static_cast<float *>(out),
                                           count);
                      }});
      tensors.push_back({shardTensorName(plan.units[u].name, part),
                         TensorDType::F32,
                         {range.end - range.begin},
                         {}});
    }
  }
  std::string header = emitSafeTensorsHeader(tensors, meta);
  header.resize((header.size() + 7) / 8 * 8, ' ');
  unsigned char length[8];
  for (int i = 0; i < 8; ++i)
    length[i] = uint8_t(uint64_t(header.size()) >> (8 * i));
  std::vector<FileChunk> chunks = {{length, 8}, {header.data(), header.size()}};
  chunks.insert(chunks.end(), data.begin(), data.end());
  file.name = rankFileName(rank, ranks);
  file.rank = rank;
  FaultPoints faults{"mid-rank-file", "rank-file-written", step, rank};
  return writeFileAtomic(stepDir + "/" + file.name, chunks, faults, file.bytes,
                         file.crc32, error);
}

/// The barrier after every rank's file: every rank learns whether all
/// wrote theirs, and the error of the highest failing rank.
bool Checkpointer::agree(int64_t step, bool ok, std::string &error) {
  uint64_t failed;
  {
    RecordScope scope(CollectiveLabel{step, -1, "checkpoint barrier"});
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

bool Checkpointer::writeManifest(const std::string &stepDir, int64_t step,
                                 std::vector<ManifestFile> files,
                                 std::string &error) {
  Manifest manifest;
  manifest.step = step;
  manifest.worldSize = comm.size();
  manifest.planChecksum = plan.checksum;
  manifest.run = run;
  manifest.units = planLayout(plan);
  manifest.files = std::move(files);
  std::string text = emitManifest(manifest);
  std::vector<FileChunk> chunks = {{text.data(), text.size()}};
  uint64_t bytes;
  uint32_t crc;
  FaultPoints faults{"mid-manifest", "manifest-written", step, 0};
  return writeFileAtomic(stepDir + "/manifest.json", chunks, faults, bytes, crc,
                         error);
}

bool Checkpointer::write(int64_t step, std::string &error) {
  auto start = std::chrono::steady_clock::now();
  std::string stepDir = stepDirectory(options.dir, step);
  int rank = comm.rank();
  // A manifest left by an earlier run of this step would vouch for files
  // about to change: gone first (the checkpoint is rewritten whole).
  if (rank == 0)
    unlink((stepDir + "/manifest.json").c_str());
  ManifestFile file;
  bool ok = makeDirectory(stepDir, error) &&
            writeRankFile(stepDir, step, file, error);
  auto since = [](std::chrono::steady_clock::time_point t) {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t)
        .count();
  };
  double fileSeconds = since(start);
  checkpointFault("rank-file-renamed", step, rank);
  if (!agree(step, ok, error)) {
    unlink((stepDir + "/" + rankFileName(rank, comm.size())).c_str());
    return false;
  }
  // Every rank's size and CRC-32 to rank 0, one broadcast each.
  std::vector<ManifestFile> files(comm.size());
  for (int r = 0; r < comm.size(); ++r) {
    uint64_t fields[2] = {file.bytes, file.crc32};
    RecordScope scope(CollectiveLabel{step, -1, "checkpoint file sizes"});
    comm.broadcast(fields, sizeof(fields), r);
    files[r] = {rankFileName(r, comm.size()), r, fields[0],
                uint32_t(fields[1])};
  }
  checkpointFault("before-manifest", step, rank);
  ok = rank != 0 || writeManifest(stepDir, step, files, error);
  if (!agree(step, ok, error))
    return false;
  written = step;
  if (rank == 0 && options.keepLast > 0)
    pruneOld(step);
  uint64_t total = 0;
  for (const ManifestFile &f : files)
    total += f.bytes;
  char text[320];
  std::snprintf(text, sizeof(text),
                "checkpoint %s written: %d rank files, %.2f MiB, %.3f s "
                "(rank 0's file %.3f s)",
                stepDir.c_str(), comm.size(), double(total) / (1 << 20),
                since(start), fileSeconds);
  note = text;
  return true;
}

/// --keep-last M: every checkpoint older than the newest M complete ones
/// goes, its manifest first (it stops existing at once), never the one
/// just written.
void Checkpointer::pruneOld(int64_t step) {
  std::vector<int64_t> steps = listCheckpointSteps(options.dir);
  std::vector<int64_t> complete;
  for (int64_t s : steps)
    if (s <= step &&
        access((stepDirectory(options.dir, s) + "/manifest.json").c_str(),
               F_OK) == 0)
      complete.push_back(s);
  std::sort(complete.rbegin(), complete.rend());
  int64_t oldestKept = complete.size() > size_t(options.keepLast)
                           ? complete[size_t(options.keepLast) - 1]
                           : (complete.empty() ? step : complete.back());
  for (int64_t s : steps)
    if (s < oldestKept && s != step)
      removeCheckpoint(stepDirectory(options.dir, s));
}

namespace {
volatile sig_atomic_t gStopSignal = 0;

extern "C" void onStopSignal(int signal) {
  if (gStopSignal) {
    removeTemporaryFiles();
    _exit(128 + signal);
  }
  gStopSignal = signal;
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
