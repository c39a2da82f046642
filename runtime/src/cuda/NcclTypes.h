//===- NcclTypes.h - plan element types as NCCL data types ------*- C++ -*-===//
//
// The one table that maps the plan's element types to NCCL's, checked by
// runtime/test/NcclTypesTest.cpp (which needs no GPU): every plan type has
// exactly one NCCL type of the same size. Collectives move f32 or bf16
// (mixed precision: bf16 gathered parameters and gradients) through it.
//
//===----------------------------------------------------------------------===//

#ifndef FSDP_RUNTIME_CUDA_NCCLTYPES_H
#define FSDP_RUNTIME_CUDA_NCCLTYPES_H

#include "fsdp/runtime/PlanFormat.h"

#include <nccl.h>

#include <array>

namespace fsdp::rt::cuda {

struct NcclType {
  plan::DType dtype;
  ncclDataType_t nccl;
  size_t bytes;
};

inline constexpr std::array<NcclType, 3> kNcclTypes = {{
    {plan::DType::F32, ncclFloat32, 4},
    {plan::DType::I32, ncclInt32, 4},
    {plan::DType::BF16, ncclBfloat16, 2},
}};

inline const NcclType &ncclTypeOf(plan::DType dtype) {
  for (const NcclType &type : kNcclTypes)
    if (type.dtype == dtype)
      return type;
  return kNcclTypes[0]; // unreachable: the table covers every DType
}

} // namespace fsdp::rt::cuda

#endif // FSDP_RUNTIME_CUDA_NCCLTYPES_H
