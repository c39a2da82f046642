//===- Errors.cpp - how fsdp-run ends on an error -------------------------===//

#include "Errors.h"

#include "fsdp/runtime/Communicator.h"
#include "fsdp/runtime/OutputFile.h"

#include <cstdio>
#include <cstdlib>

using namespace fsdp::rt;

namespace fsdprun {
namespace {
/// Set once the ranks are connected: an error on any rank then ends the
/// whole job (MPI_Abort), so no rank waits forever in a collective.
Communicator *gComm = nullptr;

/// The error line, then the end of the run: of the whole job at more
/// than one rank (through gComm while it lives, else MPI_Abort on MPI's
/// world where MPI runs). Allocates nothing (an exception's `what`).
[[noreturn]] void dieWith(const char *prefix, const char *message, int code) {
  removeTemporaryFiles();
  if (gComm && gComm->size() > 1)
    std::fprintf(stderr, "fsdp-run: rank %d: error: %s%s\n", gComm->rank(),
                 prefix, message);
  else
    std::fprintf(stderr, "fsdp-run: error: %s%s\n", prefix, message);
  std::fflush(stderr);
  if (gComm && gComm->size() > 1)
    gComm->abort(code);
  abortMpiJob(code); // returns at one rank or without MPI
  std::exit(code);
}

} // namespace

void setJobCommunicator(Communicator *comm) { gComm = comm; }

[[noreturn]] void die(const std::string &message, int code) {
  dieWith("", message.c_str(), code);
}

[[noreturn]] void dieUnexpected(const char *what) {
  dieWith("unexpected error: ", what, 1);
}

int refuseTogether(const Communicator &comm, const std::string &error) {
  removeTemporaryFiles();
  if (comm.size() > 1)
    std::fprintf(stderr, "fsdp-run: rank %d: error: %s\n", comm.rank(),
                 error.c_str());
  else
    std::fprintf(stderr, "fsdp-run: error: %s\n", error.c_str());
  std::fflush(stderr);
  return 1;
}

} // namespace fsdprun
