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
           "Print the arena size and peak breakdown to stderr">
  ];
}

#endif // FSDPRT_PASSES_TD
