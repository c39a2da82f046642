//===- PlanFormatCheck.cpp - the shared headers are standard C++17 --------===//
//
// Compiled (never run) with -std=c++17 -pedantic-errors and no GNU
// extensions against fsdp_plan_format alone: the headers the compiler and
// the runtime share use nothing beyond ISO C++17 and its library (no
// __int128, no builtins) and no other runtime header. Their
// static_asserts (the kernel table's consistency, the shard layout's
// examples) run here too.
//
//===----------------------------------------------------------------------===//

#include "fsdp/runtime/PlanFormat.h"
#include "fsdp/runtime/ShardLayout.h"

namespace plan = fsdp::plan;

static_assert(plan::kernelInfo(plan::Opcode::Linear).minInputs == 2 &&
              plan::kernelInfo(plan::Opcode::Linear).maxInputs == 3);
static_assert(plan::findKernel("all_gather") ==
              &plan::kernelInfo(plan::Opcode::AllGather));
static_assert(plan::admits(plan::ElementRule::TokenIds, plan::DType::I32) &&
              !plan::admits(plan::ElementRule::Float, plan::DType::I32));
// Indices (a router's choices, a sort's order, positions and offsets) are
// i32 only, and only ever a kernel's results: the table is refused with
// one as scratch or updated in place.
static_assert(plan::admits(plan::ElementRule::Indices, plan::DType::I32) &&
              !plan::admits(plan::ElementRule::Indices, plan::DType::F32) &&
              !plan::admits(plan::ElementRule::Indices, plan::DType::BF16));
constexpr bool indicesRefusedAs(plan::OperandRole role) {
  auto table = plan::kKernels;
  table[size_t(plan::Opcode::MoeSort)].outs[2].role = role;
  return !plan::isWellFormed(table);
}
static_assert(plan::kernelInfo(plan::Opcode::MoeSort).outs[2].rule ==
                  plan::ElementRule::Indices &&
              !indicesRefusedAs(plan::OperandRole::Result) &&
              indicesRefusedAs(plan::OperandRole::Scratch) &&
              indicesRefusedAs(plan::OperandRole::Updated));
