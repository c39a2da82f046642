//===- StepSimulator.h - the cost model of a scheduled step -----*- C++ -*-===//
//
// Three streams (compute, all-gather, reduce-scatter), costs from types:
// FLOPs and bytes moved of each compute op (KernelOpInterface), and the
// nccl-tests bus-bandwidth model for collectives, at the level of the
// network each one's group crosses (NetworkModel.h). --fsdp-simulate
// prints and traces it; --fsdp-fit-memory compares schedules with it.
//
//===----------------------------------------------------------------------===//

#ifndef FSDP_DIALECT_FSDP_ANALYSIS_STEPSIMULATOR_H
#define FSDP_DIALECT_FSDP_ANALYSIS_STEPSIMULATOR_H

#include "fsdp/Dialect/FSDP/Analysis/NetworkModel.h"
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

/// The single-level network of `hw`: every ring over the `worldSize`
/// ranks at its bus bandwidth and latency.
NetworkTopology singleLevelNetwork(const Hardware &hw, int64_t worldSize);

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
  StepSimulator(const Hardware &hw, const NetworkTopology &net)
      : hw(hw), net(net) {}
  /// On `hw`'s single-level network.
  StepSimulator(const Hardware &hw, int64_t worldSize)
      : StepSimulator(hw, singleLevelNetwork(hw, worldSize)) {}

  /// Runs the step in program order; fails after reporting an op that has
  /// no cost.
  LogicalResult run(func::FuncOp step);

  double stepTime() const {
    return *std::max_element(freeAt.begin(), freeAt.end());
  }
  double computeBusy = 0.0;
  /// Collectives' busy time and count by the level they ran at: [0]
  /// inside a node, [1] across nodes.
  std::array<double, 2> commBusy{};
  std::array<int64_t, 2> commCount{};
  std::vector<SimulatedEvent> events;
  /// When the compute stream reaches each op of the step (before the op
  /// runs): where the trace places its memory sample.
  llvm::DenseMap<Operation *, double> issuedAt;

private:
  /// The group `op` runs over: today every collective's is the world.
  GroupShape groupOf(Operation *op) const;
  /// A collective on `stream`: started under `token`, or synchronous (on
  /// stream 0: the compute stream's own, gradient clipping's all-reduce).
  void collective(Operation *op, int stream, CollectiveKind kind, double bytes,
                  Value token);
  /// A compute op on stream 0; fails after reporting an op with no cost.
  LogicalResult compute(Operation *op);
  /// One op of the step: a collective, a wait, a compute op or nothing.
  LogicalResult visit(Operation *op);

  Hardware hw;
  NetworkTopology net;
  // Streams: 0 compute, 1 all-gather, 2 reduce-scatter, 3 replica
  // all-reduce (hybrid sharding), 4 the expert group's started
  // all-to-alls.
  std::array<double, 5> freeAt{};
  llvm::DenseMap<Value, double> doneAt;
};

} // namespace mlir::fsdp

#endif // FSDP_DIALECT_FSDP_ANALYSIS_STEPSIMULATOR_H
