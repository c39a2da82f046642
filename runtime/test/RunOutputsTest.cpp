//===- RunOutputsTest.cpp - drop mode's figures in a run's outputs --------===//
//
// What a run shows of the pairs drop mode dropped, below the plan: the
// progress line (only when the step reports a count), the capacities the
// summary names (moeCapacities over hand-made instructions), and the
// report's moe_dropped_pairs (only for a plan with moe_capacity_trim).
// Until the compiler writes drop plans, the whole path (Session reads,
// Trainer all-reduces) is left to a lit test. Prints "run-outputs: N
// passed, M failed".
//
//===----------------------------------------------------------------------===//

#include "fsdp/runtime/train/RunOutputs.h"
#include "fsdp/runtime/train/Progress.h"

#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>
#include <unistd.h>

using namespace fsdp::rt;

namespace {
int passed = 0, failed = 0;

void check(bool ok, const std::string &what) {
  ok ? ++passed : ++failed;
  if (!ok)
    std::fprintf(stderr, "run-outputs: FAILED: %s\n", what.c_str());
}

void testProgressLine() {
  ProgressMeter meter(10, 1024, 0.0, 0.0);
  char line[320];
  meter.format(line, sizeof(line), 3, 1.5f, 1e-3, -1.0, 0.01, 0);
  check(std::string(line).find("dropped") == std::string::npos,
        std::string("no count, no dropped: ") + line);
  meter.format(line, sizeof(line), 3, 1.5f, 1e-3, -1.0, 0.01, 0, 12);
  check(std::string(line).find("| loss 1.500000 | dropped 12 | lr ") !=
            std::string::npos,
        std::string("dropped after the loss: ") + line);
}

Instruction kernel(const char *name, std::vector<double> params) {
  Instruction inst;
  inst.kernel = fsdp::plan::findKernel(name);
  inst.params = std::move(params);
  return inst;
}

void testCapacitiesAndReport() {
  Plan plan;
  plan.program.push_back(kernel("moe_expert_counts", {}));
  check(!moeCapacities(plan), "no moe_capacity_trim, no capacities");
  TrainResult result;
  result.losses = {2.0f, 1.5f};
  check(!makeRunReport(plan, result, 8, "cpu", "on", 2, false).dropsPairs,
        "no moe_capacity_trim, no moe_dropped_pairs");
  plan.program.push_back(kernel("moe_capacity_trim", {12}));
  plan.program.push_back(kernel("moe_capacity_trim", {8}));
  auto capacities = moeCapacities(plan);
  check(capacities && capacities->first == 8 && capacities->second == 12,
        "capacities 8..12");
  result.droppedPairs = {5, 0};
  RunReport report = makeRunReport(plan, result, 8, "cpu", "on", 2, false);
  check(report.dropsPairs && report.droppedPairs == result.droppedPairs,
        "the report takes the steps' counts");
  char path[] = "/tmp/fsdp-run-outputs-XXXXXX";
  int fd = mkstemp(path);
  close(fd);
  OutputFile file;
  std::string error;
  check(file.reserve(path, "report", reportBytes(2, 0), error) &&
            writeReport(report, file, error),
        "writes the report: " + error);
  std::stringstream text;
  text << std::ifstream(path).rdbuf();
  unlink(path);
  check(text.str().find("\"moe_dropped_pairs\": [5, 0]") != std::string::npos,
        "moe_dropped_pairs in the report: " + text.str());
}
} // namespace

int main() {
  testProgressLine();
  testCapacitiesAndReport();
  std::printf("run-outputs: %d passed, %d failed\n", passed, failed);
  return failed ? 1 : 0;
}
