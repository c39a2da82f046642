//===- CudaAllToAll.h - expert parallelism's all-to-alls on CUDA -*- C++
//-*-===//
//
// all_to_all_counts and all_to_all (kernels 56 and 57) on the compute
// stream, over the expert group. NCCL takes its sizes on the host, so both
// bring their G x L counts back first (a copy and a synchronisation of the
// compute stream each): the counts then cross the host's expert group
// (G L integers), the rows NCCL's. Kept apart from CudaBackend.cpp.
//
//===----------------------------------------------------------------------===//

#ifndef FSDP_RUNTIME_CUDA_CUDAALLTOALL_H
#define FSDP_RUNTIME_CUDA_CUDAALLTOALL_H

#include "Nccl.h"
#include "fsdp/runtime/comm/Communicator.h"
#include "fsdp/runtime/plan/Plan.h"

#include <string>

namespace fsdp::rt::cuda {

/// Runs all-to-all instruction `inst` of `plan` (its buffers in `arena`)
/// on `stream`: its counts over `host`, its rows over `nccl` (both the
/// expert group). Adds the bytes it moved to and from other ranks to
/// `moved`. False with `error` (naming the kernel) on counts that do not
/// fit its buffers or a failed CUDA or NCCL call.
bool runAllToAll(const Plan &plan, const Instruction &inst,
                 unsigned char *arena, Communicator &host, Nccl &nccl,
                 cudaStream_t stream, uint64_t &moved, std::string &error);

} // namespace fsdp::rt::cuda

#endif // FSDP_RUNTIME_CUDA_CUDAALLTOALL_H
