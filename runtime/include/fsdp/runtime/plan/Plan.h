//===- Plan.h - a plan file, loaded and validated ---------------*- C++ -*-===//
//
// The in-memory form of a plan (PlanFormat.h has the file format). loadPlan
// checks everything a kernel will rely on, so that a corrupt or
// hand-crafted plan gets an error naming the file and the reason instead of
// a crash: header, version, size, checksum, every index, every buffer
// inside the arena, every size and product free of overflow, and every
// kernel's operand counts and shapes. A plan that loads is safe to run.
//
//===----------------------------------------------------------------------===//

#ifndef FSDP_RUNTIME_PLAN_H
#define FSDP_RUNTIME_PLAN_H

#include "fsdp/runtime/PlanFormat.h"

#include <algorithm>
#include <array>
#include <cstdint>
#include <string>
#include <vector>

namespace fsdp::rt {

struct BufferDesc {
  plan::BufferKind kind;
  plan::DType dtype;
  uint64_t offset = 0, size = 0;
  std::vector<int64_t> shape;
  int32_t unit = -1;  ///< owning unit (param, adam_m, adam_v buffers)
  int32_t input = -1; ///< step input position (input buffers)
  /// For a view (a parameter in its gathered unit, a gradient in its
  /// unit's full-size gradient): the buffer it lies in; else -1.
  int32_t base = -1;
  int64_t numElements() const;
};

/// An FSDP unit: its parameters flattened into one tensor of flatSize
/// elements, of which each rank holds the seed's shard in shardBuffer.
struct UnitDesc {
  std::string name;
  int64_t flatSize = 0;
  uint32_t shardBuffer = 0;
  /// Its shard_copy buffer (plan version 18: the shard rounded to the
  /// compute type, which its adamw_shard writes), or kNone.
  uint32_t copyBuffer = plan::kNone;
  /// Plan version 16's unit flag bit 0: the unit holds stacked expert
  /// parameters, each of its parameters this rank's expert slice (L rows of
  /// the full G L), and is sharded over the S / G ranks with that slice
  /// (docs/plan-format.md, "Expert parallelism").
  bool expertParallel = false;
};

struct ParamDesc {
  std::string name;
  plan::DType dtype;
  std::vector<int64_t> shape;
  plan::InitKind init;
  double stddev = 0.0;
  bool noWeightDecay = false;
  /// A mixture-of-experts router's selection bias (plan version 15): no
  /// AdamW; each step moves it by this rate against the sign of its load
  /// signal (docs/moe.md). -1 for every other parameter.
  double selectionBiasRate = -1;
  bool isSelectionBias() const { return selectionBiasRate >= 0; }
  uint32_t unit = 0;      ///< the unit it is flattened into
  int64_t unitOffset = 0; ///< its first element in the unit's flat tensor
  int64_t numElements() const;
  /// In an expert-parallel unit (plan version 16), `shape` is one expert
  /// slice's, of the G (this) slices stacked along the first dim: the
  /// full parameter, which initialisation and weight files address, has
  /// fullShape(). 1 elsewhere.
  int64_t expertSlices = 1;
  std::vector<int64_t> fullShape() const {
    std::vector<int64_t> full = shape;
    if (!full.empty())
      full[0] *= expertSlices;
    return full;
  }
};

struct Instruction {
  const plan::KernelInfo *kernel = nullptr;
  std::string unit; ///< empty outside units
  std::vector<uint32_t> ins, outs;
  std::vector<double> params; ///< in KernelInfo::params order
  /// The element type of its Float operands (ElementRule::Float), which
  /// the loader checked are all alike: f32 or bf16. f32 for a kernel
  /// without any (a cast, a wait).
  plan::DType elementType = plan::DType::F32;
};

/// Bytes live at the predicted peak, by row of the memory report.
struct PeakBreakdown {
  uint64_t params = 0, grads = 0, optimizer = 0, activations = 0, scratch = 0,
           gathered = 0, inputs = 0;
};

struct Plan {
  std::string path;
  /// The payload's CRC-32 from the header: what ranks compare to know they
  /// run the same plan.
  uint32_t checksum = 0;
  /// The mesh (plan version 12): R replicas of shardSize-way sharding,
  /// worldSize = R * shardSize ranks. Shards follow the layout of the
  /// shard group (plan::shardIndex of a rank, of shardSize); under full
  /// sharding shardSize is worldSize.
  uint32_t worldSize = 1, shardSize = 1;
  /// Expert parallelism (plan version 16): G, the ranks of an expert group,
  /// dividing shardSize; 1 without it.
  uint32_t expertSize = 1;
  uint32_t replicas() const { return worldSize / shardSize; }
  /// The ranks unit `unit` is sharded over: S, or S / G for an
  /// expert-parallel unit; and rank `rank`'s (a global rank, or a shard
  /// index: both give the same) index among them.
  int64_t unitShards(uint32_t unit) const {
    return units[unit].expertParallel ? shardSize / expertSize : shardSize;
  }
  int64_t unitShardIndex(uint32_t unit, int64_t rank) const {
    return units[unit].expertParallel
               ? plan::expertShardIndex(rank, shardSize, expertSize)
               : plan::shardIndex(rank, shardSize);
  }
  /// The expert slice rank `rank` holds of an expert-parallel unit's
  /// parameters (0 for any other unit).
  int64_t unitExpertSlice(uint32_t unit, int64_t rank) const {
    return units[unit].expertParallel
               ? plan::expertSlice(rank, shardSize, expertSize)
               : 0;
  }
  /// Rank `rank`'s shard of unit `unit`: its range of the flat parameter.
  plan::ShardRange shardOf(uint32_t unit, int rank) const {
    return plan::shardRange(units[unit].flatSize, unitShardIndex(unit, rank),
                            unitShards(unit));
  }
  /// Whether any unit is expert-parallel.
  bool hasExpertUnits() const {
    return std::any_of(units.begin(), units.end(),
                       [](const UnitDesc &u) { return u.expertParallel; });
  }
  uint64_t arenaSize = 0;
  uint64_t peakBytes = 0, peakKernel = 0;
  PeakBreakdown peak;
  /// The compiler's prediction of what a rank holds outside the arena: on
  /// the CPU backend, host heap, resident memory that is not heap (code,
  /// stacks, shared memory) and that per BLAS thread (its GEMM panels); on
  /// CUDA, device memory (the libraries').
  uint64_t outsideArenaCpu = 0, outsideArenaCpuMapped = 0;
  uint64_t blasBytesPerThread = 0, outsideArenaCuda = 0;
  /// The compiler's model FLOPs of one rank's step (three times the
  /// forward's matmul and attention FLOPs), which MFU divides.
  double modelFlops = 0.0;
  /// The memory budget the plan was compiled for (plan version 13; 0:
  /// none), which fsdp-run's trace draws as a constant track.
  uint64_t memoryBudget = 0;
  /// The model's Hugging Face config.json as fsdp-gen attached it (plan
  /// version 14; empty: none, e.g. a hand-written model), which
  /// `fsdp-run --export DIR` writes as DIR/config.json.
  std::string modelConfig;
  /// The resident set the compiler's figures predict with `threads` BLAS
  /// threads: the arena, the heap beyond it and the mapped memory.
  uint64_t predictedResident(int threads) const {
    return arenaSize + outsideArenaCpu + outsideArenaCpuMapped +
           uint64_t(threads) * blasBytesPerThread;
  }
  std::vector<BufferDesc> buffers;
  std::vector<UnitDesc> units;
  std::vector<ParamDesc> params;
  std::vector<uint32_t> inputs; ///< buffer of each step input, by position
  uint32_t lossBuffer = 0;
  /// Where the step clips its gradients (plan version 9): the buffer of
  /// their global sum of squares, what its clip_coefficient reads and the
  /// runtime reports the square root of; plan::kNone without clipping.
  uint32_t gradSqBuffer = plan::kNone;
  /// The evaluation step (plan version 10): the first `evalKernels`
  /// kernels of the program, the forward and the loss, which write no
  /// parameter or optimizer moment (0: the plan marks none). Run alone, on
  /// held-out batches, they give the validation loss; `evalDrainTokens`
  /// are the collectives they start whose waits lie after them, which the
  /// runtime waits for when the evaluation ends.
  uint32_t evalKernels = 0;
  std::vector<uint32_t> evalDrainTokens;
  std::vector<Instruction> program;
  /// Token and class ids below this are safe for every kernel that reads
  /// ids (the cross-entropies' vocabulary, which every embedding table
  /// covers; without a cross-entropy the smallest table); 0 when no kernel
  /// reads ids. The runtime checks its data against it.
  int64_t vocabulary = 0;
};

/// Loads and validates `path`. On failure returns false and sets `error` to
/// one line that names the file and the reason.
bool loadPlan(const std::string &path, Plan &plan, std::string &error);

/// A short description: kernels, buffers, arena, predicted peak.
std::string describePlan(const Plan &plan);

/// Calls fn(param, at, begin, count) for each parameter of unit `unit`
/// that rank `rank`'s shard (Plan::shardOf: a global rank or a shard index,
/// over the unit's own ranks, S / G for an expert-parallel one) overlaps:
/// elements [begin, begin + count) of the parameter (of its slice, for an
/// expert-parallel unit) lie at element `at` of the shard. Per-element
/// rules (initialisation, no weight decay) follow these segments, also
/// where a parameter straddles two ranks.
template <typename Fn>
void forEachShardSegment(const Plan &plan, uint32_t unit, int rank, Fn fn) {
  plan::ShardRange range = plan.shardOf(unit, rank);
  for (const ParamDesc &param : plan.params) {
    if (param.unit != unit)
      continue;
    int64_t lo = std::max(range.begin, param.unitOffset);
    int64_t hi = std::min(range.end, param.unitOffset + param.numElements());
    if (lo < hi)
      fn(param, lo - range.begin, lo - param.unitOffset, hi - lo);
  }
}

} // namespace fsdp::rt

#endif // FSDP_RUNTIME_PLAN_H
