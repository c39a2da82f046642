//===- CheckpointLock.h - one job writes a checkpoint directory -*- C++ -*-===//
//
// Two jobs writing one checkpoint directory overwrite each other's rank
// files and manifests (and --keep-last removes the other's checkpoints).
// Rank 0 holds D/fsdp-run.lock while its run lasts: an flock(2) on it (the
// kernel drops it when the process dies, however it dies) and, in it, who
// holds it (host, pid, start time, a random job id). Another job finds the
// lock held and refuses, naming the owner; a lock file whose flock nobody
// holds was left by a job that died (SIGKILL) and is taken over with a
// note. Where the filesystem has no flock, the owner's pid is checked on
// its host instead (another host's owner cannot be checked: refused). The
// file is removed when the run ends, on an error and on SIGTERM (it is
// registered as a temporary, OutputFile.h). docs/runtime.md, "One job per
// checkpoint directory".
//
// The other ranks find rank 0's lock, with its job id, in their own
// --checkpoint-dir: that is how the ranks agree that they write into one
// directory, whatever its path on each node.
//
//===----------------------------------------------------------------------===//

#ifndef FSDP_RUNTIME_CHECKPOINTLOCK_H
#define FSDP_RUNTIME_CHECKPOINTLOCK_H

#include <string>

namespace fsdp::rt {

/// The lock file's name inside a checkpoint directory.
inline constexpr char kCheckpointLockName[] = "fsdp-run.lock";

class CheckpointLock {
public:
  CheckpointLock() = default;
  CheckpointLock(const CheckpointLock &) = delete;
  CheckpointLock &operator=(const CheckpointLock &) = delete;
  ~CheckpointLock() { release(); }

  /// Takes `dir`'s lock for a job of `ranks` ranks. False with `error`
  /// naming the lock file and its owner when another job holds it; `note`
  /// says whose stale lock was taken over ("" when none).
  bool acquire(const std::string &dir, int ranks, std::string &note,
               std::string &error);
  /// Removes the lock file and drops the lock (idempotent).
  void release();
  /// The lock file's text: the owner and the job id.
  const std::string &text() const { return contents; }

private:
  bool claim(int fd, bool haveFlock, int ranks, std::string &note,
             std::string &error);
  int fd = -1;
  std::string path, contents;
};

/// The text of `dir`'s lock file; false with `why` when it is missing or
/// not a regular file.
bool readCheckpointLock(const std::string &dir, std::string &text,
                        std::string &why);
/// "host H, pid P, started T" of a lock file's text.
std::string describeLockOwner(const std::string &text);

} // namespace fsdp::rt

#endif // FSDP_RUNTIME_CHECKPOINTLOCK_H
