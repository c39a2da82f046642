//===- ModelPasses.td - passes that build the step ---------*- tablegen -*-===//
//
// The passes that turn a model into a training step: units by a wrap
// policy, attention's form, the backward and AdamW, and recomputation.
//
//===----------------------------------------------------------------------===//

#ifndef FSDP_MODEL_PASSES_TD
#define FSDP_MODEL_PASSES_TD

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

#endif // FSDP_MODEL_PASSES_TD
