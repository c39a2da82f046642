//===- RuntimeDialect.td - the fsdprt dialect ----------------*- tablegen -*-===//

#ifndef FSDPRT_DIALECT_TD
#define FSDPRT_DIALECT_TD

include "mlir/IR/OpBase.td"

def FSDPRuntime_Dialect : Dialect {
  let name = "fsdprt";
  let cppNamespace = "::mlir::fsdprt";
  let summary = "The runtime level: buffers in one arena and kernel calls";
  let description = [{
    What `fsdp-run` executes, one step at a time: a function marked
    `fsdprt.program` whose body declares every buffer (`fsdprt.buffer`, a
    memref of static shape with a kind and, once memory is planned, an
    offset in the per-rank arena) and then calls kernels on them in program
    order (`fsdprt.kernel`). The function returns the loss buffer. It is the
    last IR before the plan file and maps onto it one to one.
  }];
  let useDefaultAttributePrinterParser = 1;
  let extraClassDeclaration = [{
    void registerAttributes();
    /// Marks the function that is the step program.
    static constexpr ::llvm::StringLiteral kProgramAttrName = "fsdprt.program";
    /// Set by --fsdp-plan-memory on the program: arena bytes, peak live
    /// bytes, and the live bytes of each buffer kind at that peak.
    static constexpr ::llvm::StringLiteral kArenaSizeAttrName =
        "fsdprt.arena_size";
    static constexpr ::llvm::StringLiteral kPeakAttrName = "fsdprt.peak";
    /// Set by --fsdp-lower-to-runtime on the program: the bytes a rank's
    /// runtime holds outside the arena (Analysis/RuntimeOverhead.h), which
    /// the plan carries to fsdp-run: "cpu" (heap), "cpu_mapped" (resident,
    /// not heap), "cpu_blas_thread" (that per BLAS thread), "cuda" (device).
    static constexpr ::llvm::StringLiteral kOutsideArenaAttrName =
        "fsdprt.outside_arena";
    /// Set by --fsdp-lower-to-runtime on the program: the model FLOPs of
    /// one rank's step (three times its forward's matmul and attention
    /// FLOPs, recomputation not counted), from which fsdp-run derives MFU.
    static constexpr ::llvm::StringLiteral kModelFlopsAttrName =
        "fsdprt.model_flops";
    /// Set by --fsdp-plan-memory=memory-budget=B on the program: the
    /// budget the plan was compiled for, which the plan carries to fsdp-run
    /// (its trace's budget track); absent without one.
    static constexpr ::llvm::StringLiteral kMemoryBudgetAttrName =
        "fsdprt.memory_budget";
  }];
}

class Runtime_Op<string mnemonic, list<Trait> traits = []>
    : Op<FSDPRuntime_Dialect, mnemonic, traits>;

#endif // FSDPRT_DIALECT_TD
