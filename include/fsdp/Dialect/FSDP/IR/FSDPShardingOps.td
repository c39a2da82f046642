//===- FSDPShardingOps.td - fsdp schedule-level ops --------*- tablegen -*-===//
//
// The ops --fsdp-shard introduces: collectives, views into gathered flat
// parameters, explicit frees, and the optimizer step on a local shard.
// None is Pure: collectives and frees must never be CSE'd, hoisted, sunk or
// dropped, and their order is part of the program's meaning (every rank
// must issue the same collectives in the same order).
//
//===----------------------------------------------------------------------===//

#ifndef FSDP_SHARDING_OPS_TD
#define FSDP_SHARDING_OPS_TD

/// The order of collectives and frees: ops on this resource are never
/// reordered across each other, removed or duplicated.
def FSDP_CollectiveResource : Resource<"::mlir::fsdp::CollectiveResource">;

def FSDP_AllGatherOp : FSDP_Op<"all_gather", [
    DeclareOpInterfaceMethods<SymbolUserOpInterface>,
    MemoryEffects<[MemRead<FSDP_ParamResource>,
                   MemWrite<FSDP_CollectiveResource>]>]> {
  let summary = "gathers a unit's flat parameter from every rank's shard";
  let description = [{
    Every rank contributes its local shard of unit `unit` (rank k holds
    elements floor(k P / N) .. floor((k + 1) P / N) - 1 of the unit's P
    flattened parameter elements) and receives the whole flat parameter,
    every element at its global offset (all-gatherv semantics; shards differ
    by at most one element). The result must be freed with `fsdp.free`.
    `over "shard"` names the group it runs over, the shard group of the
    module's mesh (set under hybrid sharding; left out, it is "shard",
    which without a replicate axis is every rank). The same holds for
    every collective of the step: reduce-scatters and clipping's
    `all_reduce_sum` run over "shard", `all_reduce_mean` over "replicate".

    ```mlir
    %full = fsdp.all_gather @h.0 : tensor<7087872xf32>
    ```
  }];
  let arguments = (ins FlatSymbolRefAttr:$unit, OptionalAttr<StrAttr>:$axis);
  let results = (outs 1DTensorOf<[AnyFloat]>:$result);
  let assemblyFormat = "$unit (`over` $axis^)? attr-dict `:` type($result)";
  let hasVerifier = 1;
}

def FSDP_ViewOp : FSDP_Op<"view", [Pure]> {
  let summary = "one parameter inside a gathered flat parameter";
  let description = [{
    The elements `offset` .. `offset + numel(result) - 1` of a flat tensor,
    seen with the parameter's shape. No data moves: after lowering, the
    result is a view of the gathered buffer.

    ```mlir
    %w = fsdp.view %full[1536] : tensor<7087872xf32> -> tensor<2304x768xf32>
    ```
  }];
  let arguments = (ins 1DTensorOf<[AnyFloat]>:$source,
                       ConfinedAttr<I64Attr, [IntNonNegative]>:$offset);
  let results = (outs FSDP_FloatTensor:$result);
  let assemblyFormat = [{
    $source `[` $offset `]` attr-dict `:` type($source) `->` type($result)
  }];
  let hasVerifier = 1;
}

def FSDP_PackOp : FSDP_Op<"pack", [Pure]> {
  let summary = "a unit's parameter gradients as one flat tensor";
  let description = [{
    Concatenates the flattened operands, in order, into one flat tensor
    whose size is the sum of theirs: the full-size gradient of a unit, laid
    out like its flat parameter. After lowering the operands are views into
    the result, so the backward kernels write straight into it.
  }];
  let arguments = (ins Variadic<FSDP_FloatTensor>:$values);
  let results = (outs 1DTensorOf<[AnyFloat]>:$result);
  let assemblyFormat = "$values attr-dict `:` functional-type($values, $result)";
  let hasVerifier = 1;
}

def FSDP_ReduceScatterOp : FSDP_Op<"reduce_scatter", [
    DeclareOpInterfaceMethods<SymbolUserOpInterface>,
    MemoryEffects<[MemWrite<FSDP_CollectiveResource>]>]> {
  let summary = "averages a unit's gradient over ranks into the local shard";
  let description = [{
    Every rank contributes its full-size flat gradient of unit `unit`; rank
    k receives the average over ranks of elements floor(k P / N) ..
    floor((k + 1) P / N) - 1, its gradient shard, aligned with its parameter
    and optimizer shards. The result has the largest shard's size,
    ceil(P / N); a rank whose shard is one element shorter leaves the last
    one unused.

    ```mlir
    %g = fsdp.reduce_scatter %flat @h.0 : tensor<7087872xf32> -> tensor<1771968xf32>
    ```
  }];
  let arguments = (ins 1DTensorOf<[AnyFloat]>:$source, FlatSymbolRefAttr:$unit,
                       OptionalAttr<StrAttr>:$axis);
  let results = (outs 1DTensorOf<[AnyFloat]>:$result);
  let assemblyFormat = [{
    $source $unit (`over` $axis^)? attr-dict `:` type($source) `->` type($result)
  }];
  let hasVerifier = 1;
}

/// The f32 scalars of gradient clipping (sums of squares, the coefficient),
/// which the assembly formats leave implicit.
def FSDP_F32Scalar : 0DTensorOf<[F32]>,
    BuildableType<"::mlir::RankedTensorType::get({}, $_builder.getF32Type())">;

def FSDP_FreeOp : FSDP_Op<"free", [
    MemoryEffects<[MemWrite<FSDP_CollectiveResource>]>]> {
  let summary = "ends the life of a gathered parameter or a full gradient";
  let description = [{
    Marks the point after which `value` (an all-gathered flat parameter, or
    a packed full-size gradient) is not used again: its memory is
    reclaimed there. `--fsdp-verify` rejects any use after it.
  }];
  let arguments = (ins 1DTensorOf<[AnyFloat]>:$value);
  let assemblyFormat = "$value attr-dict `:` type($value)";
}

def FSDP_AdamWShardOp : FSDP_Op<"adamw_shard", [
    DeclareOpInterfaceMethods<SymbolUserOpInterface>,
    MemoryEffects<[MemRead<FSDP_ParamResource>,
                   MemWrite<FSDP_ParamResource>]>]> {
  let summary = "AdamW on a unit's local shard, with no communication";
  let description = [{
    Updates this rank's shard of unit `unit` (and the optimizer moments
    aligned with it) from its gradient shard. Elements that belong to a
    `no_weight_decay` parameter get no decay, including where such a
    parameter's range is split across ranks. With `scale` (a scalar, the
    coefficient of `fsdp.clip_coefficient`), the update is AdamW's on the
    gradient times `scale`: the moments see the clipped gradient. The
    gradient is f32, or bf16 (mixed precision's reduced shard: the op
    widens it as it reads it, exactly, instead of a cast before it).

    ```mlir
    fsdp.adamw_shard @h.0, %g, %step {lr = 3.0e-4 : f32, beta1 = 0.9 : f32,
        beta2 = 0.95 : f32, eps = 1.0e-8 : f32, weight_decay = 0.1 : f32}
        : tensor<1771968xf32>
    fsdp.adamw_shard @h.0, %g, %step scale %coef {...} : tensor<1771968xf32>
    ```
  }];
  let arguments = (ins FlatSymbolRefAttr:$unit, 1DTensorOf<[AnyFloat]>:$grad,
                       I64:$step, Optional<FSDP_F32Scalar>:$scale,
                       F32Attr:$lr, F32Attr:$beta1, F32Attr:$beta2,
                       F32Attr:$eps, F32Attr:$weight_decay);
  let assemblyFormat = [{
    $unit `,` $grad `,` $step (`scale` $scale^)? attr-dict `:` type($grad)
  }];
}

//===----------------------------------------------------------------------===//
// Gradient clipping by global norm (--fsdp-clip-grad)
//===----------------------------------------------------------------------===//

def FSDP_GradSqSumOp : FSDP_KernelOp<"grad_sq_sum", "GradSqSum", [Pure,
    DeclareOpInterfaceMethods<SymbolUserOpInterface>],
    ["getKernelScratch"]> {
  let summary = "the sum of squares of this rank's part of a gradient shard";
  let description = [{
    The sum of the squares of this rank's elements of unit `unit`'s
    gradient shard `grad` (a reduce-scatter's result: rank k's elements
    floor(k P / N) .. floor((k + 1) P / N) - 1 of the unit's P; the
    shard has the largest shard's size, ceil(P / N), and a rank whose
    shard is one element shorter leaves its last one out), accumulated in
    double and added to `acc` when given, so that the sums of a step's
    units chain into one scalar. Every rank computes its own part; an
    `fsdp.all_reduce_sum` of the chain's end is the global one.

    ```mlir
    %s0 = fsdp.grad_sq_sum @h.1, %g1 : tensor<1771968xf32>
    %s1 = fsdp.grad_sq_sum @h.0, %g0, %s0 : tensor<1771968xf32>
    ```
  }];
  let arguments = (ins FlatSymbolRefAttr:$unit, 1DTensorOf<[AnyFloat]>:$grad,
                       Optional<FSDP_F32Scalar>:$acc);
  let results = (outs FSDP_F32Scalar:$result);
  let assemblyFormat = [{
    $unit `,` $grad (`,` $acc^)? attr-dict `:` type($grad)
  }];
  let builders = [OpBuilder<(ins "::mlir::FlatSymbolRefAttr":$unit,
                                 "::mlir::Value":$grad, "::mlir::Value":$acc), [{
    build($_builder, $_state,
          ::mlir::RankedTensorType::get({}, $_builder.getF32Type()), unit, grad,
          acc);
  }]>];
}

def FSDP_AllReduceSumOp : FSDP_Op<"all_reduce_sum", [
    SameOperandsAndResultType,
    MemoryEffects<[MemWrite<FSDP_CollectiveResource>]>]> {
  let summary = "sums a scalar over the ranks of the shard axis";
  let description = [{
    Every rank contributes `value` and receives the sum over all ranks of
    the mesh's shard axis (the same on every rank). A collective: on the
    collective resource, it is never reordered with the other collectives,
    removed or duplicated. It runs where it stands (synchronously, on the
    compute stream): one scalar costs the collective's latency, and what
    follows it needs its result.

    ```mlir
    %global = fsdp.all_reduce_sum %local : tensor<f32>
    ```
  }];
  let arguments = (ins FSDP_F32Scalar:$value, OptionalAttr<StrAttr>:$axis);
  let results = (outs FSDP_F32Scalar:$result);
  let assemblyFormat = "$value (`over` $axis^)? attr-dict `:` type($value)";
  let hasVerifier = 1;
}

def FSDP_ClipCoefficientOp : FSDP_KernelOp<"clip_coefficient",
    "ClipCoefficient", [Pure]> {
  let summary = "the scale that clips gradients to a global norm";
  let description = [{
    PyTorch's `clip_grad_norm_` coefficient from the global sum of squares
    of the gradients: `min(1, max_norm / (sqrt(sum_sq) + 1e-6))` (computed
    in double, rounded to f32). With a `max_norm` above the norm it is
    exactly 1, and scaling by it changes nothing. As PyTorch's, an
    infinite sum gives 0 and a NaN one NaN.

    ```mlir
    %coef = fsdp.clip_coefficient %global {max_norm = 1.0 : f32}
    ```
  }];
  let arguments = (ins FSDP_F32Scalar:$sum_sq, F32Attr:$max_norm);
  let results = (outs FSDP_F32Scalar:$result);
  let assemblyFormat = "$sum_sq attr-dict";
  let builders = [OpBuilder<(ins "::mlir::Value":$sumSq,
                                 "::mlir::FloatAttr":$maxNorm), [{
    build($_builder, $_state, sumSq.getType(), sumSq, maxNorm);
  }]>];
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Asynchronous collectives (after --fsdp-schedule)
//===----------------------------------------------------------------------===//

def FSDP_AllGatherStartOp : FSDP_Op<"all_gather_start", [
    DeclareOpInterfaceMethods<SymbolUserOpInterface>,
    MemoryEffects<[MemRead<FSDP_ParamResource>,
                   MemWrite<FSDP_CollectiveResource>]>]> {
  let summary = "starts gathering a unit's flat parameter on a stream";
  let description = [{
    The asynchronous form of `fsdp.all_gather`: issues the collective on
    stream `stream` and returns a token and the tensor it fills. The tensor
    may be read only after an `fsdp.wait` on the token; its memory is taken
    from the start, which is what prefetching costs.

    ```mlir
    %tok, %full = fsdp.all_gather_start @h.1 stream 1 : tensor<7087872xf32>
    ...
    fsdp.wait %tok
    ```

    `grouped` (set by `--fsdp-schedule`'s `bucket-bytes`) joins this start
    to the start right before it, of the same kind and stream: the group is
    issued as one fused collective (one NCCL group launch; back to back on
    an MPI stream thread), so small units pay the collective's latency once.

    ```mlir
    %t1, %g1 = fsdp.all_gather_start @ln.0 stream 1 : tensor<1536xf32>
    %t2, %g2 = fsdp.all_gather_start @ln.1 stream 1 grouped : tensor<1536xf32>
    ```
  }];
  let arguments = (ins FlatSymbolRefAttr:$unit,
                       ConfinedAttr<I64Attr, [IntNonNegative]>:$stream,
                       UnitAttr:$grouped, OptionalAttr<StrAttr>:$axis);
  let results = (outs FSDP_TokenType:$token, 1DTensorOf<[AnyFloat]>:$result);
  let assemblyFormat = [{
    $unit `stream` $stream (`grouped` $grouped^)? (`over` $axis^)? attr-dict
    `:` type($result)
  }];
  let hasVerifier = 1;
}

def FSDP_ReduceScatterStartOp : FSDP_Op<"reduce_scatter_start", [
    DeclareOpInterfaceMethods<SymbolUserOpInterface>,
    MemoryEffects<[MemWrite<FSDP_CollectiveResource>]>]> {
  let summary = "starts reducing a unit's gradient into the local shard";
  let description = [{
    The asynchronous form of `fsdp.reduce_scatter` on stream `stream`. The
    full-size gradient must stay alive, and the shard unread, until an
    `fsdp.wait` on the token. `grouped` joins it to the reduce-scatter
    start right before it, as for `fsdp.all_gather_start`.
  }];
  let arguments = (ins 1DTensorOf<[AnyFloat]>:$source, FlatSymbolRefAttr:$unit,
                       ConfinedAttr<I64Attr, [IntNonNegative]>:$stream,
                       UnitAttr:$grouped, OptionalAttr<StrAttr>:$axis);
  let results = (outs FSDP_TokenType:$token, 1DTensorOf<[AnyFloat]>:$result);
  let assemblyFormat = [{
    $source $unit `stream` $stream (`grouped` $grouped^)? (`over` $axis^)?
    attr-dict `:` type($source) `->` type($result)
  }];
  let hasVerifier = 1;
}

def FSDP_AllReduceMeanOp : FSDP_Op<"all_reduce_mean", [
    DeclareOpInterfaceMethods<SymbolUserOpInterface>,
    AllTypesMatch<["source", "result"]>,
    MemoryEffects<[MemWrite<FSDP_CollectiveResource>]>]> {
  let summary = "averages a unit's gradient shard over the replicas";
  let description = [{
    Hybrid sharding (a mesh `replicate = R x shard = S` with R > 1): the
    shard group r (ranks r S .. r S + S - 1) has reduce-scattered unit
    `unit`'s gradient into the mean over its S ranks; this all-reduce
    averages that shard over the R ranks that hold the same shard (shard
    index k: ranks k, S + k, ..., (R - 1) S + k), so that every rank ends
    with the mean over all R S ranks and the R replicas of a shard stay
    identical. `axis` names the group: always `"replicate"`. The result
    has the source's type and, after lowering, its buffer (in place).

    ```mlir
    %g = fsdp.reduce_scatter %flat @h.0 over "shard" : tensor<7087872xf32> -> tensor<1771968xf32>
    %m = fsdp.all_reduce_mean %g @h.0 over "replicate" : tensor<1771968xf32>
    ```
  }];
  let arguments = (ins 1DTensorOf<[AnyFloat]>:$source, FlatSymbolRefAttr:$unit,
                       StrAttr:$axis);
  let results = (outs 1DTensorOf<[AnyFloat]>:$result);
  let assemblyFormat = [{
    $source $unit `over` $axis attr-dict `:` type($source)
  }];
  let hasVerifier = 1;
  let builders = [OpBuilder<(ins "::mlir::Value":$source,
                                 "::mlir::FlatSymbolRefAttr":$unit), [{
    build($_builder, $_state, source.getType(), source, unit,
          $_builder.getStringAttr("replicate"));
  }]>];
}

def FSDP_AllReduceMeanStartOp : FSDP_Op<"all_reduce_mean_start", [
    DeclareOpInterfaceMethods<SymbolUserOpInterface>,
    AllTypesMatch<["source", "result"]>,
    MemoryEffects<[MemWrite<FSDP_CollectiveResource>]>]> {
  let summary = "starts averaging a gradient shard over the replicas";
  let description = [{
    The asynchronous form of `fsdp.all_reduce_mean`, on stream `stream`
    (the replica stream, 3, of its own: it never queues behind a
    reduce-scatter or a gather). The shard may not be read until an
    `fsdp.wait` on the token.

    ```mlir
    %tok, %m = fsdp.all_reduce_mean_start %g @h.0 stream 3 over "replicate" : tensor<1771968xf32>
    ```
  }];
  let arguments = (ins 1DTensorOf<[AnyFloat]>:$source, FlatSymbolRefAttr:$unit,
                       ConfinedAttr<I64Attr, [IntNonNegative]>:$stream,
                       StrAttr:$axis);
  let results = (outs FSDP_TokenType:$token, 1DTensorOf<[AnyFloat]>:$result);
  let assemblyFormat = [{
    $source $unit `stream` $stream `over` $axis attr-dict `:` type($source)
  }];
  let hasVerifier = 1;
}

def FSDP_WaitOp : FSDP_Op<"wait", [
    MemoryEffects<[MemWrite<FSDP_CollectiveResource>]>]> {
  let summary = "waits for an asynchronous collective";
  let description = [{
    Returns when the collective that produced `token` has completed on
    this rank; after it, the collective's result may be read.
  }];
  let arguments = (ins FSDP_TokenType:$token);
  let assemblyFormat = "$token attr-dict";
}

#endif // FSDP_SHARDING_OPS_TD
