//===- NcclTypesTest.cpp - the plan-type to NCCL-type table ---------------===//
//
// Needs no GPU: checks that every plan element type maps to exactly one
// NCCL type of the same size, that no two plan types share one, and the
// collectives' f32 entry. Prints "nccl-types: N passed, M failed".
//
//===----------------------------------------------------------------------===//

#include "cuda/NcclTypes.h"

#include <cstdio>
#include <set>

using namespace fsdp;

int main() {
  int passed = 0, failed = 0;
  auto check = [&](bool ok, const char *what, int detail) {
    ok ? ++passed : ++failed;
    if (!ok)
      std::fprintf(stderr, "nccl-types: FAILED: %s (%d)\n", what, detail);
  };
  std::set<int> seen;
  for (uint32_t d = 0; d < plan::kDTypeNames.size(); ++d) {
    auto dtype = plan::DType(d);
    int matches = 0;
    for (const rt::cuda::NcclType &type : rt::cuda::kNcclTypes)
      matches += type.dtype == dtype;
    check(matches == 1, "one NCCL type per plan type", int(d));
    const rt::cuda::NcclType &type = rt::cuda::ncclTypeOf(dtype);
    check(type.dtype == dtype, "lookup finds its own entry", int(d));
    check(type.bytes == plan::dtypeSize(dtype), "sizes agree", int(d));
    check(seen.insert(int(type.nccl)).second, "NCCL types distinct", int(d));
  }
  check(rt::cuda::ncclTypeOf(plan::DType::F32).nccl == ncclFloat32,
        "f32 is ncclFloat32", 0);
  check(rt::cuda::ncclTypeOf(plan::DType::BF16).nccl == ncclBfloat16,
        "bf16 is ncclBfloat16", 0);
  std::printf("nccl-types: %d passed, %d failed\n", passed, failed);
  return failed ? 1 : 0;
}
