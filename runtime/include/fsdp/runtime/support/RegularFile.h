//===- RegularFile.h - open only regular files for reading ----------------===//
//
// Every file the runtime reads (the plan, --data, --val-data, --init-from,
// a checkpoint's manifest and rank files) is opened here: a regular file,
// or a symbolic link to one, and nothing else. A FIFO would block the open
// until some writer came (forever, or until the watchdog ends the job), a
// directory or a device reads as nonsense: each is refused at once with
// what it is. The open itself never blocks (O_NONBLOCK, then fstat).
//
//===----------------------------------------------------------------------===//

#ifndef FSDP_RUNTIME_REGULARFILE_H
#define FSDP_RUNTIME_REGULARFILE_H

#include <cstdint>
#include <string>
#include <sys/types.h>

namespace fsdp::rt {

/// What a file of mode `mode` is, for an error line: "a directory", "a
/// FIFO", "a character device", "a block device", "a socket".
const char *fileKind(mode_t mode);

/// Opens `path` read-only if it is a regular file; the descriptor reads
/// blocking as usual. -1 otherwise, `why` (without the path) being
/// "not a regular file (a FIFO)" and the like, or "cannot open WHAT:
/// <strerror>" ("cannot open: ..." for an empty `what`).
int openRegularFile(const std::string &path, const char *what,
                    std::string &why);

/// The whole of regular file `path` into `bytes`, refused (`why`) when it
/// is not one, cannot be read or holds more than `maxBytes`.
bool readRegularFile(const std::string &path, const char *what,
                     uint64_t maxBytes, std::string &bytes, std::string &why);

} // namespace fsdp::rt

#endif
