//===- CpuModel.h - the CPU a benchmark ran on ------------------*- C++ -*-===//
//
// Every figure is recorded with the CPU it was measured on (CPUs differ
// from machine to machine): the benchmarks print this first.
//
//===----------------------------------------------------------------------===//

#ifndef FSDP_BENCH_CPUMODEL_H
#define FSDP_BENCH_CPUMODEL_H

#include <fstream>
#include <string>

namespace fsdp::bench {

/// /proc/cpuinfo's first "model name", or "unknown".
inline std::string cpuModel() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind("model name", 0) == 0)
      return line.substr(line.find(':') + 2);
  return "unknown";
}

} // namespace fsdp::bench

#endif // FSDP_BENCH_CPUMODEL_H
