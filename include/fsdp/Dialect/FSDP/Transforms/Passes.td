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
           "Wrap policy: per-block, size-threshold or none">,
    Option<"thresholdBytes", "threshold-bytes", "int64_t",
           /*default=*/"100000000",
           "Smallest unit, in bytes, under policy=size-threshold">
  ];
  let dependentDialects = ["::mlir::fsdp::FSDPDialect"];
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
