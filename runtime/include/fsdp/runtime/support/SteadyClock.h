//===- SteadyClock.h - the runtime's clock in nanoseconds -------*- C++ -*-===//
//
// One clock for the backends' collective spans (Backend::Span) and the
// flight recorder's watchdog, here at the bottom so that both the
// communicators and the backends can read it.
//
//===----------------------------------------------------------------------===//

#ifndef FSDP_RUNTIME_STEADYCLOCK_H
#define FSDP_RUNTIME_STEADYCLOCK_H

#include <chrono>
#include <cstdint>

namespace fsdp::rt {

/// A steady-clock time point in nanoseconds: the unit of Backend::Span and
/// of the watchdog's clock.
inline int64_t steadyNanos(std::chrono::steady_clock::time_point t =
                               std::chrono::steady_clock::now()) {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             t.time_since_epoch())
      .count();
}

} // namespace fsdp::rt

#endif // FSDP_RUNTIME_STEADYCLOCK_H
