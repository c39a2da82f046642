//===- Checkpoint.h - sharded checkpoints and exact resume ------*- C++ -*-===//
//
// `fsdp-run --checkpoint-dir D --checkpoint-every K` writes, every K steps
// and at the end, D/step-<k>/: one safetensors file per rank
// (rank-<r>-of-<N>.safetensors: per unit its shard's valid elements of the
// fp32 master parameters and of AdamW's two moments) and, last, rank 0's
// manifest.json (the layout, the run's identity, every file's size and
// CRC-32). Every file goes to a temporary name, is fsynced and renamed,
// its directory fsynced; the manifest follows a barrier after every rank's
// file: a checkpoint without its manifest does not exist. Rank 0 holds
// D/fsdp-run.lock while the run lasts (one job per directory), and every
// rank checks that its D is rank 0's. `--resume D`
// continues from the newest complete one; at another world size each rank
// reads, from the old files, the byte ranges of its new shard (the
// floor(kP/N) layout makes that arithmetic). docs/runtime.md has the
// layout and the rules.
//
// The manifest is JSON (nlohmann-json); a build without it refuses
// checkpoints with a reason (checkpointsAvailable() is false).
//
//===----------------------------------------------------------------------===//

#ifndef FSDP_RUNTIME_CHECKPOINT_H
#define FSDP_RUNTIME_CHECKPOINT_H

#include "fsdp/runtime/comm/Communicator.h"
#include "fsdp/runtime/exec/Session.h"
#include "fsdp/runtime/plan/Plan.h"

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace fsdp::rt {

inline constexpr int kCheckpointVersion = 1;

/// The optimizer's settings that a step applies: AdamW's (`lr` is --lr
/// where given, else the compiled one) and gradient clipping's largest
/// global norm (none: no clipping). Not `known` for a plan without an
/// optimizer, nor in a manifest written before they were recorded.
struct OptimizerSettings {
  bool known = false;
  double lr = 0.0, beta1 = 0.0, beta2 = 0.0, eps = 0.0, weightDecay = 0.0;
  std::optional<double> gradClip;
};
/// The plan's optimizer settings, with `lrOverride` (--lr) where given.
OptimizerSettings optimizerSettings(const Plan &plan,
                                    std::optional<double> lrOverride);

/// What a checkpoint records of the run besides its shards: what resume
/// checks (a difference is an error) and what it only reports.
struct RunIdentity {
  uint64_t seed = 0;
  /// "tokens" (dataSource, its fingerprint and size) or "teacher".
  std::string dataKind = "teacher", dataSource;
  uint64_t dataFingerprint = 0, dataTokens = 0;
  int64_t globalBatch = 0, seq = 0;
  std::string lr = "compiled"; ///< --lr as %.17g, or "compiled"
  /// --lr-schedule, --warmup-steps and, for a decay, --min-lr and --steps.
  std::string lrSchedule = "constant, warmup 0";
  int64_t steps = 0; ///< --steps of the run that wrote it
  int64_t threads = 0;
  OptimizerSettings optimizer;
};

struct ManifestParam {
  std::string name;
  std::vector<int64_t> shape;
  int64_t offset = 0; ///< its first element in its unit's flat tensor
};
struct ManifestUnit {
  std::string name;
  int64_t flatSize = 0;
  std::vector<ManifestParam> params;
};
struct ManifestFile {
  std::string name; ///< relative to the step's directory
  int64_t rank = 0;
  uint64_t bytes = 0;
  uint32_t crc32 = 0;
};
struct Manifest {
  int64_t version = kCheckpointVersion;
  int64_t step = 0, worldSize = 1;
  uint32_t planChecksum = 0;
  RunIdentity run;
  std::vector<ManifestUnit> units;
  std::vector<ManifestFile> files;
};

/// Whether this build writes and reads checkpoints (it has nlohmann-json).
bool checkpointsAvailable();
/// The manifest as JSON text (pretty-printed).
std::string emitManifest(const Manifest &manifest);
/// Parses and checks the types of every field; false with `why`.
bool parseManifest(const std::string &text, Manifest &manifest,
                   std::string &why);

/// The plan's layout, as a manifest records it.
std::vector<ManifestUnit> planLayout(const Plan &plan);
/// The tensor of unit `unit` holding `part` ("param", "adam_m", "adam_v").
std::string shardTensorName(const std::string &unit, const char *part);
std::string rankFileName(int rank, int worldSize);
std::string stepDirectory(const std::string &dir, int64_t step);

struct CheckpointOptions {
  std::string dir;
  int64_t every = 0;    ///< 0: only at the end (and on a stop signal)
  int64_t keepLast = 0; ///< 0: keep every checkpoint
};

/// Writes one run's checkpoints. write() is a collective: every rank calls
/// it at the same step. Everything a write needs is allocated by
/// prepare(), at setup: the staging buffer (the largest shard tensor of
/// the rank's file, at most 1 MiB), the rank file's header and rank 0's
/// manifest as prepared JSON with room for their widest values, the list
/// of step directories; write() itself allocates nothing on the heap but
/// on failure (test/Runtime/checkpoint-heap.test).
class Checkpointer {
public:
  Checkpointer(const Plan &plan, Session &session, Communicator &comm,
               CheckpointOptions options, RunIdentity run);
  ~Checkpointer();

  /// A collective, before any step: rank 0 creates the directory where
  /// missing and takes its lock (CheckpointLock.h); every rank checks that
  /// its directory is rank 0's (it holds that lock) and writable; each
  /// allocates what writing needs. False with `error` naming what failed,
  /// the same on every rank.
  bool prepare(std::string &error);
  /// Whether step `step` of a run ending at `last` writes one.
  bool due(int64_t step, int64_t last) const {
    return (options.every > 0 && step % options.every == 0) || step == last;
  }
  /// Writes D/step-<step>: this rank's file, the barrier, rank 0's
  /// manifest, --keep-last. False with one error (the same on every rank,
  /// naming the file that failed), nothing of the checkpoint left visible.
  bool write(int64_t step, std::string &error);
  int64_t lastWritten() const { return written; }
  const std::string &dir() const { return options.dir; }
  /// Rank 0's line on the last checkpoint written (its size and time).
  const std::string &lastNote() const { return note; }
  /// Rank 0's line on a stale lock taken over by prepare() ("" if none).
  const std::string &lockTakenOver() const { return lockNote; }

private:
  struct Prepared;
  bool checkSetup(std::string &error);
  bool claimDirectory(std::string &error);
  bool failCreate(std::string &error);
  bool findLock(const std::string &lock, const std::string &leadDir,
                std::string &error);
  bool prepareRankFile(std::string &error);
  bool prepareManifest(std::string &error);
  bool writeRankFile(const char *stepDir, int64_t step, ManifestFile &file,
                     std::string &error);
  bool agree(int64_t step, bool ok, std::string &error);
  bool writeManifest(const char *stepDir, int64_t step, std::string &error);
  bool discardStep(const char *stepDir);
  void pruneOld(int64_t step);
  void noteStep(int64_t step);

  const Plan &plan;
  Session &session;
  Communicator &comm;
  CheckpointOptions options;
  RunIdentity run;
  int64_t written = -1;
  std::string note, lockNote;
  std::unique_ptr<Prepared> prepared;
};

/// The checkpoint --resume continues from.
struct ResumePoint {
  std::string dir, stepDir;
  Manifest manifest;
  /// Rank 0's notes: checkpoints skipped and why, what differs harmlessly.
  std::vector<std::string> notes;
};

/// Finds the newest complete checkpoint under `dir` (rank 0 checks every
/// file's size and CRC-32, the ranks take its choice, each reads its
/// manifest from its own `dir` and the ranks compare what they read) and
/// checks it against this run: layout, plan, data, seed, global batch, the
/// optimizer's settings and the learning-rate schedule. With
/// `acceptChangedHyperparameters` (--resume-changed-hyperparameters) the
/// optimizer's settings and the schedule may differ, each change a note.
/// A collective; false with `error` naming what differs or why none is
/// usable, the same on every rank.
bool findResumePoint(const std::string &dir, const Plan &plan,
                     const RunIdentity &run, Communicator &comm,
                     ResumePoint &point, std::string &error,
                     bool acceptChangedHyperparameters = false);
/// Loads this rank's shards of the parameters and moments from the point's
/// files (only the byte ranges overlapping its shards) into the session;
/// every rank but rank 0 (which checked them all) first checks the size
/// and CRC-32 of each file it reads from. A collective; false with
/// `error`, the same on every rank.
bool loadCheckpoint(const ResumePoint &point, const Plan &plan,
                    Session &session, Communicator &comm, std::string &error);

/// FSDP_CHECKPOINT_FAULT=POINT[:STEP[:RANK]]: raise(SIGKILL) at `point`
/// of the checkpoint of `step` on `rank` (testing only; docs/runtime.md
/// lists the points).
void checkpointFault(const char *point, int64_t step, int rank);

/// SIGTERM and SIGINT: the first asks the run to stop after the current
/// step (stopSignal() returns it), a second exits at once (temporaries
/// removed, 128 + signal).
void installStopSignals();
int stopSignal();
/// The exit code of a run stopped by a signal.
inline constexpr int kStoppedExitCode = 75; // EX_TEMPFAIL: resume later

/// What runs after every step: the stop signal agreed across ranks (the
/// largest signal any rank received), then a checkpoint where due or
/// where stopping. False with `error` when a checkpoint fails.
struct StepControl {
  Checkpointer *checkpointer = nullptr; ///< null: no checkpoints
  int64_t lastStep = 0;
  int stoppedBy = 0; ///< the signal the run stops on
  bool afterStep(int64_t step, Communicator &comm, bool &stop,
                 std::string &error);
};

} // namespace fsdp::rt

#endif // FSDP_RUNTIME_CHECKPOINT_H
