//===- ProcessMemory.cpp - the process's resident memory ------------------===//

#include "fsdp/runtime/support/ProcessMemory.h"

#include <cstdio>
#include <cstring>
#include <fcntl.h>
#include <unistd.h>

namespace fsdp::rt {

ResidentMemory residentMemory() {
  ResidentMemory m;
  FILE *status = std::fopen("/proc/self/status", "r");
  if (!status)
    return m;
  char line[256];
  int found = 0;
  while (std::fgets(line, sizeof(line), status)) {
    unsigned long long kib = 0;
    if (std::sscanf(line, "VmRSS: %llu kB", &kib) == 1) {
      m.now = uint64_t(kib) * 1024;
      ++found;
    } else if (std::sscanf(line, "VmHWM: %llu kB", &kib) == 1) {
      m.peak = uint64_t(kib) * 1024;
      ++found;
    }
  }
  std::fclose(status);
  m.measured = found == 2;
  return m;
}

uint64_t residentBytesNow() {
  // Not stdio: fopen allocates its FILE on the heap.
  int fd = ::open("/proc/self/statm", O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return 0;
  char text[128];
  ssize_t n = ::read(fd, text, sizeof(text) - 1);
  ::close(fd);
  if (n <= 0)
    return 0;
  text[n] = '\0';
  unsigned long long size = 0, resident = 0;
  if (std::sscanf(text, "%llu %llu", &size, &resident) != 2)
    return 0;
  return uint64_t(resident) * uint64_t(sysconf(_SC_PAGESIZE));
}

bool resetResidentPeak() {
  FILE *refs = std::fopen("/proc/self/clear_refs", "w");
  if (!refs)
    return false;
  bool ok = std::fputs("5", refs) >= 0;
  return std::fclose(refs) == 0 && ok;
}

} // namespace fsdp::rt
