//===- OutputFile.h - outputs reserved, written whole -----------*- C++ -*-===//
//
// A run's outputs (parameters, trace, report) are known before the first
// step but written after the last. An OutputFile checks its path and
// reserves the space first: PATH.tmp is created and posix_fallocate'd, so
// a directory, symbolic link, device or pipe at PATH (only a regular file
// is ever replaced), a missing or read-only directory, or a disk too full
// fails before any training. At the end the contents go into the reserved
// file, which is fsynced and renamed over PATH: PATH is always the old file
// or the whole new one. Reserved temporaries are removed on any error,
// and on SIGTERM or SIGINT once installOutputCleanup() has run.
//
//===----------------------------------------------------------------------===//

#ifndef FSDP_RUNTIME_OUTPUTFILE_H
#define FSDP_RUNTIME_OUTPUTFILE_H

#include <cstdint>
#include <functional>
#include <ostream>
#include <string>
#include <string_view>

namespace fsdp::rt {

class OutputFile {
public:
  OutputFile() = default;
  OutputFile(const OutputFile &) = delete;
  OutputFile &operator=(const OutputFile &) = delete;
  ~OutputFile();

  /// Checks `path` and reserves `bytes` for the output `what` ("trace");
  /// on failure returns false with `error` naming the path and the reason.
  bool reserve(const std::string &path, const std::string &what, uint64_t bytes,
               std::string &error);
  bool active() const { return fd >= 0; }
  /// Writes what `fill` streams into the reservation and renames it over
  /// the path. On failure the old file is left as it was.
  bool write(const std::function<void(std::ostream &)> &fill,
             std::string &error);

private:
  std::string path, tmp, what;
  int fd = -1;
};

/// Also removes the board and other files registered with
/// registerTemporaryFile: names that must not outlive a failed run.
/// (A string_view: a checkpoint registers its temporaries without
/// allocating.) `output`: a reserved output's temporary (OutputFile).
void registerTemporaryFile(std::string_view path, bool output = false);
void forgetTemporaryFile(std::string_view path);
/// Unlinks every registered temporary (async-signal-safe).
void removeTemporaryFiles();
/// Unlinks the reserved outputs' temporaries only (async-signal-safe): a
/// stop signal's first step. A stopped run writes none of its outputs,
/// and the launcher that signals a rank whose peer died kills it soon
/// after (Open MPI: SIGTERM, then SIGKILL), while it may wait in a
/// collective that never ends. A checkpoint being written and the
/// directory's lock stay: the stop still writes its checkpoint.
void removeReservedOutputs();
/// SIGTERM and SIGINT remove the temporaries and exit 128 + signal; a
/// file-size limit makes writes fail (EFBIG) instead of killing the run.
void installOutputCleanup();

} // namespace fsdp::rt

#endif // FSDP_RUNTIME_OUTPUTFILE_H
