//===- CheckpointFiles.h - the files of a checkpoint ------------*- C++ -*-===//
//
// The file-system half of checkpoints: atomic writes with their CRC-32 and
// fault points, the step directories, their removal. What runs while
// training (writeFileAtomic, makeDirectory, removeCheckpoint) takes its
// paths as C strings and builds the others on the stack: writing a
// checkpoint allocates nothing on the heap (docs/memory.md).
//
//===----------------------------------------------------------------------===//

#ifndef FSDP_RUNTIME_CHECKPOINTFILES_H
#define FSDP_RUNTIME_CHECKPOINTFILES_H

#include "fsdp/runtime/plan/Plan.h"

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace fsdp::rt {

/// `bytes` bytes at `data`, or, where `fill` is set, what it writes: its
/// bytes [first, first + n) into the staging buffer, a piece at a time (a
/// rank file's tensors go from the arena to the file through one buffer
/// of at most kStagingBytes, allocated at setup).
struct FileChunk {
  const void *data;
  size_t bytes;
  std::function<void(void *out, size_t first, size_t n)> fill = nullptr;
};
/// The buffer the fill chunks are staged through (a multiple of 4 bytes).
struct Staging {
  char *data = nullptr;
  size_t bytes = 0;
};
/// The most a checkpoint stages at once: the D2H copy and the write of a
/// piece this size take long enough that the calls do not dominate.
inline constexpr size_t kStagingBytes = size_t(1) << 20;

/// The fault points inside one file's write: `mid` after half its bytes,
/// `written` once it is whole and fsynced, before its rename.
struct FaultPoints {
  const char *mid, *written;
  int64_t step;
  int rank;
};

/// CRC-32 as plan::crc32 (zlib's), eight bytes at a time.
uint32_t fastCrc32(const void *data, size_t size, uint32_t previous = 0);

/// Writes `chunks` to PATH.tmp, fsyncs it, renames it over PATH and fsyncs
/// the directory; `bytes` and `crc` are the file's. On failure PATH.tmp is
/// gone and `error` names PATH and the reason. Allocates nothing but on
/// failure (PATH shorter than PATH_MAX - 4).
bool writeFileAtomic(const char *path, const std::vector<FileChunk> &chunks,
                     Staging staging, const FaultPoints &faults,
                     uint64_t &bytes, uint32_t &crc, std::string &error);
/// The size and CRC-32 of a regular file, read through; false, `why` saying
/// why, when it is not one (RegularFile.h) or cannot be read.
bool fileCrc32(const std::string &path, uint64_t &bytes, uint32_t &crc,
               std::string &why);

/// Per unit, the buffers a rank file holds and their parts: its shard
/// ("param") and AdamW's moments ("adam_m", "adam_v").
std::vector<std::pair<const char *, uint32_t>>
unitShardBuffers(const Plan &plan, uint32_t unit);

/// mkdir that accepts an existing directory.
bool makeDirectory(const char *path, std::string &error);
/// A directory this process can create files in (a probe file, removed).
bool checkWritableDirectory(const std::string &path, std::string &error);
/// The k of every D/step-<k> directory, ascending.
std::vector<int64_t> listCheckpointSteps(const std::string &dir);
/// Removes a step directory: its manifest first, then the rest (read with
/// getdents64 into a buffer on the stack, not opendir's heap).
void removeCheckpoint(const char *stepDir);

} // namespace fsdp::rt

#endif // FSDP_RUNTIME_CHECKPOINTFILES_H
