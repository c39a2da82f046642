//===- ProcessMemory.cpp - the process's resident memory ------------------===//

#include "fsdp/runtime/ProcessMemory.h"

#include <cstdio>
#include <cstring>

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

bool resetResidentPeak() {
  FILE *refs = std::fopen("/proc/self/clear_refs", "w");
  if (!refs)
    return false;
  bool ok = std::fputs("5", refs) >= 0;
  return std::fclose(refs) == 0 && ok;
}

} // namespace fsdp::rt
