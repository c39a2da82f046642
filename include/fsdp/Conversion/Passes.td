//===- Passes.td - fsdp conversion passes ------------------*- tablegen -*-===//

#ifndef FSDP_CONVERSION_PASSES_TD
#define FSDP_CONVERSION_PASSES_TD

include "mlir/Pass/PassBase.td"

def FsdpLowerToRuntimePass : Pass<"fsdp-lower-to-runtime", "::mlir::ModuleOp"> {
  let summary = "Lower @train_step to buffers and kernel calls (fsdprt)";
  let description = [{
    Replaces the graph-level functions by the step program the runtime
    executes: a function `@train_step` marked `fsdprt.program`, taking no
    arguments and returning the loss buffer. Every tensor value becomes a
    `fsdprt.buffer` (token ids and targets become `<input>` buffers,
    parameters `<param>` buffers, the gradients AdamW consumes `<grad>`
    buffers, everything else `<activation>`), and every op a
    `fsdprt.kernel` call in program order; a load is no copy, just the
    parameter's buffer. Each AdamW adds the parameter's two moment buffers;
    attention's backward gets a `<scratch>` buffer. Unit regions are
    flattened; each call remembers its unit for traces. Parameters and units
    stay, as the plan's description of the model. The step number is not a
    buffer: the runtime passes it to AdamW. The program records, as
    `fsdprt.outside_arena = {cpu, cuda}`, what a rank's runtime will hold
    outside the arena on each backend (the memory report's lines, from the
    graph-level step before it is replaced); the plan carries it.

    Over a shard group of one rank (world size 1, or a mesh R x 1) a
    gather and a reduce-scatter exchange nothing: the shard is the whole
    flat parameter and the full-size gradient is the gradient shard. Such
    a local copy (`isLocalCopy`: same element type, a unit that is not
    expert-parallel, whose reduce-scatter scales by 1 / G) lowers to no
    kernel: the region's views read the unit's shard buffer in place, the
    AdamW (and a replica all-reduce) reads the packed gradient in place,
    and the wait of a started one is dropped. The memory profile and the
    simulator count nothing for it either. A mixed-precision gather (bf16
    from an f32 shard) stays a kernel: it rounds.

    Before:
    ```mlir
    func.func @train_step(%x: tensor<2x4xf32>, %t: tensor<2xi32>, %step: i64) -> tensor<f32> attributes {fsdp.train_step} {
      %0 = fsdp.compute @layers.0 forward ins(%x : tensor<2x4xf32>) -> tensor<2x3xf32> {
      ^bb0(%a: tensor<2x4xf32>):
        %w = fsdp.load @layers.0.w : tensor<3x4xf32>
        %y = fsdp.linear %a, %w : (tensor<2x4xf32>, tensor<3x4xf32>) -> tensor<2x3xf32>
        fsdp.yield %y : tensor<2x3xf32>
      }
      %l = fsdp.cross_entropy %0, %t : (tensor<2x3xf32>, tensor<2xi32>) -> tensor<f32>
      ...
      fsdp.adamw @layers.0.w, %g, %step {...} : tensor<3x4xf32>
      return %l : tensor<f32>
    }
    ```
    After:
    ```mlir
    func.func @train_step() -> memref<f32> attributes {fsdprt.outside_arena = {cpu = 3502208 : i64, cuda = 2821718016 : i64}, fsdprt.program} {
      %0 = fsdprt.buffer <input> input 0 : memref<2x4xf32>
      %1 = fsdprt.buffer <input> input 1 : memref<2xi32>
      %2 = fsdprt.buffer <param> param @layers.0.w : memref<3x4xf32>
      %3 = fsdprt.buffer <activation> : memref<2x3xf32>
      ...
      fsdprt.kernel "linear" ins(%0, %2 : memref<2x4xf32>, memref<3x4xf32>) outs(%3 : memref<2x3xf32>) unit "layers.0"
      fsdprt.kernel "cross_entropy" ins(%3, %1 : memref<2x3xf32>, memref<2xi32>) outs(%4 : memref<f32>)
      ...
      fsdprt.kernel "adamw" ins(%9 : memref<3x4xf32>) outs(%2, %10, %11 : memref<3x4xf32>, memref<3x4xf32>, memref<3x4xf32>) params {beta1 = 0.9 : f32, ...}
      return %4 : memref<f32>
    }
    ```
  }];
  let dependentDialects = ["::mlir::fsdprt::FSDPRuntimeDialect",
                           "::mlir::func::FuncDialect"];
}

#endif // FSDP_CONVERSION_PASSES_TD
