//===- AdamWTensors.h - the tensors of one multi-tensor AdamW ---*- C++ -*-===//
//
// A step's optimizer is a run of adjacent adamw_shard instructions, one per
// unit, each updating its shard by parameter segment (a no_weight_decay
// parameter gets no decay). Run one by one, that is a parallel loop (CPU)
// or a kernel launch (GPU) per segment: about 150 for GPT-2 124M, most of
// them a few hundred elements of layer norm and bias that cannot keep two
// cores, let alone a GPU, busy. The backends instead collect every segment
// of the run into a list of these and update them all in one pass
// (cpu::adamwTensors, cuda::adamwTensors). The update of each element is
// the same either way, so the bits are too.
//
// Plain data, shared by the executor's dispatch and both backends' kernels
// (the CUDA kernels take it by value: every pointer is the backend's).
//
//===----------------------------------------------------------------------===//

#ifndef FSDP_RUNTIME_EXEC_ADAMWTENSORS_H
#define FSDP_RUNTIME_EXEC_ADAMWTENSORS_H

#include <cstdint>

namespace fsdp::rt {

/// One tensor of a multi-tensor AdamW: `n` elements of a shard with its
/// moments and gradient, and the hyperparameters its instruction gives it.
struct AdamWTensor {
  float *param = nullptr, *m = nullptr, *v = nullptr;
  /// f32 elements, or bf16 bits where `bf16Grad` (mixed precision's
  /// reduced shard, widened as it is read).
  const void *grad = nullptr;
  /// The unit's shard copy (bf16 bits) to round each updated element into;
  /// null: none.
  uint16_t *copy = nullptr;
  /// Gradient clipping's coefficient (a scalar where the kernel runs);
  /// null: none.
  const float *gradScale = nullptr;
  int64_t n = 0;
  float lr = 0, beta1 = 0, beta2 = 0, eps = 0, weightDecay = 0;
  bool bf16Grad = false;
};

} // namespace fsdp::rt

#endif // FSDP_RUNTIME_EXEC_ADAMWTENSORS_H
