//===- CollectivesAllToAll.h - fsdp-collectives-test's all-to-alls -*- C++
//-*-===//
//
// The all-to-all half of fsdp-collectives-test (CollectivesAllToAll.cpp),
// reporting each check through the caller's expect().
//
//===----------------------------------------------------------------------===//

#ifndef FSDP_RUNTIME_TEST_COLLECTIVESALLTOALL_H
#define FSDP_RUNTIME_TEST_COLLECTIVESALLTOALL_H

#include "fsdp/runtime/comm/Communicator.h"

#include <memory>
#include <string>

namespace fsdp::rt::test {

using AllToAllExpect = void (*)(bool ok, const std::string &what);

/// allToAllCounts (1 and 3 values per peer) and allToAllV (every case of
/// AllToAllCheck.h in f32, bf16 and i32) on `comm`; `which` prefixes the
/// messages ("local ").
void checkAllToAll(Communicator &comm, const std::string &which,
                   AllToAllExpect expect);
/// The same through the flight recorder's watched communicator (over a
/// split of `comm`), and its records: kind, bytes sent and received, label.
void checkWatchedAllToAll(Communicator &comm, AllToAllExpect expect);
/// --stall-in-all-to-all: the watchdog over `comm`, 1 s; the counts
/// exchange, then rank `stalled` sleeps 30 s where the others enter the
/// rows' all-to-all (dumps go to `dir` when set). Returns 1 when the job
/// was not ended.
int stallInAllToAll(std::unique_ptr<Communicator> comm, int stalled,
                    const std::string &dir);
/// --all-to-all-over-int: every rank asks to send 2^31 rows. Returns 1
/// when the communicator did not end the job.
int allToAllOverInt(Communicator &comm);
/// --all-to-all-large ROWS ROW_ELEMENTS: rank 0 sends ROWS rows of i32 to
/// the last rank, which checks them (by hand: past 2^31 bytes or elements
/// it takes gigabytes, more than the lit suite should). Returns 1 when a
/// row is wrong.
int allToAllLarge(Communicator &comm, int64_t rows, int64_t rowElements);

} // namespace fsdp::rt::test

#endif // FSDP_RUNTIME_TEST_COLLECTIVESALLTOALL_H
