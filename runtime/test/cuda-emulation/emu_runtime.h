//===- emu_runtime.h - the emulated CUDA runtime and cuBLAS -----*- C++ -*-===//
//
// What the CUDA backend's host code (src/cuda/CudaBackend.cpp, Nccl.cpp)
// calls beyond the kernels' needs in emu.h: devices and their properties,
// device memory (cudaMalloc of an emulated device size, cudaMemGetInfo),
// streams as in-order queues each run by a worker thread, events, copies,
// and cuBLAS handles bound to a stream. Implemented in emu_streams.cpp and
// checked by its race detector (emu_races.h). The fake cuda_runtime_api.h,
// cuda_runtime.h and cublas_v2.h include this header.
//
//===----------------------------------------------------------------------===//
#ifndef CUEMU_EMU_RUNTIME_H
#define CUEMU_EMU_RUNTIME_H

#include "emu.h"

#include <cstddef>

// ---------------------------------------------------------------- errors
// emu.h has the kernels' subset of cudaError_t; these are the runtime's.
constexpr cudaError_t cudaErrorMemoryAllocation = cudaError_t(2);
constexpr cudaError_t cudaErrorNoDevice = cudaError_t(100);
constexpr cudaError_t cudaErrorInvalidDevice = cudaError_t(101);
constexpr cudaError_t cudaErrorInvalidResourceHandle = cudaError_t(400);
constexpr cudaError_t cudaErrorNotReady = cudaError_t(600);
constexpr cudaError_t cudaErrorIllegalAddress = cudaError_t(700);
constexpr cudaError_t cudaErrorLaunchFailure = cudaError_t(719);

const char *cudaGetErrorName(cudaError_t);

// ---------------------------------------------------------------- devices
struct cudaDeviceProp {
  char name[256];
  size_t totalGlobalMem;
  int major, minor;
  int multiProcessorCount;
};
cudaError_t cudaGetDeviceCount(int *count);
cudaError_t cudaSetDevice(int device);
cudaError_t cudaGetDevice(int *device);
cudaError_t cudaGetDeviceProperties(cudaDeviceProp *prop, int device);
cudaError_t cudaRuntimeGetVersion(int *version);
cudaError_t cudaDriverGetVersion(int *version);
cudaError_t cudaDeviceSynchronize();

// ---------------------------------------------------------------- memory
cudaError_t cudaMalloc(void **p, size_t bytes);
cudaError_t cudaFree(void *p);
cudaError_t cudaMemGetInfo(size_t *freeBytes, size_t *totalBytes);
constexpr cudaMemcpyKind cudaMemcpyHostToHost = cudaMemcpyKind(0);
constexpr cudaMemcpyKind cudaMemcpyHostToDevice = cudaMemcpyKind(1);
constexpr cudaMemcpyKind cudaMemcpyDeviceToHost = cudaMemcpyKind(2);
constexpr cudaMemcpyKind cudaMemcpyDeviceToDevice = cudaMemcpyKind(3);
cudaError_t cudaMemcpy(void *dst, const void *src, size_t bytes,
                       cudaMemcpyKind kind);
cudaError_t cudaMemcpyAsync(void *dst, const void *src, size_t bytes,
                            cudaMemcpyKind kind, cudaStream_t stream = nullptr);

// ---------------------------------------------------------------- streams
constexpr unsigned cudaStreamDefault = 0, cudaStreamNonBlocking = 1;
cudaError_t cudaStreamCreate(cudaStream_t *stream);
cudaError_t cudaStreamCreateWithFlags(cudaStream_t *stream, unsigned flags);
cudaError_t cudaStreamDestroy(cudaStream_t stream);
cudaError_t cudaStreamSynchronize(cudaStream_t stream);
cudaError_t cudaStreamQuery(cudaStream_t stream);

// ---------------------------------------------------------------- events
typedef struct CUevent_st *cudaEvent_t;
constexpr unsigned cudaEventDefault = 0, cudaEventDisableTiming = 2;
cudaError_t cudaEventCreate(cudaEvent_t *event);
cudaError_t cudaEventCreateWithFlags(cudaEvent_t *event, unsigned flags);
cudaError_t cudaEventDestroy(cudaEvent_t event);
cudaError_t cudaEventRecord(cudaEvent_t event, cudaStream_t stream = nullptr);
cudaError_t cudaEventQuery(cudaEvent_t event);
cudaError_t cudaEventSynchronize(cudaEvent_t event);
/// Milliseconds between two completed timing events (created without
/// cudaEventDisableTiming): each stamps the host's steady clock when its
/// stream runs the record.
cudaError_t cudaEventElapsedTime(float *ms, cudaEvent_t start, cudaEvent_t end);
cudaError_t cudaStreamWaitEvent(cudaStream_t stream, cudaEvent_t event,
                                unsigned flags = 0);

// ---------------------------------------------------------------- cuBLAS
enum cublasMath_t {
  CUBLAS_DEFAULT_MATH = 0,
  CUBLAS_PEDANTIC_MATH = 2,
  CUBLAS_TF32_TENSOR_OP_MATH = 3,
};
cublasStatus_t cublasCreate(cublasHandle_t *handle);
cublasStatus_t cublasDestroy(cublasHandle_t handle);
cublasStatus_t cublasSetStream(cublasHandle_t handle, cudaStream_t stream);
cublasStatus_t cublasSetMathMode(cublasHandle_t handle, cublasMath_t mode);
cublasStatus_t cublasSetWorkspace(cublasHandle_t handle, void *workspace,
                                  size_t bytes);
cublasStatus_t cublasGetVersion(cublasHandle_t handle, int *version);

// ---------------------------------------------------------------- emulator
// Not CUDA: what the host code tells the emulator so that its race
// detector knows the bytes a kernel launch reads and writes (a launch's
// arguments do not say how far they reach). CudaBackend.cpp declares each
// instruction's buffers before its kernels (src/cuda/DeviceAccess.h); on a
// GPU the declaration compiles to nothing.
void cudaEmuDeclareAccess(cudaStream_t stream, const void *p, size_t bytes,
                          bool write, const char *what);

#endif
