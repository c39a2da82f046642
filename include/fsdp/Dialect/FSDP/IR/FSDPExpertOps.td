//===- FSDPExpertOps.td - expert-parallel dispatch ops -----*- tablegen -*-===//
//
// Expert parallelism (docs/moe.md, "Expert parallelism over the FSDP mesh"):
// the ops --fsdp-expert-parallel puts around a mixture-of-experts block's
// experts, so that each rank of an expert group of G ranks runs its L = E / G
// experts on the rows every rank of the group routed to them. Notation: G
// the ranks of the mesh's `expert` axis, L the experts each holds, C the row
// width. Counts are `G x L` matrices of i32: row g for the group's rank g,
// column l for that rank's local expert l. Included by FSDPOps.td.
//
//===----------------------------------------------------------------------===//

#ifndef FSDP_EXPERT_OPS_TD
#define FSDP_EXPERT_OPS_TD

def FSDP_MoeExpertCountsOp
    : FSDP_KernelOp<"moe_expert_counts", "MoeExpertCounts", [Pure]> {
  let summary = "a sort's per-expert row counts, by the rank that holds "
                "each expert";
  let description = [{
    From a sort's `offsets` (`E + 1`, E = G L), the rows this rank sends
    to each expert: `counts[g, l] = offsets[g L + l + 1] - offsets[g L + l]`,
    expert `g L + l` being local expert l of the expert group's rank g.
    Since the sort orders rows by expert, rank g's rows are one contiguous
    run. Integers only: no gradient.

    ```mlir
    %counts = fsdp.moe_expert_counts %offsets
        : (tensor<9xi32>) -> tensor<2x4xi32>
    ```
  }];
  let arguments = (ins FSDP_IndexTensor:$offsets);
  let results = (outs FSDP_IndexTensor:$counts);
  let assemblyFormat =
      "operands attr-dict `:` functional-type(operands, results)";
}

// The two collectives are lowered by hand (their kernels are `byHand`):
// their `axis` becomes the kernel's group.
def FSDP_AllToAllCountsOp : FSDP_Op<"all_to_all_counts",
    [MemoryEffects<[MemWrite<FSDP_CollectiveResource>]>]> {
  let summary = "exchanges row counts over the expert group";
  let description = [{
    The collective that runs before every rows' all-to-all: rank g of the
    group of G ranks along mesh axis `axis` (always `"expert"`) sends row d
    of `counts` to rank d and receives rank s's row g as row s of the
    result, so that every rank knows how many rows it will receive from
    each rank for each of its experts before they move. An all-to-all of
    L integers per pair of ranks (`allToAllCounts` in the runtime).

    ```mlir
    %recv = fsdp.all_to_all_counts %counts over "expert"
        : tensor<2x4xi32> -> tensor<2x4xi32>
    ```
  }];
  let arguments = (ins FSDP_IndexTensor:$counts, StrAttr:$axis);
  let results = (outs FSDP_IndexTensor:$recv);
  let assemblyFormat = [{
    $counts `over` $axis attr-dict `:` type($counts) `->` type($recv)
  }];
  let hasVerifier = 1;
}

def FSDP_AllToAllOp : FSDP_Op<"all_to_all", [
    MemoryEffects<[MemWrite<FSDP_CollectiveResource>]>,
    DeclareOpInterfaceMethods<FSDP_DifferentiableOpInterface>]> {
  let summary = "moves rows to the expert group's ranks by counts";
  let description = [{
    Over the G ranks of mesh axis `axis` (always `"expert"`): this rank
    sends its rows of `input` in order, the first `sum_l send[0, l]` to
    rank 0, the next `sum_l send[1, l]` to rank 1, and so on; it receives
    `sum_l recv[s, l]` rows from each rank s, placed in rank order from
    row 0 of the result. `recv` must be what the ranks' `send` rows say
    (the `fsdp.all_to_all_counts` of `send`). Rows of the result past
    those received are zero.

    The result's row count is a bound the memory plan reserves: the
    dispatch's `G T min(K, L)` (every token of every rank of the group
    choosing as many of this rank's experts as it can), the return's the
    pairs `T K`; a step whose counts exceed it stops with an error naming
    the counts and the bound (never a truncation). The gradient is the
    reverse all-to-all: the same op with `send` and `recv` exchanged.

    ```mlir
    %rows = fsdp.all_to_all %xs, %counts, %recv over "expert"
        : (tensor<32x64xf32>, tensor<2x4xi32>, tensor<2x4xi32>) -> tensor<64x64xf32>
    ```
  }];
  let arguments = (ins FSDP_FloatTensor:$input, FSDP_IndexTensor:$send,
                       FSDP_IndexTensor:$recv, StrAttr:$axis);
  let results = (outs FSDP_FloatTensor:$result);
  let assemblyFormat = [{
    $input `,` $send `,` $recv `over` $axis attr-dict `:`
    functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

def FSDP_AllToAllStartOp : FSDP_Op<"all_to_all_start", [
    MemoryEffects<[MemWrite<FSDP_CollectiveResource>]>]> {
  let summary = "starts moving rows to the expert group's ranks on a stream";
  let description = [{
    The asynchronous form of `fsdp.all_to_all` (made by `--fsdp-schedule`):
    the exchange is issued on stream `stream` (the expert stream, 4) and
    returns a token and the result, which may be read only after an
    `fsdp.wait` on the token. The counts are read where it starts; the
    input rows must stay unwritten, and the result unread, until the wait.
    The compute between the start and the wait (a shared expert, a router's
    gradient) runs while the rows travel.

    ```mlir
    %tok, %rows = fsdp.all_to_all_start %xs, %counts, %recv stream 4
        over "expert" : (tensor<32x64xf32>, tensor<2x4xi32>, tensor<2x4xi32>)
        -> tensor<64x64xf32>
    ...
    fsdp.wait %tok
    ```
  }];
  let arguments = (ins FSDP_FloatTensor:$input, FSDP_IndexTensor:$send,
                       FSDP_IndexTensor:$recv,
                       ConfinedAttr<I64Attr, [IntNonNegative]>:$stream,
                       StrAttr:$axis);
  let results = (outs FSDP_TokenType:$token, FSDP_FloatTensor:$result);
  let assemblyFormat = [{
    $input `,` $send `,` $recv `stream` $stream `over` $axis attr-dict `:`
    functional-type(operands, $result)
  }];
  let hasVerifier = 1;
}

def FSDP_MoeRegroupOp : FSDP_DiffOp<"moe_regroup", "MoeRegroup"> {
  let summary = "received rows from rank-major into expert-major order";
  let description = [{
    An all-to-all delivers rows rank by rank, each rank's in local-expert
    order (`counts[s, l]` rows of rank s for expert l); the grouped linear
    wants each expert's rows together. `moe_regroup` permutes the rows
    from the order (s, l) into the order (l, s), keeping each run's rows
    in order; with `inverse`, back. Rows past `sum counts` are zero. The
    gradient is the inverse permutation.

    ```mlir
    %g = fsdp.moe_regroup %rows, %recv
        : (tensor<64x32xf32>, tensor<2x4xi32>) -> tensor<64x32xf32>
    ```
  }];
  let arguments = (ins FSDP_FloatTensor:$input, FSDP_IndexTensor:$counts,
                       DefaultValuedAttr<BoolAttr, "false">:$inverse);
  let results = (outs FSDP_FloatTensor:$result);
}

def FSDP_MoeLocalOffsetsOp
    : FSDP_KernelOp<"moe_local_offsets", "MoeLocalOffsets", [Pure]> {
  let summary = "where each local expert's rows start after the regroup";
  let description = [{
    `offsets[l] = sum_{l' < l} sum_s counts[s, l']` (`L + 1`): the offsets
    of `fsdp.moe_regroup`'s result, which the grouped linears over the
    local experts read as a sort's.

    ```mlir
    %offsets = fsdp.moe_local_offsets %recv
        : (tensor<2x4xi32>) -> tensor<5xi32>
    ```
  }];
  let arguments = (ins FSDP_IndexTensor:$counts);
  let results = (outs FSDP_IndexTensor:$offsets);
  let assemblyFormat =
      "operands attr-dict `:` functional-type(operands, results)";
}

def FSDP_MoeCapacityTrimOp
    : FSDP_KernelOp<"moe_capacity_trim", "MoeCapacityTrim", [Pure]> {
  let summary = "the received counts cut to a capacity (dropping pairs)";
  let description = [{
    With `overflow = drop` (a capacity factor that lets routing exceed
    the received rows' bound), the rows a rank keeps of those its group
    wants to send it: runs in the order (l, s), local expert first, each
    kept while room is left of `capacity` rows and cut to what fits. The
    ranks learn their kept rows by an `fsdp.all_to_all_counts` of `kept`;
    `dropped` (`1`, i32) is the rows cut, which the runtime sums over the
    step and reports. Integers only: no gradient.

    ```mlir
    %kept, %dropped = fsdp.moe_capacity_trim %recv {capacity = 48}
        : (tensor<2x2xi32>) -> (tensor<2x2xi32>, tensor<1xi32>)
    ```
  }];
  let arguments = (ins FSDP_IndexTensor:$recv, I64Attr:$capacity);
  let results = (outs FSDP_IndexTensor:$kept, FSDP_IndexTensor:$dropped);
  let assemblyFormat =
      "operands attr-dict `:` functional-type(operands, results)";
}

def FSDP_MoeCompactOp : FSDP_DiffOp<"moe_compact", "MoeCompact"> {
  let summary = "sorted rows without the dropped ones, packed (and back)";
  let description = [{
    A sort lays a rank's rows out in runs (g, l) of `counts[g, l]` rows;
    with pairs dropped, only the first `kept[g, l]` of each run travel.
    `moe_compact` packs those, run after run, from row 0 (the rest zero),
    so that an `fsdp.all_to_all` by `kept` sends them; with `inverse`, it
    puts packed rows back in their runs, the cut rows zero (a dropped
    pair's expert output is zero: its token keeps its residual). The
    gradient is the other direction.

    ```mlir
    %c = fsdp.moe_compact %rows, %counts, %kept
        : (tensor<32x16xf32>, tensor<2x2xi32>, tensor<2x2xi32>) -> tensor<32x16xf32>
    ```
  }];
  let arguments = (ins FSDP_FloatTensor:$input, FSDP_IndexTensor:$counts,
                       FSDP_IndexTensor:$kept,
                       DefaultValuedAttr<BoolAttr, "false">:$inverse);
  let results = (outs FSDP_FloatTensor:$result);
}

#endif // FSDP_EXPERT_OPS_TD
