//===- Passes.td - fsdp dialect passes ---------------------*- tablegen -*-===//

#ifndef FSDP_PASSES_TD
#define FSDP_PASSES_TD

include "mlir/Pass/PassBase.td"

def FsdpWrapPass : Pass<"fsdp-wrap", "::mlir::ModuleOp"> {
  let summary = "Form FSDP units (or regroup existing ones) by a wrap policy";
  let description = [{
    Decides which parameters are flattened and gathered together, and wraps
    the forward ops that compute with them in `fsdp.compute` regions. Any
    units the input already has are dissolved first, so the pass also
    regroups. Policies:

    * `per-block` (default): one unit per repeated block, the block of a
      parameter being the prefix of its dotted name up to the first
      all-digit component (`h.3.attn.qkv.w` is in `h.3`, `layers.0.w` in
      `layers.0`); parameters outside any block form the unit `@root`.
    * `size-threshold`: walks the parameters in the order the forward first
      uses them and closes a unit as soon as it holds at least
      `threshold-bytes` (PyTorch's `size_based_auto_wrap_policy`).
    * `none`: one unit `@root` holding every parameter (no wrapping).
    * `given`: the units the input has, untouched (the model's author, or
      fsdp-gen, wrapped it); `per-block` when it has none. The training
      pipeline's default, so that it keeps what fsdp-gen formed.

    With `split-ends` (per-block only), the parameters outside any block
    are split as torchtitan wraps Llama: those the forward reads only before
    the first block form `@embed`, those it reads only after the last block
    `@head`; parameters read on both sides (GPT-2's head tied to its token
    table) or between blocks stay in `@root`. fsdp-gen sets it for Llama.

    An op belongs to the unit whose parameters it reads; a parameter-free op
    (attention, gelu) belongs to a unit when the ops just before and after
    it do; maximal runs of consecutive ops of one unit become one region.
    Loads are rematerialised inside each region that uses them.

    Before (`policy=per-block`):
    ```mlir
    fsdp.param @layers.0.w : tensor<32x16xf32> init <normal, std = 2.000000e-02>
    fsdp.param @layers.1.w : tensor<4x32xf32> init <normal, std = 2.000000e-02>
    func.func @forward(%x: tensor<8x16xf32>, %t: tensor<8xi32>) -> tensor<f32> attributes {fsdp.forward} {
      %w0 = fsdp.load @layers.0.w : tensor<32x16xf32>
      %w1 = fsdp.load @layers.1.w : tensor<4x32xf32>
      %h = fsdp.linear %x, %w0 : (tensor<8x16xf32>, tensor<32x16xf32>) -> tensor<8x32xf32>
      %r = fsdp.relu %h : tensor<8x32xf32>
      %y = fsdp.linear %r, %w1 : (tensor<8x32xf32>, tensor<4x32xf32>) -> tensor<8x4xf32>
      %l = fsdp.cross_entropy %y, %t : (tensor<8x4xf32>, tensor<8xi32>) -> tensor<f32>
      return %l : tensor<f32>
    }
    ```
    After:
    ```mlir
    fsdp.unit @layers.0 params [@layers.0.w]
    fsdp.unit @layers.1 params [@layers.1.w]
    func.func @forward(%x: tensor<8x16xf32>, %t: tensor<8xi32>) -> tensor<f32> attributes {fsdp.forward} {
      %0 = fsdp.compute @layers.0 forward (%x : tensor<8x16xf32>) -> tensor<8x32xf32> {
      ^bb0(%arg0: tensor<8x16xf32>):
        %w0 = fsdp.load @layers.0.w : tensor<32x16xf32>
        %h = fsdp.linear %arg0, %w0 : (tensor<8x16xf32>, tensor<32x16xf32>) -> tensor<8x32xf32>
        fsdp.yield %h : tensor<8x32xf32>
      }
      %r = fsdp.relu %0 : tensor<8x32xf32>
      %1 = fsdp.compute @layers.1 forward (%r : tensor<8x32xf32>) -> tensor<8x4xf32> {
        ...
      }
      %l = fsdp.cross_entropy %1, %t : (tensor<8x4xf32>, tensor<8xi32>) -> tensor<f32>
      return %l : tensor<f32>
    }
    ```
  }];
  let options = [
    Option<"policy", "policy", "std::string", /*default=*/"\"per-block\"",
           "Wrap policy: per-block, size-threshold, none or given">,
    Option<"thresholdBytes", "threshold-bytes", "int64_t",
           /*default=*/"100000000",
           "Smallest unit, in bytes, under policy=size-threshold">,
    Option<"splitEnds", "split-ends", "bool", /*default=*/"false",
           "Under per-block, the parameters read only before the first "
           "block form @embed, only after the last @head">
  ];
  let dependentDialects = ["::mlir::fsdp::FSDPDialect"];
}

def FsdpAttentionPass : Pass<"fsdp-attention", "::mlir::ModuleOp"> {
  let summary = "Choose each attention's form: materialized or blocked";
  let description = [{
    Sets `impl` on every `fsdp.attention` of the forward, which decides what
    it saves for the backward (see the op): `materialized` keeps the
    `B x heads x T x T` probabilities (and its backward a second buffer of
    that size), `blocked` one log-sum-exp per row, recomputing the
    probabilities block by block in the backward. Runs before
    `--fsdp-autodiff`, which builds each backward in its forward's form.

    * `impl=auto` (default): `blocked` wherever it saves memory, which is
      wherever `T > 1`, and both backends have blocked kernels for the
      shape (head size at most 128, the CUDA kernels' widest tile); the two
      agree to float32 rounding, and on the CPU the blocked kernels are
      also the faster (docs/attention.md).
    * `impl=materialized`, `impl=blocked`: every attention in that form.

    An attention whose saved result the forward itself reads is left as it
    is (its type would change under it).

    Before (`impl=blocked`):
    ```mlir
    %o, %p = fsdp.attention %qkv {heads = 2 : i64} : (tensor<1x4x24xf32>) -> (tensor<1x4x8xf32>, tensor<1x2x4x4xf32>)
    ```
    After:
    ```mlir
    %o, %lse = fsdp.attention %qkv {heads = 2 : i64, impl = #fsdp.attention_impl<blocked>} : (tensor<1x4x24xf32>) -> (tensor<1x4x8xf32>, tensor<1x2x4xf32>)
    ```
  }];
  let options = [
    Option<"impl", "impl", "std::string", /*default=*/"\"auto\"",
           "auto, materialized or blocked">
  ];
}

def FsdpAutodiffPass : Pass<"fsdp-autodiff", "::mlir::ModuleOp"> {
  let summary = "Build @train_step: forward, reverse-mode backward, AdamW";
  let description = [{
    Clones `@forward` (which must return the scalar loss) into
    `@train_step(inputs..., %step: i64) -> loss`, appends the reverse-mode
    backward and one `fsdp.adamw` per parameter, in declaration order. Each
    op's backward comes from its `DifferentiableOpInterface`; gradients of a
    value used several times are summed with `fsdp.add`, and so are the
    gradients of a parameter loaded by several regions (tied embeddings).

    The unit structure survives: the backward ops of a unit's forward region
    form a `fsdp.compute <unit> backward` region, which reloads the unit's
    parameters (the forward's gathered copy is not kept) and yields the
    unit's parameter gradients. Activations the backward needs become
    results of the forward regions. A parameter that does not affect the
    loss gets a zero gradient (its weight decay still applies).

    Before:
    ```mlir
    func.func @forward(%x: tensor<8x16xf32>, %t: tensor<8xi32>) -> tensor<f32> attributes {fsdp.forward} {
      %0 = fsdp.compute @layers.0 forward (%x : tensor<8x16xf32>) -> tensor<8x4xf32> {
      ^bb0(%arg0: tensor<8x16xf32>):
        %w = fsdp.load @layers.0.w : tensor<4x16xf32>
        %y = fsdp.linear %arg0, %w : (tensor<8x16xf32>, tensor<4x16xf32>) -> tensor<8x4xf32>
        fsdp.yield %y : tensor<8x4xf32>
      }
      %l = fsdp.cross_entropy %0, %t : (tensor<8x4xf32>, tensor<8xi32>) -> tensor<f32>
      return %l : tensor<f32>
    }
    ```
    After (`@forward` is kept unchanged):
    ```mlir
    func.func @train_step(%x: tensor<8x16xf32>, %t: tensor<8xi32>, %step: i64) -> tensor<f32> attributes {fsdp.train_step} {
      %0 = fsdp.compute @layers.0 forward (%x : tensor<8x16xf32>) -> tensor<8x4xf32> { ... }
      %l = fsdp.cross_entropy %0, %t : (tensor<8x4xf32>, tensor<8xi32>) -> tensor<f32>
      %one = arith.constant dense<1.000000e+00> : tensor<f32>
      %d = fsdp.cross_entropy_backward %one, %0, %t : (tensor<f32>, tensor<8x4xf32>, tensor<8xi32>) -> tensor<8x4xf32>
      %g = fsdp.compute @layers.0 backward (%d, %x : tensor<8x4xf32>, tensor<8x16xf32>) -> tensor<4x16xf32> {
      ^bb0(%arg0: tensor<8x4xf32>, %arg1: tensor<8x16xf32>):
        %gw = fsdp.linear_grad_weight %arg0, %arg1 : (tensor<8x4xf32>, tensor<8x16xf32>) -> tensor<4x16xf32>
        fsdp.yield %gw : tensor<4x16xf32>
      }
      fsdp.adamw @layers.0.w, %g, %step {beta1 = 0.9 : f32, ...} : tensor<4x16xf32>
      return %l : tensor<f32>
    }
    ```
  }];
  let options = [
    Option<"forwardName", "forward", "std::string", /*default=*/"\"forward\"",
           "Name of the function that returns the loss">,
    Option<"learningRate", "lr", "double", /*default=*/"3.0e-4",
           "AdamW learning rate">,
    Option<"beta1", "beta1", "double", /*default=*/"0.9",
           "AdamW first-moment decay">,
    Option<"beta2", "beta2", "double", /*default=*/"0.95",
           "AdamW second-moment decay">,
    Option<"epsilon", "eps", "double", /*default=*/"1.0e-8",
           "AdamW denominator epsilon">,
    Option<"weightDecay", "weight-decay", "double", /*default=*/"0.1",
           "Decoupled weight decay (0 for no_weight_decay parameters)">
  ];
  let dependentDialects = ["::mlir::fsdp::FSDPDialect",
                           "::mlir::arith::ArithDialect"];
}

def FsdpRematPass : Pass<"fsdp-remat", "::mlir::ModuleOp"> {
  let summary = "Recompute activations in the backward instead of saving them";
  let description = [{
    Activation rematerialisation (checkpointing), per FSDP unit. After
    `--fsdp-autodiff` a unit's forward region yields every activation its
    backward reads, and all of them stay live until that backward: at
    sequence 2048 they are most of a rank's peak. Under a policy other than
    `none`, the unit's backward region recomputes the activations the policy
    does not keep, from those it keeps, right before the gradient op that
    first reads each one. The recomputation runs inside the backward region,
    after the unit's all-gather that the backward needs anyway, so it costs
    compute (the simulator charges it) and no communication.

    Policies:
    * `none` (default): every activation saved.
    * `full`: only the unit's inputs are kept (what its forward region reads
      from outside); the whole forward of the unit is recomputed.
    * `selective`: the outputs of the GEMMs are kept (linears, and
      attention's output and statistics: ops the cost model charges FLOPs),
      the cheap element-wise, normalisation and residual work recomputed.

    `overrides` sets a policy per unit by name pattern (glob), the last
    match winning: `overrides=h.*=full,root=none`.

    The clones are the same kernels on the same inputs, so the step computes
    the same bits as without recomputation: losses are bitwise equal.
    Runs after `--fsdp-autodiff` and before `--fsdp-shard`, so that the
    recomputed ops' parameter loads become the backward's gathered views
    like every other load (docs/Rationale.md).

    Before (`policy=full`, one unit `@b` computing `gelu(x W^T)`):
    ```mlir
    %f:2 = fsdp.compute @b forward ins(%x : tensor<4x8xf32>) -> tensor<4x8xf32>, tensor<4x8xf32> {
    ^bb0(%a: tensor<4x8xf32>):
      %w = fsdp.load @b.w : tensor<8x8xf32>
      %h = fsdp.linear %a, %w : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
      %g = fsdp.gelu %h : tensor<4x8xf32>
      fsdp.yield %g, %h : tensor<4x8xf32>, tensor<4x8xf32>
    }
    ...
    %b:2 = fsdp.compute @b backward ins(%dy, %f#1, %x : ...) -> ... {
    ^bb0(%d: tensor<4x8xf32>, %h: tensor<4x8xf32>, %a: tensor<4x8xf32>):
      %dh = fsdp.gelu_backward %d, %h : ...
    ```
    After: the forward yields only its output, the backward takes `%x` and
    recomputes `%h`:
    ```mlir
    %f = fsdp.compute @b forward ins(%x : tensor<4x8xf32>) -> tensor<4x8xf32> { ... }
    ...
    %b:2 = fsdp.compute @b backward ins(%dy, %x : ...) -> ... {
    ^bb0(%d: tensor<4x8xf32>, %a: tensor<4x8xf32>):
      %w = fsdp.load @b.w : tensor<8x8xf32>
      %h = fsdp.linear %a, %w : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
      %dh = fsdp.gelu_backward %d, %h : ...
    ```
  }];
  let options = [
    Option<"policy", "policy", "std::string", /*default=*/"\"none\"",
           "none, full or selective, for every unit without an override">,
    ListOption<"overrides", "overrides", "std::string",
               "UNIT-PATTERN=POLICY entries (glob patterns; the last match "
               "wins)">
  ];
}

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
    error naming both).
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
           "With mesh: the ranks it must have (0: not checked)">
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
      before AdamW.

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
  }];
  let options = [
    Option<"paramDtype", "param-dtype", "std::string", /*default=*/"\"\"",
           "Gathered parameters, activations and gradients: f32 or bf16 "
           "(default: the module's fsdp.param_dtype, else f32)">,
    Option<"reduceDtype", "reduce-dtype", "std::string",
           /*default=*/"\"f32\"",
           "Reduce-scatters of the full-size gradients: f32 or bf16">
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

def FsdpFitMemoryPass : Pass<"fsdp-fit-memory", "::mlir::ModuleOp"> {
  let summary = "Choose attention's form and per-unit recomputation to fit a "
                "memory budget";
  let description = [{
    Makes `memory-budget` a goal. On the model before autodiff (after
    `--fsdp-data-parallel`), it compiles trial schedules on copies of the
    module, each through `--fsdp-attention`, `--fsdp-autodiff`,
    `--fsdp-remat`, `--fsdp-shard`, `--fsdp-mixed-precision`,
    `--fsdp-clip-grad` (with `grad-clip` > 0) and `--fsdp-schedule` with
    this pass's schedule, precision and clipping options, and
    measures each one's exact peak per rank (the
    memory profile plus the `runtime`'s share outside the arena, what the
    schedule's budget counts) and its simulated step time (the
    `--fsdp-simulate` cost model on `hardware`, recomputation included).

    The trials form a ladder of ever smaller peaks at ever higher cost:
    attention materialized and nothing recomputed; attention blocked; then
    one unit after another (in forward order) `selective`; then one after
    another `full`. Peaks fall and times rise along it, so a binary search
    finds the first rung that fits in a logarithmic number of compiles
    (about 9 for 96 blocks), which is the one with the lowest simulated
    step time among those the ladder holds. At that rung it tries faster
    schedules one step away from the given one (prefetch depth 1 and 2,
    25 MB buckets, no resharding after the forward) and keeps the fastest
    that fits. The pass then applies its choice: `impl` on every attention,
    `fsdp.remat` on every unit (which `--fsdp-remat` follows),
    `fsdp.schedule_choice` on the module (which `--fsdp-schedule` takes over
    its options), and prints the decision table to stderr (per unit:
    policy, activation bytes it no longer keeps, simulated recompute time).

    When even the last rung (blocked, every unit `full`) does not fit with
    the given schedule, it searches again with the leanest one (no
    prefetch, no buckets, resharding after the forward); when that does not
    fit either, it fails naming the smallest peak and what it is made of.
    Without a budget (`memory-budget=0`) it does nothing.

    Step times are priced on the network `--fsdp-simulate` would use: the
    preset's one level, or with `ranks-per-node` the two-level network of
    `intra-gbps`, `intra-latency-us`, `nic-gbps`, `nics-per-node`,
    `inter-latency-us` and `nic-share` (same options, same defaults, same
    errors), over every rank of the mesh. The report's first line names the
    network (`on h100-nvlink, 2 nodes of 8, NICs shared by groups`).

    With `mesh=auto` the pass picks the mesh too. The world is the
    module's (`--fsdp-mesh` must have run: it gives the ranks); the
    candidates are every replicate=R x shard=S with R x S the world and,
    with `ranks-per-node=G`, S dividing G or a multiple of G. It runs the
    whole search above at each and keeps the fastest simulated step that
    fits; equal steps go to the lower peak, then to the larger S. The
    chosen mesh replaces the module's `fsdp.mesh` and a last line of the
    report names it with every candidate's step:

    ```
      mesh: replicate=2 shard=8 (mesh=auto, of 1x16 501.2 ms 2x8 ... ms
        4x4 ... ms 8x2 ... ms 16x1 (does not fit))
    ```

    When no mesh fits, it fails naming the smallest peak and its mesh.
  }];
  let options = [
    Option<"memoryBudget", "memory-budget", "::mlir::fsdp::ByteSize", /*default=*/"0",
           "Bytes a rank may use (0: nothing to fit)">,
    Option<"runtime", "runtime", "std::string", /*default=*/"\"cpu\"",
           "Whose memory outside the arena counts: cpu, cuda or none">,
    Option<"hardware", "hardware", "std::string",
           /*default=*/"\"h100-nvlink\"",
           "The cost model's machine (see --fsdp-simulate)">,
    Option<"attention", "attention", "std::string", /*default=*/"\"auto\"",
           "Attention's forms to consider: auto (both), materialized or "
           "blocked">,
    Option<"forwardPrefetch", "forward-prefetch", "int64_t", /*default=*/"0",
           "As --fsdp-schedule's">,
    Option<"backwardPrefetch", "backward-prefetch", "int64_t",
           /*default=*/"0", "As --fsdp-schedule's">,
    Option<"maxInflightGathers", "max-inflight-gathers", "int64_t",
           /*default=*/"0", "As --fsdp-schedule's">,
    Option<"bucketBytes", "bucket-bytes", "int64_t", /*default=*/"0",
           "As --fsdp-schedule's">,
    Option<"reshardAfterForward", "reshard-after-forward", "bool",
           /*default=*/"true", "As --fsdp-schedule's">,
    Option<"paramDtype", "param-dtype", "std::string", /*default=*/"\"\"",
           "As --fsdp-mixed-precision's">,
    Option<"reduceDtype", "reduce-dtype", "std::string",
           /*default=*/"\"f32\"", "As --fsdp-mixed-precision's">,
    Option<"gradClip", "grad-clip", "double", /*default=*/"0",
           "As --fsdp-clip-grad's max-norm (0: no clipping)">,
    Option<"ranksPerNode", "ranks-per-node", "int64_t", /*default=*/"0",
           "As --fsdp-simulate's (0: the preset's one-level network)">,
    Option<"intraGBps", "intra-gbps", "double", /*default=*/"370",
           "As --fsdp-simulate's">,
    Option<"intraLatencyUs", "intra-latency-us", "double", /*default=*/"5",
           "As --fsdp-simulate's">,
    Option<"nicGBps", "nic-gbps", "double", /*default=*/"47",
           "As --fsdp-simulate's">,
    Option<"nicsPerNode", "nics-per-node", "int64_t", /*default=*/"8",
           "As --fsdp-simulate's">,
    Option<"interLatencyUs", "inter-latency-us", "double", /*default=*/"15",
           "As --fsdp-simulate's">,
    Option<"nicShare", "nic-share", "std::string", /*default=*/"\"group\"",
           "As --fsdp-simulate's">,
    Option<"mesh", "mesh", "std::string", /*default=*/"\"\"",
           "auto: choose the mesh RxS of the module's world too (left out: "
           "the module's mesh)">
  ];
}

def FsdpSchedulePass : Pass<"fsdp-schedule", "::mlir::ModuleOp"> {
  let summary = "Make collectives asynchronous and prefetch gathers";
  let description = [{
    Turns every collective of a sharded `@train_step` into a start/wait pair
    linked by a `!fsdp.token`: all-gathers on stream 1, reduce-scatters on
    stream 2, apart from compute (stream 0). Waits sit right before the
    first use of the result. Then:

    * `forward-prefetch=k`: the all-gather of the forward region k regions
      ahead starts before the current region computes;
    * `backward-prefetch=k`: likewise in the backward, so the next unit's
      all-gather is issued before the current unit's reduce-scatter;
    * `max-inflight-gathers=K` (like PyTorch's `limit_all_gathers`, but
      decided at compile time): a start that would put more than K gathers
      in flight (started and not yet freed) moves later, to the first
      point where one has been freed; 0 means no limit;
    * `reshard-after-forward=false`: a unit's parameters gathered for its
      last forward region stay gathered until its backward is done, and
      the backward regions use them instead of gathering again (PyTorch's
      SHARD_GRAD_OP, ZeRO-2): one all-gather per unit per step fewer, at
      the cost of holding every unit's full parameters from forward to
      backward (the memory report and the plan show it);
    * `bucket-bytes=B`: consecutive collectives of small units are merged
      into buckets of up to B bytes (gathered, or full-size gradient,
      bytes; a unit larger than B is a bucket of its own): the gathers of
      a bucket start together where its first one started and are all
      awaited where its first one was; the reduce-scatters of a bucket
      start together where its last one started, so a bucket closes
      before a reduce-scatter that starts after a shard of the bucket is
      read (a unit the loss ignores is reduced where its AdamW is, after
      the optimizer steps of the units before it). The later starts of a
      bucket are `grouped`: the runtime issues each bucket as one fused
      collective (an NCCL group; back to back on an MPI stream thread),
      paying the collective's latency once; the in-flight limit counts a
      bucket as one gather. Larger buckets hold memory longer (the memory
      report and the plan show it); 0 (the default) keeps one collective
      per unit;
    * `memory-budget=B`: fails, naming the peak, the budget and the op
      where the peak occurs, when a rank would need more than B bytes:
      the step's peak plus what the runtime named by `runtime=` holds
      outside the arena (`cpu`, the default: MPI, the batch buffers, the
      plan's tables on the host; `cuda`: the CUDA context, cuBLAS's
      workspace and NCCL's buffers on the device; `none`: the peak alone),
      the figures `--fsdp-memory-report` lists line by line.

    Gradient clipping's `fsdp.all_reduce_sum` (`--fsdp-clip-grad`) stays
    synchronous, where it is: one scalar, which the optimizer needs at once.
    The reduce-scatters' waits come before the first read of their shards,
    the clipping's sums of squares among them, so they stay as late as
    without clipping.

    Prefetching moves starts only: it never changes what is computed, so
    the losses are the unscheduled plan's, bit for bit.

    Before:
    ```mlir
    %g1 = fsdp.all_gather @l1 : tensor<27xf32>
    %y = fsdp.compute @l1 forward ins(%x, %g1 : ...) { ... }
    fsdp.free %g1 : tensor<27xf32>
    ```
    After (no prefetch):
    ```mlir
    %t, %g1 = fsdp.all_gather_start @l1 stream 1 : tensor<27xf32>
    fsdp.wait %t
    %y = fsdp.compute @l1 forward ins(%x, %g1 : ...) { ... }
    fsdp.free %g1 : tensor<27xf32>
    ```
    With `bucket-bytes=256`, two small units' gathers as one bucket:
    ```mlir
    %t1, %g1 = fsdp.all_gather_start @l1 stream 1 : tensor<27xf32>
    %t2, %g2 = fsdp.all_gather_start @l2 stream 1 grouped : tensor<27xf32>
    fsdp.wait %t1
    fsdp.wait %t2
    %y = fsdp.compute @l1 forward ins(%x, %g1 : ...) { ... }
    fsdp.free %g1 : tensor<27xf32>
    %z = fsdp.compute @l2 forward ins(%y, %g2 : ...) { ... }
    ```

    Hybrid sharding's replica all-reduces (`fsdp.all_reduce_mean`) get
    stream 3, of their own, so that one never queues behind a
    reduce-scatter or a gather of the shard group. Their in-flight rule:
    each starts right after its unit's reduce-scatter has been waited for
    (its input is complete there, wherever bucketing or the reduce-scatter
    rule put that wait), and at most one is in flight: it is waited for
    just before the next one starts, or before the first read of its
    shard (the optimizer, or clipping's sum of squares), whichever comes
    first. So the all-reduce of unit i overlaps the backward and the
    reduce-scatter of unit i - 1, as the reduce-scatters overlap the
    backward; replica all-reduces are never bucketed. The reduce-scatter's
    own wait ignores its all-reduce as a read (it follows the wait) and
    counts the reads of the averaged shard instead:
    ```mlir
    %t2, %s2 = fsdp.reduce_scatter_start %f2 @l2 stream 2 over "shard" : ...
    ...
    fsdp.wait %t2
    %a2, %m2 = fsdp.all_reduce_mean_start %s2 @l2 stream 3 over "replicate" : tensor<325xf32>
    %t1, %s1 = fsdp.reduce_scatter_start %f1 @l1 stream 2 over "shard" : ...
    ...
    fsdp.wait %t1
    fsdp.wait %a2
    %a1, %m1 = fsdp.all_reduce_mean_start %s1 @l1 stream 3 over "replicate" : tensor<2080xf32>
    ```
  }];
  let options = [
    Option<"forwardPrefetch", "forward-prefetch", "int64_t", /*default=*/"0",
           "Forward regions ahead whose gathers start early">,
    Option<"backwardPrefetch", "backward-prefetch", "int64_t",
           /*default=*/"0",
           "Backward regions ahead whose gathers start early">,
    Option<"maxInflightGathers", "max-inflight-gathers", "int64_t",
           /*default=*/"0", "Gathers allowed in flight (0: no limit)">,
    Option<"memoryBudget", "memory-budget", "::mlir::fsdp::ByteSize", /*default=*/"0",
           "Bytes a rank may use (0: no budget)">,
    Option<"runtime", "runtime", "std::string", /*default=*/"\"cpu\"",
           "The runtime whose memory outside the arena the budget counts: "
           "cpu, cuda or none">,
    Option<"bucketBytes", "bucket-bytes", "int64_t", /*default=*/"0",
           "Merge consecutive collectives into buckets of up to this many "
           "bytes (0: one collective per unit)">,
    Option<"reshardAfterForward", "reshard-after-forward", "bool",
           /*default=*/"true",
           "Free gathered parameters after each forward region">
  ];
}

def FsdpSimulatePass : Pass<"fsdp-simulate", "::mlir::ModuleOp"> {
  let summary = "Predict step time and exposed communication of a schedule";
  let description = [{
    A cost model of the scheduled `@train_step` (after `--fsdp-schedule`)
    on one rank of N, changing nothing. Three streams: compute runs the
    model ops in program order, each taking max(FLOPs / compute rate,
    bytes moved / memory bandwidth); stream 1 runs all-gathers and stream 2
    reduce-scatters in issue order, each taking latency + bytes x (N - 1) /
    N / bus bandwidth (nccl-tests' bus bandwidth, bytes being the full flat
    tensor); a collective starts when it is issued and its stream is free,
    and `fsdp.wait` holds the compute stream until it ends. Gradient
    clipping's `fsdp.all_reduce_sum` (one scalar) runs on the compute
    stream where it stands, taking latency + 2 x bytes x (N - 1) / N / bus
    bandwidth (an all-reduce's bus bytes). Prints the
    predicted step time, compute time, exposed communication (step time
    not covered by compute) and the per-rank peak memory, and with
    `trace=<file>` writes the timeline as a Chrome trace (JSON; opens in
    Perfetto or chrome://tracing) with one lane per stream, and memory
    counter tracks (`"ph": "C"`) of one rank (every rank holds the same up
    to one element per unit): `memory by kind` (parameters, gradients,
    optimizer, gathered, activations: the `--fsdp-memory-report`
    profile's live bytes at each op, shards and full-size gradients
    together under gradients), `memory total` (their sum, whose maximum is
    the report's peak), and with `memory-budget=B` a constant `memory
    budget` track. An op's sample is placed where the compute stream issues
    it: a gathered buffer counts from its gather's start, before the
    bytes arrive.

    Hardware presets: `h100-nvlink` (bus 370 GB/s, 5 us latency) and
    `ib-400g` (400 Gb/s InfiniBand: bus 47 GB/s per GPU, 15 us), both with
    400 TFLOP/s of sustained dense compute for GEMMs of f32 operands (TF32
    tensor cores), twice that for bf16 operands (`--fsdp-mixed-precision`;
    the ratio of H100's dense peaks), and 3000 GB/s of memory bandwidth;
    any of the rates can be overridden (`compute-tflops` sets the f32 rate,
    bf16 keeping the ratio). Bytes are the types': a bf16 gather moves half
    an f32 one's.

    A two-level network (`ranks-per-node=G`): ranks are laid out node by
    node, G to a node, and each collective's cost comes from the level its
    group crosses. A ring inside one node runs on the node's bus
    (`intra-gbps`, NVLink's 370 GB/s bus bandwidth, `intra-latency-us` 5);
    a ring that leaves a node is as slow as its slowest link. By default
    (`nic-share=group`) that is its group's members' share of the node's
    NICs (`nics-per-node` x `nic-gbps` / G per member on the node, 8 x 47
    GB/s for 8 x 400G InfiniBand): NCCL spreads one communicator's
    channels over the NICs of a node, so a world ring of 8 ranks a node
    runs at up to 8 x 47 GB/s (capped by the bus) and a replica group with
    one member a node at 47 GB/s, with `inter-latency-us` (15).
    `nic-share=rank` gives every ring only a rank's share (47 GB/s at
    G = 8), the pessimistic bound; docs/overlap.md gives the evidence for
    the default.
    The bus-bandwidth formulas stay nccl-tests';
    a group is (size, stride between its ranks), today every collective's
    the whole world (N, 1). The hardware preset then gives the compute and
    memory rates only, and its `bus-gbps` and `latency-us` do not apply
    (the pass rejects them with `ranks-per-node`, and the two-level options
    without it). A second line of the report says how many collectives ran
    inside a node and across nodes, and how long they took:

    ```
    fsdp-simulate: h100-nvlink, world size 16 on 2 nodes of 8 (inside a
      node 370 GB/s, across nodes 8 x 47 GB/s NICs, shared by groups):
      step ...
      collectives: 0 inside a node (0.000 ms), 123 across nodes (... ms)
    ```

    ```
    fsdp-simulate: h100-nvlink, world size 8: step 41.2 ms, compute 38.9 ms,
      exposed communication 2.3 ms (5.6%), peak 26.8 GB per rank
    ```
  }];
  let options = [
    Option<"hardware", "hardware", "std::string", /*default=*/"\"h100-nvlink\"",
           "Preset: h100-nvlink or ib-400g">,
    Option<"computeTflops", "compute-tflops", "double", /*default=*/"0",
           "Sustained compute of f32 GEMMs, TFLOP/s (0: the preset's; "
           "bf16 runs at twice it)">,
    Option<"busGBps", "bus-gbps", "double", /*default=*/"0",
           "Collective bus bandwidth, GB/s (0: the preset's)">,
    Option<"memoryGBps", "memory-gbps", "double", /*default=*/"0",
           "Memory bandwidth, GB/s (0: the preset's)">,
    Option<"latencyUs", "latency-us", "double", /*default=*/"-1",
           "Collective latency, microseconds (-1: the preset's)">,
    Option<"tracePath", "trace", "std::string", /*default=*/"\"\"",
           "Write the predicted timeline here (Chrome trace JSON)">,
    Option<"ranksPerNode", "ranks-per-node", "int64_t", /*default=*/"0",
           "Ranks on one node of a two-level network (0: one level, the "
           "preset's bus for every collective)">,
    Option<"intraGBps", "intra-gbps", "double", /*default=*/"370",
           "Two-level: bus bandwidth inside a node, GB/s (NVLink)">,
    Option<"intraLatencyUs", "intra-latency-us", "double", /*default=*/"5",
           "Two-level: latency of a collective inside a node, us">,
    Option<"nicGBps", "nic-gbps", "double", /*default=*/"47",
           "Two-level: bandwidth of one NIC, GB/s (400G InfiniBand)">,
    Option<"nicsPerNode", "nics-per-node", "int64_t", /*default=*/"8",
           "Two-level: NICs of one node">,
    Option<"interLatencyUs", "inter-latency-us", "double", /*default=*/"15",
           "Two-level: latency of a collective across nodes, us">,
    Option<"nicShare", "nic-share", "std::string", /*default=*/"\"group\"",
           "Two-level: a ring across nodes gets its group's members' share "
           "of the node's NICs (group, NCCL's channels) or one rank's "
           "(rank)">,
    Option<"memoryBudget", "memory-budget", "::mlir::fsdp::ByteSize",
           /*default=*/"0",
           "A budget to draw as a constant memory track (0: none)">
  ];
}

def FsdpMemoryReportPass : Pass<"fsdp-memory-report", "::mlir::ModuleOp"> {
  let summary = "Report what every rank holds, from the sharded IR";
  let description = [{
    An analysis of the sharded `@train_step` (after `--fsdp-shard`) that
    changes nothing and allocates nothing: it reads only types. Prints, to
    stderr, for one rank (all ranks hold the same up to one element per
    unit): parameter, gradient and AdamW shards, the steady state, the
    largest gathered unit, and the forward and backward peaks with what is
    live there (steady state, gathered parameters, full-size unit
    gradients, activations) and where they occur; next to each, the seed's
    formula (4P/N, 4P/N, 8P/N, 16P/N, and 16P/N + 4P/M + activations for
    the forward peak of M equal units), the DDP baseline 16P, and the
    totals over the N ranks. Bytes are exact; GB are 10^9 bytes, as the
    seed counts.

    Lifetimes follow program order: a gathered parameter lives from its
    all-gather to its free, a unit's full-size gradient from the first
    kernel that writes a part of it to its free after the reduce-scatter,
    any other value from its definition to its last use; shards live
    throughout.

    ```
    fsdp-memory-report: world size 8, 41 units, 12759910400 parameters (P), f32
      steady state       25519820800 bytes   25.520 GB   16P/N = 25.520 GB
      ...
    ```
  }];
}

def FsdpVerifyPass : Pass<"fsdp-verify", "::mlir::ModuleOp"> {
  let summary = "Check the FSDP contract of a sharded training step";
  let description = [{
    A contract pass between stages (in the spirit of torch-mlir's backend
    contracts): it changes nothing and fails, with a diagnostic pointing at
    the offending op, when the sharded `@train_step` breaks a rule the
    runtime relies on:

    * a gathered parameter or packed gradient used after its `fsdp.free`,
      freed twice, or never freed;
    * a parameter of a sharded unit read without gathering it (an
      `fsdp.load` left in the step, or a view of something that is not the
      region unit's all-gather);
    * a unit whose AdamW does not consume exactly one reduce-scatter of
      that unit (a missing reduce-scatter), or a unit reduce-scattered
      twice;
    * a collective nested in a region: inside control flow it could run a
      different number of times on different ranks, and a collective
      sequence that differs between ranks hangs the job;
    * gradient clipping (`--fsdp-clip-grad`) that is not by the global
      norm: an AdamW without the scale the others have, a scale that is no
      `fsdp.clip_coefficient`, a coefficient of a sum of squares that is
      not all-reduced (each rank would clip by its own norm), or a chain of
      `fsdp.grad_sq_sum` that leaves out a unit, sums one twice, or sums a
      tensor that is not the unit's reduce-scattered shard.

    * hybrid sharding (a mesh with a `replicate` axis): a collective that
      names no group, a replica all-reduce on a mesh without replicas or
      of a tensor that is not its unit's reduce-scattered shard, a unit
      averaged twice, or an AdamW that reads a shard not averaged over
      the replicas (the replicas would drift apart). The ops' verifiers
      reject a gather, reduce-scatter or clipping sum over "replicate", a
      replica all-reduce over "shard", and a bucket whose members name
      different groups.

    The collectives of a step that passes are a fixed, rank-independent
    sequence: the program has no rank-dependent value and no control flow.
    So every collective of a group is issued by all the group's members
    in the same order (program order), on the same stream, for every
    group of the mesh: all members of a shard group, and of a replica
    group, run this one program, each collective names the one group the
    mesh gives it, and a bucket (one fused collective) runs over one group.
  }];
}

def FsdpSummaryPass : Pass<"fsdp-summary", "::mlir::ModuleOp"> {
  let summary = "Print a table of units, parameters and regions";
  let description = [{
    An analysis that changes nothing: prints, to stderr, one row per unit
    with its parameter count, elements, bytes, number of forward and
    backward regions (in `@train_step` once it exists) and, after lowering,
    number of kernel calls; then the totals and the op count of each
    function.

    ```
    fsdp-summary: 2 units, 4 parameters, 67 elements, 268 bytes
      unit           params      elements         bytes  fwd  bwd kernels
      @layers.0           2            40           160    1    1       0
      ...
    ```
  }];
}

#endif // FSDP_PASSES_TD
