//===- ShardingPasses.td - passes that distribute the step -*- tablegen -*-===//
//
// The passes that distribute the step over a mesh: the mesh itself, data
// parallelism, sharding into gathers and reduce-scatters, mixed precision
// and the global gradient norm's clipping.
//
//===----------------------------------------------------------------------===//

#ifndef FSDP_SHARDING_PASSES_TD
#define FSDP_SHARDING_PASSES_TD

include "mlir/Pass/PassBase.td"

def FsdpMeshPass : Pass<"fsdp-mesh", "::mlir::ModuleOp"> {
  let summary = "Set the device mesh the module is compiled for";
  let description = [{
    Records the ranks the training step will run on as the module's
    `fsdp.mesh` attribute, a `#fsdp.mesh` with named axes. Every later pass
    that needs the number of ranks (`--fsdp-data-parallel`, `--fsdp-shard`,
    the lowering, the memory report, the simulator, the plan writer) reads
    it from there: the mesh is set once, so no two passes can disagree. A
    module without a mesh is compiled for one rank. A module that already
    has a different mesh is an error (compile a fresh model instead);
    the same mesh again changes nothing.

    Before (`shard=4`):
    ```mlir
    module {
      fsdp.param @w : tensor<4x16xf32> {init = #fsdp.init<normal, std = 0.02>}
      ...
    ```
    After:
    ```mlir
    module attributes {fsdp.mesh = #fsdp.mesh<["shard" = 4]>} {
      fsdp.param @w : tensor<4x16xf32> {init = #fsdp.init<normal, std = 0.02>}
      ...
    ```
    With `replicate=2 shard=4`, or `mesh=2x4`, the mesh is
    `#fsdp.mesh<["replicate" = 2, "shard" = 4]>`: eight ranks, hybrid
    sharding (docs/fsdp-semantics.md). `mesh=RxS` is the training
    pipeline's form; it overrides `replicate` and `shard`, and
    `world-size`, when given too, must be R * S (a contradiction is an
    error naming both). `expert=G` adds the `expert` axis: G divides the
    shard axis, and each group of G consecutive shard indices holds every
    mixture-of-experts layer's experts split G ways
    (`--fsdp-expert-parallel`).
  }];
  let options = [
    Option<"shard", "shard", "int64_t", /*default=*/"1",
           "Ranks each unit is sharded over (the mesh's shard axis)">,
    Option<"replicate", "replicate", "int64_t", /*default=*/"1",
           "Replicas of every shard (the mesh's replicate axis; 1: none)">,
    Option<"spec", "mesh", "std::string", /*default=*/"\"\"",
           "The mesh as RxS (replicate x shard), e.g. 2x4; empty: replicate "
           "and shard">,
    Option<"worldSize", "world-size", "int64_t", /*default=*/"0",
           "With mesh: the ranks it must have (0: not checked)">,
    Option<"expert", "expert", "int64_t", /*default=*/"1",
           "Expert parallelism: the ranks of an expert group, a split of "
           "the shard axis that must divide it (1: none)">
  ];  // It creates #fsdp.mesh also in a module that holds no fsdp op yet.
  let dependentDialects = ["::mlir::fsdp::FSDPDialect"];
}

def FsdpDataParallelPass : Pass<"fsdp-data-parallel", "::mlir::ModuleOp"> {
  let summary = "Split the model's global batch across the mesh's ranks";
  let description = [{
    The model's batch is the global batch: the first dimension of every
    input of `@forward`. Compiling for a mesh of N ranks (the module's
    `fsdp.mesh`, set by `--fsdp-mesh`; all its axes) divides it by N
    in the inputs and in every value computed from them (activations, saved
    statistics), so that each rank computes the forward of its B / N rows;
    the loss becomes the mean over the rank's rows. Parameters keep their
    shapes. Averaging the ranks' losses and gradients (the reduce-scatter
    of `--fsdp-shard` averages) then gives exactly the global batch's: one
    model file means the same training at every N. A batch that N does not
    divide is an error. Marks `@forward` `fsdp.batch_split`, so that a
    second run changes nothing. Runs before `--fsdp-autodiff`.

    Before (`fsdp.mesh = #fsdp.mesh<["shard" = 2]>`):
    ```mlir
    func.func @forward(%x: tensor<8x16xf32>, %t: tensor<8xi32>) -> tensor<f32> attributes {fsdp.forward} {
      %w = fsdp.load @w : tensor<4x16xf32>
      %y = fsdp.linear %x, %w : (tensor<8x16xf32>, tensor<4x16xf32>) -> tensor<8x4xf32>
      ...
    ```
    After:
    ```mlir
    module attributes {fsdp.mesh = #fsdp.mesh<["shard" = 2]>} {
      func.func @forward(%x: tensor<4x16xf32>, %t: tensor<4xi32>) -> tensor<f32> attributes {fsdp.batch_split, fsdp.forward} {
        %w = fsdp.load @w : tensor<4x16xf32>
        %y = fsdp.linear %x, %w : (tensor<4x16xf32>, tensor<4x16xf32>) -> tensor<4x4xf32>
        ...
    ```
  }];
  let options = [
    Option<"forwardName", "forward", "std::string", /*default=*/"\"forward\"",
           "Name of the function that returns the loss">
  ];
}

def FsdpExpertParallelPass
    : Pass<"fsdp-expert-parallel", "::mlir::ModuleOp"> {
  let summary = "Split every mixture-of-experts layer's experts over the "
                "mesh's expert groups";
  let description = [{
    On a mesh with an `expert` axis of G ranks (`--fsdp-mesh expert=G`),
    each group of G consecutive shard indices splits every
    mixture-of-experts layer's E experts G ways: rank g of the group holds
    experts g L .. g L + L - 1 (L = E / G) and runs them on the rows every
    rank of its group routed to them (docs/moe.md, "Expert parallelism").
    Per layer (an `fsdp.moe_sort` whose offsets feed grouped linears whose
    rows reach an `fsdp.moe_combine`), the pass

    * narrows the stacked expert parameters to one slice (`E x O x I`
      becomes `L x O x I`) and moves them into a unit of their own,
      `<unit>.experts`, marked `expert_parallel` (sharded over the S / G
      ranks of a shard group that hold the same slice);
    * counts the rows for each rank's experts (`fsdp.moe_expert_counts`),
      exchanges the counts (`fsdp.all_to_all_counts`) and the rows
      (`fsdp.all_to_all`, into a buffer of the bound `G T min(K, L)` rows),
      groups the received rows by local expert (`fsdp.moe_regroup`,
      `fsdp.moe_local_offsets`), runs the experts there, and sends the
      results back the same way for the combine.

    The forward keeps its meaning: a token's rows meet the same expert
    weights and come back to the same place, so the loss is the one
    without expert parallelism. The received rows' buffer is the worst
    case, which no routing exceeds; `capacity-factor=c` sizes it c T K
    rows instead (at most the worst case, at least one row), a memory
    plan for balanced routing: a step that routes more rows to a rank
    stops with an error naming the counts and the bound (no row is
    truncated), or with `overflow=drop` keeps what fits and drops the
    rest: the receiving rank cuts its counts to the capacity
    (`fsdp.moe_capacity_trim`: runs in the order local expert, then rank,
    each kept while room is left), tells the senders what it kept (a
    second `fsdp.all_to_all_counts`), and each sender sends the first kept
    rows of each run (`fsdp.moe_compact`) and puts the results back in
    their runs with zeros for the dropped pairs, whose tokens keep their
    residual. The runtime reports the dropped pairs every step. Without an `expert` axis (or G = 1) the
    pass changes nothing. E not divisible by G is an error. Runs after
    `--fsdp-data-parallel` and before `--fsdp-autodiff` (the backward of
    the new ops is the reverse exchange).

    Before (`#fsdp.mesh<["shard" = 2, "expert" = 2]>`, E = 4, K = 2, 8
    tokens per rank):
    ```mlir
    fsdp.unit @l0 params [@gate.w, @experts.w1.w]
    ...
    %xs = fsdp.moe_permute %x, %order : (tensor<8x32xf32>, tensor<8x2xi32>) -> tensor<16x32xf32>
    %h = fsdp.moe_grouped_linear %xs, %w1, %offsets : (tensor<16x32xf32>, tensor<4x64x32xf32>, tensor<5xi32>) -> tensor<16x64xf32>
    ...
    %y = fsdp.moe_combine %ys, %weights, %position : ...
    ```
    After:
    ```mlir
    fsdp.unit @l0 params [@gate.w]
    fsdp.unit @l0.experts params [@experts.w1.w] {expert_parallel}
    ...
    %counts = fsdp.moe_expert_counts %offsets : (tensor<5xi32>) -> tensor<2x2xi32>
    %recv = fsdp.all_to_all_counts %counts over "expert" : tensor<2x2xi32> -> tensor<2x2xi32>
    %rows = fsdp.all_to_all %xs, %counts, %recv over "expert" : (tensor<16x32xf32>, tensor<2x2xi32>, tensor<2x2xi32>) -> tensor<32x32xf32>
    %g = fsdp.moe_regroup %rows, %recv : (tensor<32x32xf32>, tensor<2x2xi32>) -> tensor<32x32xf32>
    %local = fsdp.moe_local_offsets %recv : (tensor<2x2xi32>) -> tensor<3xi32>
    %h = fsdp.moe_grouped_linear %g, %w1, %local : (tensor<32x32xf32>, tensor<2x64x32xf32>, tensor<3xi32>) -> tensor<32x64xf32>
    ...
    %back = fsdp.moe_regroup %out, %recv {inverse = true} : ...
    %ys = fsdp.all_to_all %back, %recv, %counts over "expert" : (tensor<32x32xf32>, ...) -> tensor<16x32xf32>
    %y = fsdp.moe_combine %ys, %weights, %position : ...
    ```
  }];
  let options = [
    Option<"forwardName", "forward", "std::string", /*default=*/"\"forward\"",
           "Name of the function that returns the loss">,
    Option<"capacityFactor", "capacity-factor", "double", /*default=*/"0.0",
           "The received rows' bound as a multiple of the rows a rank sends "
           "(T K), below the worst case G T min(K, L); 0: the worst case "
           "(dropless, never exceeded). A step whose routing exceeds it "
           "stops with an error (overflow=fail) or drops pairs "
           "(overflow=drop)">,
    Option<"overflow", "overflow", "std::string", /*default=*/"\"fail\"",
           "With a capacity factor, what a step whose routing exceeds it "
           "does: fail (an error naming the counts and the bound) or drop "
           "(the pairs past it give zero, counted and reported)">
  ];
}

def FsdpShardPass : Pass<"fsdp-shard", "::mlir::ModuleOp"> {
  let summary = "Shard parameters, gradients and AdamW states across ranks";
  let description = [{
    Implements the seed's FSDP cycle on `@train_step`. Each unit's
    parameters, in unit order, form one flat parameter of P elements; rank
    k owns elements floor(k P / N) .. floor((k + 1) P / N) - 1, and its
    gradient and AdamW moment shards cover exactly that range.

    * Forward, per region of a unit: `fsdp.all_gather` of the flat
      parameter, the region computing with views (`fsdp.view`) into it
      instead of loads, then `fsdp.free`.
    * Backward, per region: all-gather and views again; after the unit's
      last backward region, its full-size parameter gradients are packed
      into one flat gradient (`fsdp.pack`), `fsdp.reduce_scatter` averages
      it over ranks into the local gradient shard, and both the gradient
      and the gathered parameter are freed.
    * The per-parameter AdamW ops of a unit become one `fsdp.adamw_shard`
      on the local shard, with no communication; elements of
      `no_weight_decay` parameters get no decay, also where such a
      parameter straddles two ranks.

    Shards differ by at most one element; the shard tensors have the
    largest shard's size, ceil(P / N). N is the `shard` axis of the
    module's `fsdp.mesh` (1 without a mesh); a mesh that also replicates
    (hybrid sharding) shards within each group of N ranks, below.

    Before (one unit `@u` of two parameters, `fsdp.mesh =
    #fsdp.mesh<["shard" = 2]>`):
    ```mlir
    %y = fsdp.compute @u forward ins(%x : tensor<4x3xf32>) -> tensor<4x5xf32> {
    ^bb0(%a: tensor<4x3xf32>):
      %w = fsdp.load @u.w : tensor<5x3xf32>
      %b = fsdp.load @u.b : tensor<5xf32>
      ...
    fsdp.adamw @u.w, %gw, %step {...} : tensor<5x3xf32>
    fsdp.adamw @u.b, %gb, %step {...} : tensor<5xf32>
    ```
    After:
    ```mlir
    %full = fsdp.all_gather @u : tensor<20xf32>
    %y = fsdp.compute @u forward ins(%x, %full : tensor<4x3xf32>, tensor<20xf32>) -> tensor<4x5xf32> {
    ^bb0(%a: tensor<4x3xf32>, %p: tensor<20xf32>):
      %w = fsdp.view %p[0] : tensor<20xf32> -> tensor<5x3xf32>
      %b = fsdp.view %p[15] : tensor<20xf32> -> tensor<5xf32>
      ...
    fsdp.free %full : tensor<20xf32>
    ...
    %flat = fsdp.pack %gw, %gb : (tensor<5x3xf32>, tensor<5xf32>) -> tensor<20xf32>
    %g = fsdp.reduce_scatter %flat @u : tensor<20xf32> -> tensor<10xf32>
    fsdp.free %flat : tensor<20xf32>
    fsdp.free %full2 : tensor<20xf32>
    fsdp.adamw_shard @u, %g, %step {...} : tensor<10xf32>
    ```

    Hybrid sharding (a mesh with a `replicate` axis, R > 1): the shards
    are of the `shard` axis's S ranks (the seed's layout inside each shard
    group), every collective names its group (`over "shard"`), and each
    unit's reduce-scatter (the mean over its shard group) is followed by
    `fsdp.all_reduce_mean` of the shard over the replicas, which AdamW
    reads: the mean over all R S ranks (docs/fsdp-semantics.md says where
    the divisions happen and why). At `replicate=2 shard=2`:
    ```mlir
    %full = fsdp.all_gather @u over "shard" : tensor<20xf32>
    ...
    %g = fsdp.reduce_scatter %flat @u over "shard" : tensor<20xf32> -> tensor<10xf32>
    fsdp.free %flat : tensor<20xf32>
    %m = fsdp.all_reduce_mean %g @u over "replicate" : tensor<10xf32>
    fsdp.adamw_shard @u, %m, %step {...} : tensor<10xf32>
    ```
  }];
}

def FsdpMixedPrecisionPass : Pass<"fsdp-mixed-precision", "::mlir::ModuleOp"> {
  let summary = "bf16 gathers, compute and gradients over f32 master shards";
  let description = [{
    FSDP2's `MixedPrecisionPolicy(param_dtype, reduce_dtype)` on the
    sharded `@train_step` (after `--fsdp-shard`, before `--fsdp-schedule`).
    What a rank keeps between steps does not change: the f32 parameter
    shard (the master weights, 4P/N bytes), its gradient shard (4P/N) and
    AdamW's moments (8P/N), 16P/N in all, and AdamW runs on them as
    before. What changes is what lives in between:

    * Each `fsdp.all_gather` gives `param-dtype`: every rank rounds its
      shard into its own slot of the gathered buffer (to nearest even), and
      the collective moves 2 bytes per element for bf16. A gathered unit
      takes 2P/M bytes instead of 4P/M.
    * Every kernel that reads a gathered parameter runs in `param-dtype`,
      and so does everything downstream: activations and gradients are
      bf16 (GEMMs accumulate in f32 inside the kernel). What the kernel
      table marks F32 stays f32: layer norm's mean and rstd, attention's
      log-sum-exp, the loss (and the softmax and the loss are computed in
      f32 inside their kernels). A step input in f32 is cast where a bf16
      kernel reads it.
    * A unit's full-size gradient (bf16, like the compute) is cast to
      `reduce-dtype` before its reduce-scatter (f32 by default, as
      FSDP2's): the cast copy is the one reduced, the bf16 one is freed
      right after the cast. A reduced shard not in f32 is cast to f32
      where anything but AdamW reads it; `fsdp.adamw_shard` reads it as
      it is and widens it itself (exactly: the cast's numbers, without
      its pass over the shard and its f32 copy). A selection bias's unit
      (mixture of experts) keeps the cast.
    * At a shard group of one (world size 1, no replicas, no expert
      parallelism) nothing is reduced: the reduce-scatter is a local copy
      that the lowering elides, and a bf16 gradient is not widened to an
      f32 `reduce-dtype` before it (before or after the copy, widening is
      exact), so AdamW reads the bf16 gradient itself. Replicas of a shard
      group of one still average it, in `reduce-dtype`.
    * At a shard group of one, with `shard-copy` (the default), each unit
      keeps its shard in `param-dtype` too (`fsdp.unit ... {shard_copy =
      bf16}`, 2P bytes more at rest): AdamW rounds every element into it
      as it updates the shard, and the gathers, now in the copy's type,
      are local copies the lowering elides. The regions read the copy in
      place: no gathered buffer and no rounding pass in the step (two a
      step before, the forward's and the backward's), for the same bits.

    `param-dtype` not given is what the module asks for in its
    `fsdp.param_dtype` attribute (`fsdp-gen --dtype bf16` sets it), else
    f32. With `param-dtype=f32 reduce-dtype=f32` (the defaults) the pass
    changes nothing. Master parameters must be f32.

    Before (one unit, 2 ranks):
    ```mlir
    %g = fsdp.all_gather @l0 : tensor<40xf32>
    %h = fsdp.compute @l0 forward ins(%x, %g : tensor<2x4xf32>, tensor<40xf32>) -> tensor<2x8xf32> { ... }
    ...
    %f = fsdp.pack %dw, %db : (tensor<8x4xf32>, tensor<8xf32>) -> tensor<40xf32>
    %s = fsdp.reduce_scatter %f @l0 : tensor<40xf32> -> tensor<20xf32>
    fsdp.free %f : tensor<40xf32>
    fsdp.adamw_shard @l0, %s, %step {...} : tensor<20xf32>
    ```
    After (`param-dtype=bf16 reduce-dtype=f32`):
    ```mlir
    %g = fsdp.all_gather @l0 : tensor<40xbf16>
    %h = fsdp.compute @l0 forward ins(%x, %g : tensor<2x4xf32>, tensor<40xbf16>) -> tensor<2x8xbf16> {
    ^bb0(%a: tensor<2x4xf32>, %p: tensor<40xbf16>):
      %a16 = fsdp.cast %a : tensor<2x4xf32> -> tensor<2x4xbf16>
      ...
    }
    ...
    %f = fsdp.pack %dw, %db : (tensor<8x4xbf16>, tensor<8xbf16>) -> tensor<40xbf16>
    %f32 = fsdp.cast %f : tensor<40xbf16> -> tensor<40xf32>
    fsdp.free %f : tensor<40xbf16>
    %s = fsdp.reduce_scatter %f32 @l0 : tensor<40xf32> -> tensor<20xf32>
    fsdp.free %f32 : tensor<40xf32>
    fsdp.adamw_shard @l0, %s, %step {...} : tensor<20xf32>
    ```
    After, at a shard group of one (`--fsdp-mesh=shard=1`; or at 2 ranks
    with `reduce-dtype=bf16`, where the reduce-scatter moves bf16 and
    gives a `tensor<20xbf16>` shard):
    ```mlir
    %f = fsdp.pack %dw, %db : (tensor<8x4xbf16>, tensor<8xbf16>) -> tensor<40xbf16>
    %s = fsdp.reduce_scatter %f @l0 : tensor<40xbf16> -> tensor<40xbf16>
    fsdp.free %f : tensor<40xbf16>
    fsdp.adamw_shard @l0, %s, %step {...} : tensor<40xbf16>
    ```
  }];
  let options = [
    Option<"paramDtype", "param-dtype", "std::string", /*default=*/"\"\"",
           "Gathered parameters, activations and gradients: f32 or bf16 "
           "(default: the module's fsdp.param_dtype, else f32)">,
    Option<"reduceDtype", "reduce-dtype", "std::string",
           /*default=*/"\"f32\"",
           "Reduce-scatters of the full-size gradients: f32 or bf16">,
    Option<"shardCopy", "shard-copy", "bool", /*default=*/"true",
           "At a shard group of one, keep each unit's shard in param-dtype "
           "too, written by AdamW and read in place of the gathers">
  ];
  let dependentDialects = ["::mlir::arith::ArithDialect"];
}

def FsdpClipGradPass : Pass<"fsdp-clip-grad", "::mlir::ModuleOp"> {
  let summary = "Clip the gradients by their global norm, in the step";
  let description = [{
    PyTorch's `clip_grad_norm_(max_norm)` on the sharded `@train_step`
    (after `--fsdp-shard` and `--fsdp-mixed-precision`, before
    `--fsdp-schedule`). The norm is over every gradient element of every
    rank, while each rank holds only its shards, so it takes one
    collective, which the step itself carries:

    * per unit, in the order their reduce-scatters run, `fsdp.grad_sq_sum`
      adds the squares of this rank's elements of the unit's gradient
      shard (in double; a shorter shard's unused last element left out)
      to the sum so far: one f32 scalar per rank;
    * `fsdp.all_reduce_sum` sums it over the ranks (one scalar, on the
      collective resource like the other collectives; it stays
      synchronous: the optimizer needs it at once);
    * `fsdp.clip_coefficient` turns the global sum of squares into
      min(1, max-norm / (norm + 1e-6));
    * every `fsdp.adamw_shard` takes it as its `scale` and moves after
      it, with the cast of a bf16-reduced shard that feeds it: AdamW runs
      on gradient x coefficient.

    The sums read each shard where AdamW read it, after its
    reduce-scatter: the schedule still waits for each reduce-scatter as
    late as before, and the sums of the units reduced first run while the
    last reduce-scatter is in flight. The runtime reports the global norm
    (the square root of the all-reduced sum) after each step. With a
    `max-norm` above every norm the coefficient is exactly 1 and the
    losses are the unclipped step's, bit for bit.

    Before (two units, world size 2):
    ```mlir
    %s0 = fsdp.reduce_scatter %f0 @l0 : tensor<40xf32> -> tensor<20xf32>
    ...
    %s1 = fsdp.reduce_scatter %f1 @l1 : tensor<27xf32> -> tensor<14xf32>
    ...
    fsdp.adamw_shard @l0, %s0, %step {...} : tensor<20xf32>
    fsdp.adamw_shard @l1, %s1, %step {...} : tensor<14xf32>
    return %loss : tensor<f32>
    ```
    After (`max-norm=1.0`; @l1 is reduced first):
    ```mlir
    %q1 = fsdp.grad_sq_sum @l1, %s1 : tensor<14xf32>
    %q0 = fsdp.grad_sq_sum @l0, %s0, %q1 : tensor<20xf32>
    %sum = fsdp.all_reduce_sum %q0 : tensor<f32>
    %coef = fsdp.clip_coefficient %sum {max_norm = 1.000000e+00 : f32}
    fsdp.adamw_shard @l0, %s0, %step scale %coef {...} : tensor<20xf32>
    fsdp.adamw_shard @l1, %s1, %step scale %coef {...} : tensor<14xf32>
    return %loss : tensor<f32>
    ```
  }];
  let options = [
    Option<"maxNorm", "max-norm", "double", /*default=*/"1.0",
           "The largest global gradient norm AdamW sees (a positive, "
           "finite f32)">
  ];
}

#endif // FSDP_SHARDING_PASSES_TD
