//===- Passes.td - fsdprt passes ---------------------------*- tablegen -*-===//

#ifndef FSDPRT_PASSES_TD
#define FSDPRT_PASSES_TD

include "mlir/Pass/PassBase.td"

def FsdpPlanMemoryPass : Pass<"fsdp-plan-memory", "::mlir::ModuleOp"> {
  let summary = "Assign every buffer a static offset in one per-rank arena";
  let description = [{
    Computes each buffer's lifetime (persistent kinds: the whole run; others:
    from the first to the last kernel that touches it, the loss buffer to
    the end) and gives it a 64-byte-aligned offset: persistent buffers first,
    in declaration order, then the others greedily by decreasing size at the
    lowest offset where they overlap no buffer whose lifetime overlaps
    theirs. Buffers whose lifetimes are disjoint share space. Unused
    non-persistent buffers are removed.

    Annotates the program with `fsdprt.arena_size` (the bytes the runtime
    allocates, once) and `fsdprt.peak` (the largest sum of live buffer
    bytes over the program, the kernel where it occurs, and the live bytes
    of parameters, gradients, optimizer states, activations, scratch and
    inputs there). With `report`, prints them as a table to stderr.

    With `svg=FILE`, writes a standalone SVG picture of the live bytes of
    one rank at every kernel, stacked by kind (parameters, optimizer
    states, gradients, inputs, gathered parameters, activations, scratch),
    along the program with the forward, backward and optimizer marked and
    a line at each unit boundary; the peak is marked with its value in GB
    and in bytes (`peak 0.206 GB (206084 bytes), kernel #37 ...`), the
    arena with its size. `memory-budget=B` marks a budget, and
    `runtime=cpu|cuda` stacks what that runtime holds outside the arena
    (the lowering's prediction, `fsdprt.outside_arena`) on top, which is
    what a budget counts. A thousand kernels and more are drawn one pixel
    column per range of kernels, each column at the kernel of its range
    with the most live bytes, so the peak keeps its height.

    Before:
    ```mlir
    %3 = fsdprt.buffer <activation> : memref<2x3xf32>
    ```
    After:
    ```mlir
    func.func @train_step() -> memref<f32> attributes {fsdprt.arena_size = 1024 : i64,
        fsdprt.peak = {activations = 96 : i64, bytes = 928 : i64, kernel = 3 : i64, ...},
        fsdprt.program} {
      %3 = fsdprt.buffer <activation> offset 640 : memref<2x3xf32>
    ```
  }];
  let options = [
    Option<"report", "report", "bool", /*default=*/"false",
           "Print the arena size and peak breakdown to stderr">,
    Option<"svgPath", "svg", "std::string", /*default=*/"\"\"",
           "Write a picture of the live bytes along the program here (SVG)">,
    Option<"memoryBudget", "memory-budget", "::mlir::fsdp::ByteSize",
           /*default=*/"0", "A budget to mark in the picture (0: none)">,
    Option<"runtime", "runtime", "std::string", /*default=*/"\"none\"",
           "Whose memory outside the arena the picture stacks on top: "
           "cpu, cuda or none">
  ];
}

#endif // FSDPRT_PASSES_TD
