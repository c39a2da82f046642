//===- Errors.h - how fsdp-run ends on an error -----------------*- C++ -*-===//
//
// One error line, then the end of the run: of this process before the
// ranks connect, of the whole job after (MPI_Abort through the
// communicator), so that no rank waits forever in a collective.
//
//===----------------------------------------------------------------------===//

#ifndef FSDP_RUN_ERRORS_H
#define FSDP_RUN_ERRORS_H

#include <string>

namespace fsdp::rt {
class Communicator;
} // namespace fsdp::rt

namespace fsdprun {

/// The communicator an error ends the whole job through (null: this
/// process only). Set once the ranks are connected, null again before it
/// goes.
void setJobCommunicator(fsdp::rt::Communicator *comm);

/// The error line, then the end of the run with exit code `code`.
[[noreturn]] void die(const std::string &message, int code = 1);

/// An exception that escaped: exit code 1, never an abort or a crash.
[[noreturn]] void dieUnexpected(const char *what);

/// An error every rank has (an agreement, or a collective that carried
/// one rank's error to all): each rank says it and ends its run with exit
/// code 1 on its own, no MPI_Abort. Returns the exit code.
int refuseTogether(const fsdp::rt::Communicator &comm,
                   const std::string &error);

} // namespace fsdprun

#endif // FSDP_RUN_ERRORS_H
