//===- Passes.td - fsdp dialect passes ---------------------*- tablegen -*-===//
//
// The fsdp dialect's passes, one file per concern: building the step,
// distributing it, scheduling it, reporting on it. The order of the includes
// is the order of the generated declarations and of the pass docs.
//
//===----------------------------------------------------------------------===//

#ifndef FSDP_PASSES_TD
#define FSDP_PASSES_TD

include "fsdp/Dialect/FSDP/Transforms/ModelPasses.td"
include "fsdp/Dialect/FSDP/Transforms/ShardingPasses.td"
include "fsdp/Dialect/FSDP/Transforms/SchedulingPasses.td"
include "fsdp/Dialect/FSDP/Transforms/AnalysisPasses.td"

#endif // FSDP_PASSES_TD
