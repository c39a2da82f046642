//===- StepSimulator.h - the cost model of a scheduled step -----*- C++ -*-===//
//
// Three streams (compute, all-gather, reduce-scatter), costs from types:
// FLOPs and bytes moved of each compute op (KernelOpInterface), and the
// nccl-tests bus-bandwidth model for collectives. --fsdp-simulate prints
// and traces it; --fsdp-fit-memory compares schedules with it.
//
//===----------------------------------------------------------------------===//

#ifndef FSDP_DIALECT_FSDP_ANALYSIS_STEPSIMULATOR_H
#define FSDP_DIALECT_FSDP_ANALYSIS_STEPSIMULATOR_H

#include "fsdp/Dialect/FSDP/IR/FSDP.h"

#include <array>
#include <string>
#include <vector>

namespace mlir::fsdp {

/// Rates of the machine the model stands for: per second, and seconds.
/// `flops` is the GEMM rate of f32 operands (TF32 tensor cores on a GPU),
/// `bf16Flops` that of bf16 operands (twice the rate on Hopper's tensor
/// cores, as NVIDIA's dense peaks are: 989 against 495 TFLOP/s for H100
/// SXM).
struct Hardware {
  double flops, busBytes, memoryBytes, latency, bf16Flops;
};

/// The named machines: "h100-nvlink" and "ib-400g"; null for another name.
std::optional<Hardware> lookupHardware(StringRef name);

/// The time one compute op costs on `hw` (the larger of its FLOPs and its
/// bytes moved at the machine's rates), or a negative number for an op
/// that has no cost.
double computeTime(Operation *op, const Hardware &hw);

struct SimulatedEvent {
  std::string name;
  int stream;
  double start, duration;
};

/// The three streams of a step, op by op: when each is free, what compute
/// has cost, and the events of the trace.
class StepSimulator {
public:
  StepSimulator(const Hardware &hw, double N) : hw(hw), N(N) {}

  /// Runs the step in program order; fails after reporting an op that has
  /// no cost.
  LogicalResult run(func::FuncOp step);

  double stepTime() const {
    return *std::max_element(freeAt.begin(), freeAt.end());
  }
  double computeBusy = 0.0;
  std::vector<SimulatedEvent> events;

private:
  /// The nccl-tests bus-bandwidth model of a collective moving `bytes`.
  double commTime(double bytes) const {
    return hw.latency + bytes * (N - 1) / N / hw.busBytes;
  }
  /// A collective on `stream`: started under `token`, or synchronous (on
  /// stream 0: the compute stream's own, gradient clipping's all-reduce).
  void collective(Operation *op, int stream, double bytes, Value token);
  /// A compute op on stream 0; fails after reporting an op with no cost.
  LogicalResult compute(Operation *op);
  /// One op of the step: a collective, a wait, a compute op or nothing.
  LogicalResult visit(Operation *op);

  Hardware hw;
  double N;
  // Streams: 0 compute, 1 all-gather, 2 reduce-scatter.
  std::array<double, 3> freeAt{};
  llvm::DenseMap<Value, double> doneAt;
};

} // namespace mlir::fsdp

#endif // FSDP_DIALECT_FSDP_ANALYSIS_STEPSIMULATOR_H
