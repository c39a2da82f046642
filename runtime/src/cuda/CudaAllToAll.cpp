//===- CudaAllToAll.cpp - expert parallelism's all-to-alls on CUDA --------===//

#include "CudaAllToAll.h"

#include "fsdp/runtime/exec/AllToAll.h"

#include <cuda_runtime_api.h>

#include <vector>

namespace fsdp::rt::cuda {
namespace {

/// `n` int32 counts from the device, after everything before on `stream`.
bool countsToHost(const unsigned char *at, int64_t n, cudaStream_t stream,
                  std::vector<int32_t> &out, std::string &error) {
  out.resize(size_t(n));
  cudaError_t code =
      cudaMemcpyAsync(out.data(), at, sizeof(int32_t) * out.size(),
                      cudaMemcpyDeviceToHost, stream);
  if (code == cudaSuccess)
    code = cudaStreamSynchronize(stream);
  if (code != cudaSuccess)
    error =
        std::string("copying counts to the host: ") + cudaGetErrorString(code);
  return code == cudaSuccess;
}

} // namespace

bool runAllToAll(const Plan &plan, const Instruction &inst,
                 unsigned char *arena, Communicator &host, Nccl &nccl,
                 cudaStream_t stream, uint64_t &moved, std::string &error) {
  auto address = [&](uint32_t id) { return arena + plan.buffers[id].offset; };
  const size_t index = size_t(&inst - plan.program.data());
  const std::string at = "kernel #" + std::to_string(index) + " (" +
                         std::string(inst.kernel->name) + "): ";
  const bool counts = inst.kernel->opcode == plan::Opcode::AllToAllCounts;
  const std::vector<int64_t> &shape =
      plan.buffers[inst.ins[counts ? 0 : 1]].shape;
  const int64_t G = shape[0], L = shape[1];
  if (host.size() != G || nccl.worldSize() != G) {
    error = at + "counts for " + std::to_string(G) +
            " ranks on an expert group of " + std::to_string(host.size());
    return false;
  }
  std::vector<int32_t> send, recv;
  if (counts) {
    if (!countsToHost(address(inst.ins[0]), G * L, stream, send, error))
      return false;
    std::vector<int64_t> wide(send.begin(), send.end()), got(size_t(G * L));
    host.allToAllCounts(wide.data(), got.data(), L);
    recv.assign(got.begin(), got.end());
    cudaError_t code = cudaMemcpyAsync(address(inst.outs[0]), recv.data(),
                                       sizeof(int32_t) * recv.size(),
                                       cudaMemcpyHostToDevice, stream);
    if (code == cudaSuccess) // `recv` is freed on return
      code = cudaStreamSynchronize(stream);
    if (code != cudaSuccess)
      error = at + "copying counts to the device: " + cudaGetErrorString(code);
    return code == cudaSuccess;
  }
  if (!countsToHost(address(inst.ins[1]), G * L, stream, send, error) ||
      !countsToHost(address(inst.ins[2]), G * L, stream, recv, error))
    return false;
  const BufferDesc &input = plan.buffers[inst.ins[0]];
  const BufferDesc &result = plan.buffers[inst.outs[0]];
  AllToAllRows rows;
  if (!allToAllRows(send.data(), recv.data(), G, L, input.shape[0],
                    result.shape[0], index, rows, error))
    return false;
  const uint64_t rowBytes =
      uint64_t(result.shape[1]) * plan::dtypeSize(result.dtype);
  if (!nccl.allToAllV(address(inst.ins[0]), rows.send.data(),
                      address(inst.outs[0]), rows.recv.data(), result.shape[1],
                      result.dtype, stream, error)) {
    error = at + error;
    return false;
  }
  // Rows past those received are zero, as the kernel table says.
  const uint64_t filled = uint64_t(rows.received) * rowBytes;
  cudaError_t code = cudaMemsetAsync(address(inst.outs[0]) + filled, 0,
                                     result.size - filled, stream);
  if (code != cudaSuccess) {
    error = at +
            "zeroing the rows past those received: " + cudaGetErrorString(code);
    return false;
  }
  moved += allToAllWireBytes(rows, host.rank(), rowBytes);
  return true;
}

} // namespace fsdp::rt::cuda
