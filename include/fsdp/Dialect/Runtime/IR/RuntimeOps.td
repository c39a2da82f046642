//===- RuntimeOps.td - fsdprt operations -------------------*- tablegen -*-===//

#ifndef FSDPRT_OPS_TD
#define FSDPRT_OPS_TD

include "fsdp/Dialect/Runtime/IR/RuntimeDialect.td"
include "fsdp/Dialect/Runtime/IR/RuntimeAttrs.td"
include "mlir/IR/SymbolInterfaces.td"
include "mlir/Interfaces/SideEffectInterfaces.td"

def Runtime_BufferOp : Runtime_Op<"buffer", [
    MemoryEffects<[MemAlloc<DefaultResource>]>]> {
  let summary = "a buffer of the step program";
  let description = [{
    Declares one buffer. A `<param>` buffer (and its `<adam_m>` and
    `<adam_v>` moments, and a `<shard_copy>`: the shard rounded to the
    compute type) names either an `fsdp.param` or, after sharding,
    the `fsdp.unit` whose local shard it holds. Its kind decides its lifetime (inputs, parameters,
    shard copies and optimizer moments live for the whole run; everything else lives from
    the first to the last kernel that touches it) and its row in the memory
    report. A parameter buffer, and the moments of a parameter, name the
    `fsdp.param` they belong to; an input names the position of the step
    input it receives. `--fsdp-plan-memory` sets `offset`, the byte offset
    in the arena.

    ```mlir
    %0 = fsdprt.buffer <input> input 0 offset 0 : memref<4x64xi32>
    %1 = fsdprt.buffer <param> param @wte offset 2048 : memref<256x64xf32>
    %2 = fsdprt.buffer <activation> offset 70272 : memref<4x64x64xf32>
    ```
  }];
  let arguments = (ins Runtime_BufferKindAttr:$kind,
                       OptionalAttr<FlatSymbolRefAttr>:$param,
                       OptionalAttr<I64Attr>:$input,
                       OptionalAttr<I64Attr>:$offset);
  let results = (outs AnyStaticShapeMemRef:$buffer);
  let assemblyFormat = [{
    $kind (`param` $param^)? (`input` $input^)? (`offset` $offset^)?
    attr-dict `:` type($buffer)
  }];
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    ::mlir::MemRefType getType() { return getBuffer().getType(); }
    int64_t getSizeInBytes();
  }];
}

def Runtime_ViewOp : Runtime_Op<"view", [Pure]> {
  let summary = "a buffer inside another buffer";
  let description = [{
    Elements `offset` .. of `base`, seen with another static shape: a
    parameter inside a gathered flat parameter, or a parameter gradient
    inside a unit's full-size gradient. No data moves; the memory planner
    places the view at the base's offset plus its own, and the base lives
    as long as any view of it is used.

    ```mlir
    %w = fsdprt.view %full[1536] : memref<7087872xf32> -> memref<2304x768xf32>
    ```
  }];
  let arguments = (ins AnyStaticShapeMemRef:$base,
                       ConfinedAttr<I64Attr, [IntNonNegative]>:$offset);
  let results = (outs AnyStaticShapeMemRef:$result);
  let assemblyFormat = [{
    $base `[` $offset `]` attr-dict `:` type($base) `->` type($result)
  }];
  let hasVerifier = 1;
}

def Runtime_KernelOp : Runtime_Op<"kernel", [AttrSizedOperandSegments,
    DeclareOpInterfaceMethods<MemoryEffectsOpInterface>]> {
  let summary = "one kernel call of the step program";
  let description = [{
    Calls the kernel `name` (an fsdp op name, or `fill`) with input buffers
    `ins` and output buffers `outs`, which it overwrites. `params` holds the
    kernel's numeric parameters by name (`heads`, `epsilon`, the AdamW
    hyper-parameters, a fill value); `unit` names the FSDP unit the call
    computes with, for traces. Kernels run in program order.

    ```mlir
    fsdprt.kernel "linear" ins(%3, %4 : memref<256x64xf32>, memref<192x64xf32>)
        outs(%5 : memref<256x192xf32>) unit "h.0"
    fsdprt.kernel "attention" ins(%5 : memref<4x64x192xf32>)
        outs(%6, %7 : memref<4x64x64xf32>, memref<4x4x64x64xf32>)
        params {heads = 4 : i64}
    ```
  }];
  let arguments = (ins StrAttr:$name, Variadic<AnyStaticShapeMemRef>:$ins,
                       Variadic<AnyStaticShapeMemRef>:$outs,
                       OptionalAttr<DictionaryAttr>:$params,
                       OptionalAttr<StrAttr>:$unit);
  let assemblyFormat = [{
    $name (`ins` `(` $ins^ `:` type($ins) `)`)?
    (`outs` `(` $outs^ `:` type($outs) `)`)? (`params` $params^)?
    (`unit` $unit^)? attr-dict
  }];
  let hasVerifier = 1;
}

def Runtime_EvalEndOp : Runtime_Op<"eval_end"> {
  let summary = "where the evaluation step (forward and loss) ends";
  let description = [{
    Splits the step program in two: the kernels above it are the forward
    and the loss (the evaluation step, which `fsdp-run --val-data` runs
    alone on held-out batches), the kernels below it the rest of the
    training step. `--fsdp-lower-to-runtime` places it right after the
    last kernel that writes the loss the program returns.

    The evaluation step is a prefix of the training step, not a second
    program: it runs the same kernels on the same buffers, so it needs no
    memory of its own (its peak is at most the step's) and its loss on a
    batch is the training forward's, bit for bit. It must be free of side
    effects on the training state: no kernel above it writes a parameter
    or an optimizer moment. A collective it starts whose wait lies below
    it is waited for when the evaluation ends (every rank runs the same
    prefix, so they agree).

    ```mlir
    fsdprt.kernel "cross_entropy" ins(%9, %1 : memref<256x96xf32>, memref<4x64xi32>)
        outs(%0, %10 : memref<f32>, memref<256xf32>)
    fsdprt.eval_end
    fsdprt.kernel "cross_entropy_backward" ...
    ```
  }];
  let assemblyFormat = "attr-dict";
  let hasVerifier = 1;
}

#endif // FSDPRT_OPS_TD
