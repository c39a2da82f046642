//===- DeviceAccess.h - what an instruction's kernels touch, for the emulator
//-*- C++ -*-===//
//
// Under the CUDA emulator (the module built against
// runtime/test/cuda-emulation/, FSDP_CUDA_EMULATED), the race checker
// learns which device bytes each instruction's kernels read and write from
// here: a kernel launch's pointers do not say how far the kernel reaches,
// the plan does. Copies, cuBLAS and NCCL tell it their exact extents
// themselves. On a GPU these calls compile to nothing.
//
//===----------------------------------------------------------------------===//

#ifndef FSDP_RUNTIME_CUDA_DEVICEACCESS_H
#define FSDP_RUNTIME_CUDA_DEVICEACCESS_H

#include <cuda_runtime_api.h>

#include <cstddef>

#ifndef FSDP_CUDA_EMULATED
#define FSDP_CUDA_EMULATED 0
#endif

namespace fsdp::rt::cuda {

/// Whether this build of the backend runs under the emulator.
constexpr bool kEmulated = FSDP_CUDA_EMULATED;

/// The kernels enqueued next on `stream` read (write: and write) the
/// `bytes` at `p`; `what` names them in a report.
inline void declareAccess(cudaStream_t stream, const void *p, size_t bytes,
                          bool write, const char *what) {
#if FSDP_CUDA_EMULATED
  cudaEmuDeclareAccess(stream, p, bytes, write, what);
#else
  (void)stream, (void)p, (void)bytes, (void)write, (void)what;
#endif
}

} // namespace fsdp::rt::cuda

#endif // FSDP_RUNTIME_CUDA_DEVICEACCESS_H
