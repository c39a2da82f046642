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
