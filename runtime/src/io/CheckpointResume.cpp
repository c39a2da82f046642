//===- CheckpointResume.cpp - the newest complete checkpoint, loaded ------===//
//
// Rank 0 walks D/step-* from the newest: a checkpoint counts when its
// manifest parses and every rank file it lists has its size and CRC-32.
// The ranks take rank 0's choice, each reads that manifest from its own
// --resume directory and the ranks compare what they read (a copy at
// another path is the same checkpoint), each checks it against its own
// run (the same checks on every rank: the same error), and loads its
// shards, every rank but 0 checking the size and CRC-32 of each file it
// reads from first:
// of unit u, new rank k of N' owns [floor(kP/N'), floor((k+1)P/N')), and
// reads from each old rank file the part of that range the old rank owned
// (the same arithmetic at the old world size), through the mapped file.
//
//===----------------------------------------------------------------------===//

#include "fsdp/runtime/comm/Agreement.h"
#include "fsdp/runtime/comm/FlightRecorder.h"
#include "fsdp/runtime/io/Checkpoint.h"
#include "fsdp/runtime/io/SafeTensors.h"

#include "fsdp/runtime/support/RegularFile.h"
#include "io/CheckpointFiles.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>

namespace fsdp::rt {
namespace {
/// A manifest: a regular file only (RegularFile.h), at most 64 MiB.
bool readText(const std::string &path, std::string &text,
              std::string *why = nullptr) {
  std::string reason;
  bool ok = readRegularFile(path, "", uint64_t(64) << 20, text, reason);
  if (why)
    *why = reason;
  return ok;
}

std::string hex(uint64_t value, int digits) {
  char text[24];
  std::snprintf(text, sizeof(text), "%0*llx", digits,
                (unsigned long long)value);
  return text;
}

/// Why rank file `f` of `stepDir` is not the one its manifest lists (its
/// size and CRC-32; "" when it is).
std::string fileDifference(const std::string &stepDir, const ManifestFile &f) {
  uint64_t bytes = 0;
  uint32_t crc = 0;
  std::string why;
  if (!fileCrc32(stepDir + "/" + f.name, bytes, crc, why))
    return f.name + ": " + why;
  if (bytes != f.bytes)
    return f.name + ": " + std::to_string(bytes) +
           " bytes, the manifest says " + std::to_string(f.bytes);
  if (crc != f.crc32)
    return f.name + ": CRC-32 " + hex(crc, 8) + ", the manifest says " +
           hex(f.crc32, 8);
  return "";
}

/// Why checkpoint `stepDir` is not complete ("" when it is).
std::string incompleteReason(const std::string &stepDir, int64_t step,
                             Manifest &manifest) {
  std::string text, why;
  if (!readText(stepDir + "/manifest.json", text, &why))
    return why == std::string("cannot open: ") + std::strerror(ENOENT)
               ? "no manifest (an interrupted checkpoint)"
               : "manifest.json: " + why;
  if (!parseManifest(text, manifest, why))
    return "manifest.json: " + why;
  if (manifest.step != step)
    return "manifest.json is of step " + std::to_string(manifest.step);
  if (manifest.files.size() != size_t(manifest.worldSize))
    return "the manifest lists " + std::to_string(manifest.files.size()) +
           " files for " + std::to_string(manifest.worldSize) + " ranks";
  for (const ManifestFile &f : manifest.files) {
    if (f.name != rankFileName(int(f.rank), int(manifest.worldSize)) ||
        &f != &manifest.files[size_t(f.rank)])
      return "the manifest lists '" + f.name + "' out of place";
    std::string why = fileDifference(stepDir, f);
    if (!why.empty())
      return why;
  }
  return "";
}

/// Rank 0: the newest complete checkpoint's step, -1 when none; the ones
/// skipped go into `notes`.
int64_t chooseStep(const std::string &dir, std::vector<std::string> &notes) {
  std::vector<int64_t> steps = listCheckpointSteps(dir);
  for (auto it = steps.rbegin(); it != steps.rend(); ++it) {
    Manifest manifest;
    std::string stepDir = stepDirectory(dir, *it);
    std::string why = incompleteReason(stepDir, *it, manifest);
    if (why.empty())
      return *it;
    notes.push_back(stepDir + ": skipped: " + why);
  }
  return -1;
}

/// The first difference between the checkpoint's layout and the plan's.
std::string layoutDifference(const std::vector<ManifestUnit> &saved,
                             const std::vector<ManifestUnit> &plan) {
  if (saved.size() != plan.size())
    return std::to_string(saved.size()) + " units in the checkpoint, " +
           std::to_string(plan.size()) + " in the plan";
  for (size_t u = 0; u < saved.size(); ++u) {
    const ManifestUnit &a = saved[u], &b = plan[u];
    std::string where = "unit " + std::to_string(u) + ": ";
    if (a.name != b.name || a.flatSize != b.flatSize)
      return where + "'" + a.name + "' of " + std::to_string(a.flatSize) +
             " elements in the checkpoint, '" + b.name + "' of " +
             std::to_string(b.flatSize) + " in the plan";
    if (a.params.size() != b.params.size())
      return where + "'" + a.name + "' has " + std::to_string(a.params.size()) +
             " parameters in the "
             "checkpoint, " +
             std::to_string(b.params.size()) + " in the plan";
    for (size_t p = 0; p < a.params.size(); ++p) {
      const ManifestParam &x = a.params[p], &y = b.params[p];
      if (x.name != y.name || x.shape != y.shape || x.offset != y.offset)
        return where + "parameter " + std::to_string(p) + ": '" + x.name +
               "' " + shapeText(x.shape) + " at " + std::to_string(x.offset) +
               " in the checkpoint, '" + y.name + "' " + shapeText(y.shape) +
               " at " + std::to_string(y.offset) + " in the plan";
    }
  }
  return "";
}

std::string describeData(const RunIdentity &r) {
  std::string text = r.dataKind == "tokens"
                         ? r.dataSource + " (" + std::to_string(r.dataTokens) +
                               " tokens, hash " + hex(r.dataFingerprint, 16) +
                               ")"
                         : std::string("the synthetic teacher");
  return text + ", global batch " + std::to_string(r.globalBatch) + " x " +
         std::to_string(r.seq);
}

/// What differs between the run that wrote the checkpoint and this one
/// in a way that changes its numbers ("" when nothing).
std::string runDifference(const RunIdentity &a, const RunIdentity &b) {
  bool sameData = a.dataKind == b.dataKind &&
                  a.dataFingerprint == b.dataFingerprint &&
                  a.dataTokens == b.dataTokens &&
                  a.globalBatch == b.globalBatch && a.seq == b.seq;
  if (!sameData)
    return "the data differs: the checkpoint trained on " + describeData(a) +
           ", this run on " + describeData(b);
  if (a.seed != b.seed)
    return "the seed differs: " + std::to_string(a.seed) +
           " in the checkpoint, --seed " + std::to_string(b.seed) + " here";
  return "";
}

std::string number(double value, bool exact = false) {
  char text[32];
  std::snprintf(text, sizeof(text), exact ? "%.9g" : "%g", value);
  return text;
}

/// The optimizer's settings and the learning-rate schedule that differ
/// between the checkpoint's run `a` and this one `b`, each "name old ->
/// new". A manifest without the settings (an older one) is compared by
/// its `lr` field: --lr, or "compiled".
std::vector<std::string> hyperparameterChanges(const RunIdentity &a,
                                               const RunIdentity &b) {
  std::vector<std::string> changes;
  auto compare = [&](const char *name, const std::string &x,
                     const std::string &y) {
    if (x != y)
      changes.push_back(std::string(name) + " " + x + " -> " + y);
  };
  const OptimizerSettings &x = a.optimizer, &y = b.optimizer;
  if (!x.known || !y.known)
    compare("lr", a.lr, b.lr);
  // The plan holds its settings as floats, and the kernels apply them so:
  // --lr 0.01 over a plan compiled with lr=0.01 is no change.
  auto exact = [&](const char *name, double p, double q) {
    if (float(p) == float(q))
      return;
    bool close = number(p) == number(q);
    changes.push_back(std::string(name) + " " + number(p, close) + " -> " +
                      number(q, close));
  };
  if (x.known && y.known) {
    exact("lr", x.lr, y.lr);
    exact("beta1", x.beta1, y.beta1);
    exact("beta2", x.beta2, y.beta2);
    exact("eps", x.eps, y.eps);
    exact("weight-decay", x.weightDecay, y.weightDecay);
    if (x.gradClip && y.gradClip)
      exact("grad-clip", *x.gradClip, *y.gradClip);
    else
      compare("grad-clip", x.gradClip ? number(*x.gradClip) : "none",
              y.gradClip ? number(*y.gradClip) : "none");
  }
  compare("lr-schedule", "'" + a.lrSchedule + "'", "'" + b.lrSchedule + "'");
  return changes;
}

/// The hyperparameters' check: an error listing every change, or with
/// --resume-changed-hyperparameters a note for each.
bool checkHyperparameters(const RunIdentity &saved, const RunIdentity &run,
                          bool accept, std::string &error,
                          std::vector<std::string> &notes) {
  std::vector<std::string> changes = hyperparameterChanges(saved, run);
  if (changes.empty())
    return true;
  std::string list;
  for (const std::string &change : changes) {
    list += (list.empty() ? "" : ", ") + change;
    if (accept)
      notes.push_back("--resume-changed-hyperparameters: " + change);
  }
  if (accept)
    return true;
  error = "the optimizer's settings differ (the checkpoint's -> this "
          "run's): " +
          list +
          " (--lr, the compiled AdamW and grad-clip options, --lr-schedule, "
          "--warmup-steps, --min-lr, --steps); "
          "--resume-changed-hyperparameters continues with this run's";
  return false;
}

/// The checks of a chosen checkpoint against this run; `notes` gets what
/// differs harmlessly.
bool checkCompatible(const ResumePoint &point, const Plan &plan,
                     const RunIdentity &run, int ranks, bool accept,
                     std::string &error, std::vector<std::string> &notes) {
  const Manifest &m = point.manifest;
  auto fail = [&](const std::string &why) {
    error = "--resume " + point.stepDir + ": " + why;
    return false;
  };
  std::string layout = layoutDifference(m.units, planLayout(plan));
  if (!layout.empty())
    return fail("the layout differs from " + plan.path + "'s: " + layout);
  std::string differs = runDifference(m.run, run);
  if (!differs.empty())
    return fail(differs);
  if (!checkHyperparameters(m.run, run, accept, error, notes))
    return fail(error);
  // Another plan of the same layout at the same world size (recompiled
  // with other settings) resumes only where changes are accepted.
  std::string another = "written by plan " + hex(m.planChecksum, 8) + ", " +
                        plan.path + " is " + hex(plan.checksum, 8) +
                        " at the same world size (" + std::to_string(ranks) +
                        "): another plan";
  if (m.worldSize == ranks && m.planChecksum != plan.checksum) {
    if (!accept)
      return fail(another);
    notes.push_back(another + " (not bitwise)");
  }
  if (m.step >= run.steps)
    return fail("the checkpoint is at step " + std::to_string(m.step) +
                "; --steps " + std::to_string(run.steps) +
                " leaves nothing to train");
  if (m.worldSize != ranks)
    notes.push_back("written by " + std::to_string(m.worldSize) +
                    " ranks, resumed by " + std::to_string(ranks) +
                    ": shards re-split (not bitwise: the sums run in another "
                    "order)");
  if (m.run.threads != run.threads)
    notes.push_back("written with " + std::to_string(m.run.threads) +
                    " threads, resumed with " + std::to_string(run.threads) +
                    " (not bitwise)");
  return true;
}

/// Every rank reads the manifest of rank 0's choice from its own --resume
/// directory, and the ranks compare what they read (its size and CRC-32),
/// not their paths: a copy of the checkpoint at another path (a node's
/// local disk) is the same checkpoint, another checkpoint is not.
bool agreeOnManifest(const std::string &stepDir, int64_t step,
                     Communicator &comm, std::string &text,
                     std::string &error) {
  std::string path = stepDir + "/manifest.json", identity, why;
  if (readText(path, text, &why))
    identity = "step-" + std::to_string(step) + "/manifest.json of " +
               std::to_string(text.size()) + " bytes, CRC-32 " +
               hex(fastCrc32(text.data(), text.size()), 8);
  else
    identity = path + ": " + why;
  RecordScope scope(CollectiveLabel{0, -1, "resume manifest agreement"});
  std::string differs =
      checkRanksAgree(comm, {{"the --resume checkpoint", identity}});
  if (differs.empty())
    return true;
  error = differs + " (every rank resumes from the same checkpoint: one "
                    "directory, or copies of it)";
  return false;
}
} // namespace

bool findResumePoint(const std::string &dir, const Plan &plan,
                     const RunIdentity &run, Communicator &comm,
                     ResumePoint &point, std::string &error,
                     bool acceptChangedHyperparameters) {
  if (!checkpointsAvailable()) {
    error = "--resume " + dir + ": " + safeTensorsUnavailableReason();
    return false;
  }
  point.dir = dir;
  int64_t step = comm.rank() == 0 ? chooseStep(dir, point.notes) : -1;
  {
    RecordScope scope(CollectiveLabel{0, -1, "resume step broadcast"});
    comm.broadcast(&step, sizeof(step), 0);
  }
  if (step < 0) {
    error = "--resume " + dir + ": no complete checkpoint";
    for (const std::string &n : point.notes)
      error += "; " + n;
    return false;
  }
  point.stepDir = stepDirectory(dir, step);
  std::string text, why;
  if (!agreeOnManifest(point.stepDir, step, comm, text, error))
    return false;
  if (!parseManifest(text, point.manifest, why)) {
    error = point.stepDir + "/manifest.json: " + why;
    return false;
  }
  return checkCompatible(point, plan, run, comm.size(),
                         acceptChangedHyperparameters, error, point.notes);
}

namespace {
/// The rank files of a checkpoint, opened when first read.
struct OldFiles {
  const ResumePoint &point;
  /// Rank 0 checked every file's size and CRC-32 when it chose the point.
  bool checked;
  std::vector<std::unique_ptr<SafeTensorsReader>> readers;
  std::vector<bool> verified;
  /// Every other rank checks, before it reads one, that a file it reads
  /// from is the one the manifest lists (its copy may differ).
  bool verify(int rank, std::string &error) {
    if (checked || verified[size_t(rank)])
      return true;
    std::string why =
        fileDifference(point.stepDir, point.manifest.files[size_t(rank)]);
    if (!why.empty()) {
      error = "--resume " + point.stepDir + ": " + why;
      return false;
    }
    verified[size_t(rank)] = true;
    return true;
  }
  SafeTensorsReader *get(int rank, std::string &error) {
    if (readers.empty()) {
      readers.resize(size_t(point.manifest.worldSize));
      verified.resize(readers.size());
    }
    if (!readers[rank]) {
      auto reader = std::make_unique<SafeTensorsReader>();
      if (!reader->open(point.stepDir + "/" +
                            point.manifest.files[size_t(rank)].name,
                        error))
        return nullptr;
      readers[rank] = std::move(reader);
    }
    return readers[rank].get();
  }
};

/// The range of unit `unit` old rank `r`'s file holds: its "UNIT/range"
/// metadata ("begin:end", which a hybrid-sharded run's files need: their
/// layout is the shard group's), else the full-sharding layout of the old
/// world size.
plan::ShardRange oldRange(const SafeTensorsReader &reader, const UnitDesc &unit,
                          int64_t r, int64_t oldRanks) {
  plan::ShardRange range = plan::shardRange(unit.flatSize, r, oldRanks);
  for (const auto &[key, value] : reader.metadata()) {
    if (key != unit.name + "/range")
      continue;
    long long begin = 0, end = 0;
    char tail = 0;
    if (std::sscanf(value.c_str(), "%lld:%lld%c", &begin, &end, &tail) == 2 &&
        0 <= begin && begin <= end && end <= unit.flatSize)
      range = {begin, end};
  }
  return range;
}

/// The expert slice whose flat parameter old rank file `reader` holds a
/// range of, for unit `unit`: its "UNIT/expert_slice" metadata (an
/// expert-parallel unit's), else 0 (every other unit is one "slice").
/// -1 for a value that is not a slice number: its file matches no rank.
int64_t oldSlice(const SafeTensorsReader &reader, const UnitDesc &unit) {
  for (const auto &[key, value] : reader.metadata()) {
    if (key != unit.name + "/expert_slice")
      continue;
    long long slice = -1;
    char tail = 0;
    return std::sscanf(value.c_str(), "%lld%c", &slice, &tail) == 1 &&
                   slice >= 0
               ? slice
               : -1;
  }
  return 0;
}

/// Fills `out` (this rank's shard of unit `unit`, part `part`, of expert
/// slice `slice`: 0 outside expert parallelism) from every old rank of
/// that slice whose shard overlaps it.
bool loadPart(OldFiles &files, const UnitDesc &unit, const char *part,
              plan::ShardRange mine, int64_t slice, float *out,
              std::string &error) {
  int64_t oldRanks = files.point.manifest.worldSize;
  std::string name = shardTensorName(unit.name, part);
  for (int64_t r = 0; r < oldRanks; ++r) {
    SafeTensorsReader *reader = files.get(int(r), error);
    if (!reader)
      return false;
    // Another expert slice's range covers the same offsets: not ours.
    if (oldSlice(*reader, unit) != slice)
      continue;
    plan::ShardRange old = oldRange(*reader, unit, r, oldRanks);
    int64_t lo = std::max(old.begin, mine.begin),
            hi = std::min(old.end, mine.end);
    if (lo >= hi)
      continue;
    if (!files.verify(int(r), error))
      return false;
    const TensorInfo *t = reader->find(name);
    if (!t || t->dtype != TensorDType::F32 ||
        t->shape != std::vector<int64_t>{old.end - old.begin}) {
      error = reader->path() + ": no F32 tensor '" + name + "' of " +
              std::to_string(old.end - old.begin) + " elements";
      return false;
    }
    reader->readFloats(*t, lo - old.begin, hi - lo, 1, out + (lo - mine.begin));
  }
  return true;
}
} // namespace

bool loadCheckpoint(const ResumePoint &point, const Plan &plan,
                    Session &session, Communicator &comm, std::string &error) {
  OldFiles files{point, comm.rank() == 0, {}, {}};
  bool ok = true;
  for (uint32_t u = 0; ok && u < plan.units.size(); ++u) {
    const UnitDesc &unit = plan.units[u];
    plan::ShardRange mine = plan.shardOf(u, comm.rank());
    for (auto [part, buffer] : unitShardBuffers(plan, u)) {
      std::vector<float> host(plan.buffers[buffer].numElements(), 0.0f);
      if (!(ok = loadPart(files, unit, part, mine,
                          plan.unitExpertSlice(u, comm.rank()), host.data(),
                          error)))
        break;
      session.writeBuffer(buffer, host);
    }
  }
  RecordScope scope(CollectiveLabel{0, -1, "resume load agreement"});
  return allRanksSucceeded(comm, ok, error);
}

} // namespace fsdp::rt
