//===- FSDPOps.td - fsdp dialect operations ----------------*- tablegen -*-===//

#ifndef FSDP_OPS_TD
#define FSDP_OPS_TD

include "fsdp/Dialect/FSDP/IR/FSDPDialect.td"
include "fsdp/Dialect/FSDP/IR/FSDPTypes.td"
include "fsdp/Dialect/FSDP/IR/FSDPAttrs.td"
include "fsdp/Dialect/FSDP/IR/FSDPInterfaces.td"
include "fsdp/Dialect/FSDP/IR/FSDPKernelOpBase.td"
include "fsdp/Dialect/FSDP/IR/FSDPKernels.td"
include "mlir/Interfaces/InferTypeOpInterface.td"
include "mlir/IR/SymbolInterfaces.td"
include "mlir/IR/OpAsmInterface.td"
include "mlir/Interfaces/SideEffectInterfaces.td"
include "mlir/Interfaces/ControlFlowInterfaces.td"

//===----------------------------------------------------------------------===//
// Type constraints
//===----------------------------------------------------------------------===//

def FSDP_FloatTensor : StaticShapeTensorOf<[AnyFloat]>;
def FSDP_IdTensor : StaticShapeTensorOf<[I32]>;
/// i32 indices a kernel writes (plan::ElementRule::Indices): a router's
/// choices, a sort's order, positions and offsets.
def FSDP_IndexTensor : StaticShapeTensorOf<[I32]>;
def FSDP_ScalarTensor : 0DTensorOf<[AnyFloat]>;

/// Parameters are state: loads read it, optimizer updates write it. Ops on
/// this resource are never reordered across each other.
def FSDP_ParamResource : Resource<"::mlir::fsdp::ParamResource">;

/// A compute op that lowers to the runtime kernel `kernel` (a plan::Opcode
/// enumerator): FSDP_KernelOpBase (FSDPKernelOpBase.td) for the fsdp
/// dialect, with the traits of every fsdp op. Deriving from this class is
/// what makes an op lowerable: it declares KernelOpInterface, generates
/// getKernelOpcode(), and leaves the methods named in `kernelMethods`
/// (getFlops for a GEMM, getKernelScratch, getBytesMoved) to
/// FSDPKernelOpInterface.cpp: an op without them does not link. Its shapes
/// are its kernel record's `shapes` (FSDPKernels.td), which the interface's
/// verifier checks; an op sets hasVerifier only for what the table cannot
/// say (an attribute's range). See docs/adding-an-op.md.
class FSDP_KernelOp<string mnemonic, string kernel, list<Trait> traits = [],
                    list<string> kernelMethods = []>
    : FSDP_KernelOpBase<FSDP_Dialect, mnemonic, kernel,
                        !listconcat(traits, [FSDP_TensorSizesFit]),
                        kernelMethods>;

class FSDP_DiffOp<string mnemonic, string kernel, list<Trait> traits = [],
                  list<string> kernelMethods = []>
    : FSDP_KernelOp<mnemonic, kernel, !listconcat(traits, [Pure,
        DeclareOpInterfaceMethods<FSDP_DifferentiableOpInterface>]),
        kernelMethods> {
  let assemblyFormat =
      "operands attr-dict `:` functional-type(operands, results)";
}

class FSDP_BackwardOp<string mnemonic, string kernel, list<Trait> traits = [],
                      list<string> kernelMethods = []>
    : FSDP_KernelOp<mnemonic, kernel, !listconcat(traits, [Pure]),
                    kernelMethods> {
  let assemblyFormat =
      "operands attr-dict `:` functional-type(operands, results)";
}

//===----------------------------------------------------------------------===//
// Parameters and units
//===----------------------------------------------------------------------===//

def FSDP_ParamOp : FSDP_Op<"param", [Symbol, HasParent<"::mlir::ModuleOp">]> {
  let summary = "a trainable parameter";
  let description = [{
    Declares a trainable parameter as a module-level symbol with a static
    tensor type and an initializer. `no_weight_decay` exempts it from AdamW's
    decoupled weight decay (biases and norm gains, by convention).
    `selection_bias RATE` makes it a mixture-of-experts router's selection
    bias (DeepSeek-V3's, docs/moe.md), updated outside the gradient: after
    each step every element moves by RATE against the sign of its load
    signal (the router's count of the expert's pairs above the mean,
    summed over the ranks), never by AdamW; f32 and one-dimensional. Names are
    dotted module paths, as PyTorch's `named_parameters` prints them; the
    first all-digit component marks a repeated block (`h.3.attn.qkv.w`
    belongs to block `h.3`), which `--fsdp-wrap policy=per-block` uses.

    ```mlir
    fsdp.param @h.0.attn.qkv.w : tensor<2304x768xf32> init <normal, std = 2.000000e-02>
    fsdp.param @h.0.ln_1.b : tensor<768xf32> init <zeros> no_weight_decay
    ```
  }];
  let arguments = (ins SymbolNameAttr:$sym_name,
                       TypeAttrOf<FSDP_FloatTensor>:$type,
                       FSDP_InitAttr:$init,
                       UnitAttr:$no_weight_decay,
                       OptionalAttr<F64Attr>:$selection_bias);
  let assemblyFormat = [{
    $sym_name `:` $type `init` $init (`no_weight_decay` $no_weight_decay^)?
    (`selection_bias` $selection_bias^)? attr-dict
  }];
  let extraClassDeclaration = [{
    ::mlir::RankedTensorType getTensorType() {
      return ::llvm::cast<::mlir::RankedTensorType>(getType());
    }
    /// Number of elements and bytes of the full (unsharded) parameter.
    int64_t getNumElements() { return getTensorType().getNumElements(); }
    int64_t getSizeInBytes();
  }];
  let hasVerifier = 1;
}

def FSDP_UnitOp : FSDP_Op<"unit", [Symbol, HasParent<"::mlir::ModuleOp">,
    DeclareOpInterfaceMethods<SymbolUserOpInterface>]> {
  let summary = "an FSDP unit: parameters flattened and gathered together";
  let description = [{
    Names the parameters that form one FSDP unit. Sharding flattens them, in
    this order, into one flat parameter; all-gather and reduce-scatter
    happen at the boundaries of the `fsdp.compute` regions of the unit. A
    parameter belongs to at most one unit.

    An `expert_parallel` unit (made by `--fsdp-expert-parallel`, on a mesh
    with an `expert` axis of G ranks) holds stacked expert weights split G
    ways: its parameters' types are one slice's (`E / G` experts of each),
    and it is sharded over the `S / G` ranks of a shard group that hold the
    same slice (the collectives' group `"expert_shard"`). A `shard_copy`
    type (bf16, which `--fsdp-mixed-precision` sets at a shard group of
    one) keeps a copy of the shard: AdamW writes it, gathers read it.

    ```mlir
    fsdp.unit @h.0 params [@h.0.ln_1.w, @h.0.ln_1.b] {shard_copy = bf16}
    fsdp.unit @h.0.experts params [@h.0.mlp.experts.w1.w] {expert_parallel}
    ```
  }];
  let arguments = (ins SymbolNameAttr:$sym_name,
                       FlatSymbolRefArrayAttr:$params,
                       UnitAttr:$expert_parallel, OptionalAttr<TypeAttr>:$shard_copy);
  let assemblyFormat = "$sym_name `params` $params attr-dict";
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    /// The ranks this unit's flat parameter is sharded over: the mesh's
    /// shard axis, or its expert shard group (S / G) when expert-parallel.
    int64_t getShardGroupSize();
  }];
}

def FSDP_LoadOp : FSDP_Op<"load", [
    DeclareOpInterfaceMethods<SymbolUserOpInterface>,
    MemoryEffects<[MemRead<FSDP_ParamResource>]>]> {
  let summary = "reads the current value of a parameter";
  let description = [{
    Reads the full value of a parameter. Inside an `fsdp.compute` region the
    parameter must belong to that region's unit: this is the point where,
    after sharding, the gathered flat parameter is viewed. Example:
    `%w = fsdp.load @h.0.attn.qkv.w : tensor<2304x768xf32>`.
  }];
  let arguments = (ins FlatSymbolRefAttr:$param);
  let results = (outs FSDP_FloatTensor:$result);
  let assemblyFormat = "$param attr-dict `:` type($result)";
}

def FSDP_ComputeOp : FSDP_Op<"compute", [IsolatedFromAbove,
    SingleBlockImplicitTerminator<"YieldOp">, RecursiveMemoryEffects,
    DeclareOpInterfaceMethods<SymbolUserOpInterface>]> {
  let summary = "ops that compute with one unit's parameters";
  let description = [{
    A region that computes with the parameters of one unit in one phase. Its
    body is isolated from above: what it reads from outside is an operand,
    what it produces for later ops (including activations the backward
    saves) is a result. A unit may have several regions (GPT-2's root unit
    computes the embedding at the start of the forward and the head at its
    end). Regions do not nest. After sharding, a forward region is bracketed
    by all-gather and free, a backward region by all-gather, reduce-scatter
    and free.

    ```mlir
    %y = fsdp.compute @layers.0 forward (%x : tensor<8x16xf32>) -> tensor<8x32xf32> {
    ^bb0(%arg0: tensor<8x16xf32>):
      %w = fsdp.load @layers.0.w : tensor<32x16xf32>
      %0 = fsdp.linear %arg0, %w : (tensor<8x16xf32>, tensor<32x16xf32>) -> tensor<8x32xf32>
      fsdp.yield %0 : tensor<8x32xf32>
    }
    ```
  }];
  let arguments = (ins FlatSymbolRefAttr:$unit, FSDP_PhaseAttr:$phase,
                       Variadic<AnyStaticShapeTensor>:$inputs);
  let results = (outs Variadic<AnyStaticShapeTensor>:$results);
  let regions = (region SizedRegion<1>:$body);
  let assemblyFormat = [{
    $unit custom<Phase>($phase) (`ins` `(` $inputs^ `:` type($inputs) `)`)?
    (`->` type($results)^)?
    attr-dict-with-keyword custom<ComputeBody>($body)
  }];
  let hasVerifier = 1;
  let skipDefaultBuilders = 1;
  let builders = [
    OpBuilder<(ins "::mlir::FlatSymbolRefAttr":$unit, "Phase":$phase,
                   "::mlir::ValueRange":$inputs,
                   "::mlir::TypeRange":$resultTypes)>
  ];
  let extraClassDeclaration = [{
    ::mlir::Block &getBodyBlock() { return getBody().front(); }
  }];
}

def FSDP_YieldOp : FSDP_Op<"yield", [Pure, Terminator, ReturnLike,
    HasParent<"ComputeOp">]> {
  let summary = "returns values from an fsdp.compute region";
  let arguments = (ins Variadic<AnyStaticShapeTensor>:$values);
  let builders = [OpBuilder<(ins), [{ /* nothing to yield */ }]>];
  let assemblyFormat = "($values^ `:` type($values))? attr-dict";
}

//===----------------------------------------------------------------------===//
// Model ops (forward)
//===----------------------------------------------------------------------===//

def FSDP_EmbeddingOp : FSDP_DiffOp<"embedding", "Embedding"> {
  let summary = "token plus position embedding";
  let description = [{
    `out[b, t, :] = wte[tokens[b, t], :] + wpe[t, :]` for token ids of shape
    `B x T`, a token table `V x C` and a position table `Tmax x C` with
    `Tmax >= T`. Result `B x T x C`. Without `wpe` it is the token
    embedding alone (Llama's: positions enter through `fsdp.rope`), and its
    backward is `fsdp.token_embedding_backward`.
  }];
  let arguments = (ins FSDP_IdTensor:$tokens, FSDP_FloatTensor:$wte,
                       Optional<FSDP_FloatTensor>:$wpe);
  let results = (outs FSDP_FloatTensor:$result);
}

def FSDP_LayerNormOp : FSDP_DiffOp<"layer_norm", "LayerNorm"> {
  let summary = "layer normalisation over the last dimension";
  let description = [{
    Normalises `x` (`... x C`) over its last dimension and applies the gain
    `weight` and `bias` (`C`). Returns the output and, as saved activations
    for the backward, the per-row mean and reciprocal standard deviation
    (shape `...`, always f32).
  }];
  let arguments = (ins FSDP_FloatTensor:$input, FSDP_FloatTensor:$weight,
                       FSDP_FloatTensor:$bias,
                       DefaultValuedAttr<F32Attr, "1.0e-5">:$epsilon);
  let results = (outs FSDP_FloatTensor:$result, FSDP_FloatTensor:$mean,
                      FSDP_FloatTensor:$rstd);
  // epsilon > 0; the shapes are the kernel record's (FSDPKernels.td).
  let hasVerifier = 1;
}

def FSDP_LinearOp : FSDP_DiffOp<"linear", "Linear", [], ["getFlops"]> {
  let summary = "y = x W^T + b (PyTorch nn.Linear layout)";
  let description = [{
    `input` is `... x K`, `weight` is `N x K`, the optional `bias` is `N`;
    the result is `... x N`. Leading dimensions are flattened into the rows
    of one GEMM.
  }];
  let arguments = (ins FSDP_FloatTensor:$input, FSDP_FloatTensor:$weight,
                       Optional<FSDP_FloatTensor>:$bias);
  let results = (outs FSDP_FloatTensor:$result);
}

def FSDP_AddOp : FSDP_DiffOp<"add", "Add", [SameOperandsAndResultType]> {
  let summary = "elementwise sum (residual add, gradient accumulation)";
  let arguments = (ins FSDP_FloatTensor:$lhs, FSDP_FloatTensor:$rhs);
  let results = (outs FSDP_FloatTensor:$result);
  let assemblyFormat = "$lhs `,` $rhs attr-dict `:` type($result)";
}

def FSDP_GeluOp : FSDP_DiffOp<"gelu", "Gelu", [SameOperandsAndResultType]> {
  let summary = "GELU, tanh approximation (as GPT-2)";
  let arguments = (ins FSDP_FloatTensor:$input);
  let results = (outs FSDP_FloatTensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($result)";
}

def FSDP_ReluOp : FSDP_DiffOp<"relu", "Relu", [SameOperandsAndResultType]> {
  let summary = "max(x, 0)";
  let arguments = (ins FSDP_FloatTensor:$input);
  let results = (outs FSDP_FloatTensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($result)";
}

def FSDP_CastOp : FSDP_DiffOp<"cast", "Cast"> {
  let summary = "converts a tensor's elements to another float type";
  let description = [{
    Element-wise conversion between float types of one shape: f32 to bf16
    rounds to nearest, ties to even (as CUDA's `__float2bfloat16_rn`); bf16
    to f32 is exact. `--fsdp-mixed-precision` places them at unit
    boundaries: a full-size bf16 gradient cast to the reduce type before
    its reduce-scatter, a bf16 reduced shard back to the f32 master, a
    step input into the compute type. Its gradient is the gradient cast
    back.

    ```mlir
    %g32 = fsdp.cast %g : tensor<7087872xbf16> -> tensor<7087872xf32>
    ```
  }];
  let arguments = (ins FSDP_FloatTensor:$source);
  let results = (outs FSDP_FloatTensor:$result);
  let assemblyFormat =
      "$source attr-dict `:` type($source) `->` type($result)";
}

def FSDP_AttentionOp : FSDP_DiffOp<"attention", "", [], ["getFlops"]> {
  let summary = "causal multi-head self-attention from a fused qkv tensor";
  let description = [{
    `qkv` is `B x T x (C + 2 kv_heads hs)` with `hs = C / heads`, holding
    the queries (`heads` heads), keys and values (`kv_heads` heads each)
    side by side; `heads` divides `C`. Without `kv_heads` (it defaults to
    `heads`) that is `B x T x 3C`, as GPT-2's `c_attn` produces it. With
    fewer key/value heads (grouped-query attention), `kv_heads` divides
    `heads` and kv head `g` serves the `heads / kv_heads` consecutive query
    heads from `g * heads / kv_heads` on. Returns the attention output
    `B x T x C` and the activation its backward reads, which `impl`
    decides:

    - `materialized` (the default): the softmax probabilities
      `B x heads x T x T` (zero above the diagonal); the backward needs a
      second buffer of that size for their gradient. Kernels `attention`,
      `attention_backward`.
    - `blocked` (FlashAttention-2's algorithm): one log-sum-exp per query
      row, `B x heads x T`; the forward runs key block by key block with an
      online softmax and the backward recomputes the probabilities block by
      block from `qkv` and the log-sum-exp, so no `T x T` buffer exists.
      Kernels `attention_blocked`, `attention_backward_blocked`.

    Both compute the same function to float32 rounding; `--fsdp-attention`
    chooses between them.

    `window` (0, the default: none) is a sliding window, Mistral's: query
    `i` sees the `window` keys `i - window < j <= i` (itself and the
    `window - 1` before it), as transformers' `sliding_window` does. A
    window of `T` or more is full causal attention. The materialized form
    masks the probabilities outside the window (its products stay the
    causal ones); the blocked form skips the key blocks wholly outside it,
    so its work grows with `T x window` instead of `T^2 / 2`.

    ```mlir
    %out, %lse = fsdp.attention %qkv {heads = 2 : i64,
                                      impl = #fsdp.attention_impl<blocked>}
        : (tensor<1x4x24xf32>) -> (tensor<1x4x8xf32>, tensor<1x2x4xf32>)
    ```

    A Mistral layer's attention (`fsdp-gen mistral --sliding-window 4096`),
    and the same op after `--fsdp-attention=blocked`; the backward that
    `--fsdp-autodiff` builds carries the same window:

    ```mlir
    %o, %p = fsdp.attention %qkv {heads = 32 : i64, kv_heads = 8 : i64,
                                  window = 4096 : i64}
        : (tensor<1x8192x6144xf32>) -> (tensor<1x8192x4096xf32>,
                                        tensor<1x32x8192x8192xf32>)
    %o, %lse = fsdp.attention %qkv {heads = 32 : i64,
                                    impl = #fsdp.attention_impl<blocked>,
                                    kv_heads = 8 : i64, window = 4096 : i64}
        : (tensor<1x8192x6144xf32>) -> (tensor<1x8192x4096xf32>,
                                        tensor<1x32x8192xf32>)
    ```
  }];
  let arguments = (ins FSDP_FloatTensor:$qkv,
                       ConfinedAttr<I64Attr, [IntPositive]>:$heads,
                       DefaultValuedAttr<FSDP_AttentionImplAttr,
                           "::mlir::fsdp::AttentionImpl::Materialized">:$impl,
                       OptionalAttr<ConfinedAttr<I64Attr, [IntPositive]>>:$kv_heads,
                       DefaultValuedAttr<ConfinedAttr<I64Attr, [IntNonNegative]>,
                           "0">:$window);
  let results = (outs FSDP_FloatTensor:$result, FSDP_FloatTensor:$saved);
  let fsdpKernelVariants = ["Attention", "AttentionBlocked"];
  let extraClassDeclaration = [{
    /// The key/value head count: kv_heads, or heads when it is absent.
    int64_t getKvHeadCount() { return getKvHeads().value_or(getHeads()); }
  }];
}

def FSDP_CrossEntropyOp :
    FSDP_DiffOp<"cross_entropy", "CrossEntropy", [], ["getKernelScratch"]> {
  let summary = "softmax cross-entropy, mean over all positions";
  let description = [{
    `logits` is `... x V`, `targets` holds class ids of shape `...`. Returns
    the mean over all positions of `-log softmax(logits)[target]` as a 0-d
    tensor.
  }];
  let arguments = (ins FSDP_FloatTensor:$logits, FSDP_IdTensor:$targets);
  let results = (outs FSDP_ScalarTensor:$loss);
}

//===----------------------------------------------------------------------===//
// Llama's ops: RMSNorm, SwiGLU, rotary embeddings
//===----------------------------------------------------------------------===//

def FSDP_RmsNormOp : FSDP_DiffOp<"rms_norm", "RmsNorm"> {
  let summary = "RMS normalisation over the last dimension (Llama's RMSNorm)";
  let description = [{
    `result = x * rstd * weight` with `rstd = 1 / sqrt(mean(x^2) + epsilon)`
    over the last dimension of `x` (`... x C`); `weight` is `C`, there is no
    bias and no centring (Hugging Face's `LlamaRMSNorm`). Returns the output
    and, as the saved activation of the backward, the per-row `rstd`
    (shape `...`, always f32, like layer_norm's statistics). `epsilon`
    defaults to 1e-6, the `rms_norm_eps` of Hugging Face's `LlamaConfig`.

    ```mlir
    %y, %rstd = fsdp.rms_norm %x, %w {epsilon = 1.0e-05 : f32}
        : (tensor<2x4x8xf32>, tensor<8xf32>) -> (tensor<2x4x8xf32>, tensor<2x4xf32>)
    ```
  }];
  let arguments = (ins FSDP_FloatTensor:$input, FSDP_FloatTensor:$weight,
                       DefaultValuedAttr<F32Attr, "1.0e-6">:$epsilon);
  let results = (outs FSDP_FloatTensor:$result, FSDP_FloatTensor:$rstd);
  // epsilon > 0; the shapes are the kernel record's (FSDPKernels.td).
  let hasVerifier = 1;
}

def FSDP_SwiGluOp : FSDP_DiffOp<"swiglu", "SwiGlu"> {
  let summary = "silu(gate) * up (the gate of Llama's MLP)";
  let description = [{
    `result = gate * sigmoid(gate) * up`, element-wise, for two operands of
    one type: Llama's MLP is `w2(swiglu(w1(x), w3(x)))` with `w1` (the
    gate) and `w3` (the up projection) two linears without bias, so the
    generator emits them as they are in a Hugging Face checkpoint
    (`gate_proj`, `up_proj`) and the op takes both.

    ```mlir
    %h = fsdp.swiglu %gate, %up
        : (tensor<2x4x16xf32>, tensor<2x4x16xf32>) -> tensor<2x4x16xf32>
    ```
  }];
  let arguments = (ins FSDP_FloatTensor:$gate, FSDP_FloatTensor:$up);
  let results = (outs FSDP_FloatTensor:$result);
}

/// rope's and rope_backward's frequency scaling (Hugging Face's
/// rope_scaling / rope_parameters): see fsdp.rope's description.
defvar FSDP_RopeScalingArgs = (ins
    DefaultValuedAttr<FSDP_RopeScalingAttr,
                      "::mlir::fsdp::RopeScaling::Default">:$scaling,
    DefaultValuedAttr<F64Attr, "1.0">:$factor,
    DefaultValuedAttr<F64Attr, "1.0">:$low_freq_factor,
    DefaultValuedAttr<F64Attr, "4.0">:$high_freq_factor,
    DefaultValuedAttr<I64Attr, "0">:$original_max_positions,
    DefaultValuedAttr<F64Attr, "1.0">:$attention_factor,
    DefaultValuedAttr<F64Attr, "0.0">:$correction_low,
    DefaultValuedAttr<F64Attr, "0.0">:$correction_high);

def FSDP_RopeOp : FSDP_DiffOp<"rope", "Rope"> {
  let summary = "rotary position embeddings of the queries and keys of qkv";
  let description = [{
    Rotates the queries and keys of a fused `qkv` tensor
    `B x T x (heads + 2 kv_heads) hs` (the layout of `fsdp.attention`'s
    operand: `heads` query heads, then `kv_heads` key heads, then
    `kv_heads` value heads, each `hs` wide; `kv_heads` defaults to `heads`)
    and copies the values unchanged. The result has qkv's type.

    The convention is Hugging Face's rotate-half (`rotate_half` in
    `modeling_llama.py`), so that Hugging Face checkpoints need no
    permutation of `q_proj` and `k_proj`: in every q and k head, the
    element pairs are `(i, i + hs/2)` for `i < hs/2`, and at position `t`
    (the index along `T`) the pair turns by the angle
    `t * theta^(-2i/hs)`:

    ```
    out[i]        = x[i] cos(a) - x[i + hs/2] sin(a)
    out[i + hs/2] = x[i + hs/2] cos(a) + x[i] sin(a)
    ```

    `hs` must be even; `theta` is the config's `rope_theta` (10000 for
    Llama 1 and 2, 500000 for Llama 3). The angle is computed in f32 as
    Hugging Face does (`inv_freq` in f32, then `t * inv_freq`). The
    backward is the inverse rotation of the gradient, `fsdp.rope_backward`
    of the same attributes.

    ```mlir
    %r = fsdp.rope %qkv {heads = 4 : i64, kv_heads = 2 : i64,
                         theta = 5.0e+05 : f32}
        : (tensor<1x8x64xf32>) -> tensor<1x8x64xf32>
    ```

    **Scaling.** `scaling` changes the frequencies `inv_freq[i]` (the
    angle is `t * inv_freq[i]`) exactly as Hugging Face's `rope_init_fn`
    for the config's `rope_type` (`modeling_rope_utils.py`; the shared
    definition is `runtime/include/fsdp/runtime/RopeScaling.h`, f32 where
    torch computes in f32). With `f[i] = theta^(-2i/hs)`:

    - `default`: `inv_freq = f` (the other attributes unused).
    - `linear`: `inv_freq = f / factor`.
    - `llama3` (Llama 3.1): with `L = original_max_positions`, the
      wavelength `w = 2 pi / f` and `s = (L / w - low_freq_factor) /
      (high_freq_factor - low_freq_factor)`: `f / factor` where
      `w > L / low_freq_factor`, `f` where `w < L / high_freq_factor`,
      `(1 - s) f / factor + s f` between.
    - `yarn`: with the ramp `r = clamp((i - correction_low) /
      (correction_high - correction_low), 0, 1)`: `inv_freq = f / factor *
      r + f * (1 - r)`, and cos and sin multiplied by `attention_factor`.
      The correction range is Hugging Face's `find_correction_range` of
      `beta_fast`, `beta_slow`, `original_max_position_embeddings` and
      `truncate`, which fsdp-gen computes (`yarnCorrectionRange`), as it
      computes `attention_factor` from `factor`, `mscale` and
      `mscale_all_dim` when the config leaves it out.

    Attributes that the kind does not read must keep their defaults (the
    verifier says which); the values' ranges are the kernel's
    (`ropeScalingError` in RopeScaling.h: a positive factor, `0 <
    low_freq_factor < high_freq_factor` and `original_max_positions > 0`
    for llama3, a positive `attention_factor` and `0 <= correction_low <=
    correction_high` for yarn), checked with the shapes as the plan loader
    checks them. Llama 3.1's rope, before and after the lowering (the plan
    stores the scaling as 0 default, 1 linear, 2 llama3, 3 yarn):

    ```mlir
    %r = fsdp.rope %qkv {heads = 4 : i64, kv_heads = 2 : i64,
                         theta = 5.0e+05 : f32,
                         scaling = #fsdp.rope_scaling<llama3>,
                         factor = 8.0 : f64, original_max_positions = 8192}
        : (tensor<1x8x64xf32>) -> tensor<1x8x64xf32>
    // after --fsdp-lower-to-runtime (every parameter stored, sorted):
    fsdprt.kernel "rope" ins(%qkv : memref<1x8x64xf32>)
        outs(%r : memref<1x8x64xf32>) params {attention_factor = 1.0 : f64,
        correction_high = 0.0 : f64, correction_low = 0.0 : f64,
        factor = 8.0 : f64, heads = 4 : i64, high_freq_factor = 4.0 : f64,
        kv_heads = 2 : i64, low_freq_factor = 1.0 : f64,
        original_max_positions = 8192 : i64, scaling = 2 : i64,
        theta = 5.0e+05 : f32}
    ```
  }];
  let arguments = !con((ins FSDP_FloatTensor:$qkv,
                       ConfinedAttr<I64Attr, [IntPositive]>:$heads,
                       OptionalAttr<ConfinedAttr<I64Attr, [IntPositive]>>:
                           $kv_heads,
                       DefaultValuedAttr<F32Attr, "10000.0">:$theta),
                       FSDP_RopeScalingArgs);
  let results = (outs FSDP_FloatTensor:$result);
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    /// kv_heads, or heads where the IR leaves it out.
    int64_t getNumKvHeads() { return getKvHeads().value_or(getHeads()); }
  }];
}

def FSDP_QkNormOp : FSDP_DiffOp<"qk_norm", "QkNorm"> {
  let summary = "RMS normalisation of each query and key head of qkv (Qwen3)";
  let description = [{
    Normalises every query head and every key head of a fused `qkv` tensor
    `B x T x (heads + 2 kv_heads) hs` (the layout of `fsdp.rope` and
    `fsdp.attention`: `heads` query heads, then `kv_heads` key heads, then
    `kv_heads` value heads, each `hs` wide; `kv_heads` defaults to `heads`)
    by RMSNorm over its `hs` elements, with the gain `q_weight` (`hs`) on
    the query heads and `k_weight` (`hs`) on the key heads; the values are
    copied. This is Hugging Face's Qwen3 attention, `q_norm` and `k_norm`
    (`Qwen3RMSNorm(head_dim)`) applied per head before the rotary
    embedding:

    ```
    r = 1 / sqrt(mean(x_head^2) + epsilon)       per q and k head of a row
    out_head = x_head * r * (q_weight or k_weight)
    ```

    Returns the result (qkv's type) and, as the saved activation of the
    backward, one `rstd` per query and key head of each row,
    `B x T x (heads + kv_heads)`, always f32 (as rms_norm's). Before, the
    projection feeds rope directly; after, qk_norm sits between them:

    ```mlir
    %qkv = fsdp.linear %h, %w : ... -> tensor<1x8x96xf32>
    %n, %rstd = fsdp.qk_norm %qkv, %qn, %kn {heads = 4 : i64, kv_heads = 2 : i64,
                                            epsilon = 1.0e-06 : f32}
        : (tensor<1x8x96xf32>, tensor<12xf32>, tensor<12xf32>)
          -> (tensor<1x8x96xf32>, tensor<1x8x6xf32>)
    %r = fsdp.rope %n {heads = 4 : i64, kv_heads = 2 : i64, theta = 1.0e+06 : f32}
        : (tensor<1x8x96xf32>) -> tensor<1x8x96xf32>
    ```
  }];
  let arguments = (ins FSDP_FloatTensor:$qkv, FSDP_FloatTensor:$q_weight,
                       FSDP_FloatTensor:$k_weight,
                       ConfinedAttr<I64Attr, [IntPositive]>:$heads,
                       OptionalAttr<ConfinedAttr<I64Attr, [IntPositive]>>:
                           $kv_heads,
                       DefaultValuedAttr<F32Attr, "1.0e-6">:$epsilon);
  let results = (outs FSDP_FloatTensor:$result, FSDP_FloatTensor:$rstd);
  // epsilon > 0; the shapes are the kernel record's (FSDPKernels.td).
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Backward ops
//===----------------------------------------------------------------------===//

def FSDP_TokenEmbeddingBackwardOp :
    FSDP_BackwardOp<"token_embedding_backward", "TokenEmbeddingBackward"> {
  let summary = "gradient of the token table of an embedding without positions";
  let description = [{
    Scatter-adds `grad` (`B x T x C`) into a zero `V x C` token-table
    gradient at the rows named by `tokens`: `fsdp.embedding_backward`
    without the position table.
  }];
  let arguments = (ins FSDP_FloatTensor:$grad, FSDP_IdTensor:$tokens);
  let results = (outs FSDP_FloatTensor:$wte_grad);
}

def FSDP_EmbeddingBackwardOp :
    FSDP_BackwardOp<"embedding_backward", "EmbeddingBackward"> {
  let summary = "gradients of the token and position tables";
  let description = [{
    Scatter-adds `grad` (`B x T x C`) into a zero `V x C` token-table
    gradient at the rows named by `tokens`, and sums it over the batch into
    the `Tmax x C` position-table gradient (rows past `T` are zero).
  }];
  let arguments = (ins FSDP_FloatTensor:$grad, FSDP_IdTensor:$tokens);
  let results = (outs FSDP_FloatTensor:$wte_grad, FSDP_FloatTensor:$wpe_grad);
}

def FSDP_LayerNormBackwardOp :
    FSDP_BackwardOp<"layer_norm_backward", "LayerNormBackward"> {
  let summary = "gradients of layer_norm's input, weight and bias";
  let arguments = (ins FSDP_FloatTensor:$grad, FSDP_FloatTensor:$input,
                       FSDP_FloatTensor:$weight, FSDP_FloatTensor:$mean,
                       FSDP_FloatTensor:$rstd);
  let results = (outs FSDP_FloatTensor:$input_grad,
                      FSDP_FloatTensor:$weight_grad,
                      FSDP_FloatTensor:$bias_grad);
}

def FSDP_LinearGradInputOp :
    FSDP_BackwardOp<"linear_grad_input", "LinearGradInput", [],
                    ["getFlops"]> {
  let summary = "dx = dy W (one GEMM)";
  let arguments = (ins FSDP_FloatTensor:$grad, FSDP_FloatTensor:$weight);
  let results = (outs FSDP_FloatTensor:$result);
}

def FSDP_LinearGradWeightOp :
    FSDP_BackwardOp<"linear_grad_weight", "LinearGradWeight", [],
                    ["getFlops"]> {
  let summary = "dW = dy^T x, summed over all leading dimensions (one GEMM)";
  let arguments = (ins FSDP_FloatTensor:$grad, FSDP_FloatTensor:$input);
  let results = (outs FSDP_FloatTensor:$result);
}

def FSDP_BiasGradOp : FSDP_BackwardOp<"bias_grad", "BiasGrad"> {
  let summary = "db = dy summed over all leading dimensions";
  let arguments = (ins FSDP_FloatTensor:$grad);
  let results = (outs FSDP_FloatTensor:$result);
}

def FSDP_GeluBackwardOp : FSDP_BackwardOp<"gelu_backward", "GeluBackward"> {
  let summary = "dx = dy * gelu'(x)";
  let arguments = (ins FSDP_FloatTensor:$grad, FSDP_FloatTensor:$input);
  let results = (outs FSDP_FloatTensor:$result);
}

def FSDP_ReluBackwardOp : FSDP_BackwardOp<"relu_backward", "ReluBackward"> {
  let summary = "dx = dy where x > 0, else 0";
  let arguments = (ins FSDP_FloatTensor:$grad, FSDP_FloatTensor:$input);
  let results = (outs FSDP_FloatTensor:$result);
}

def FSDP_AttentionBackwardOp :
    FSDP_BackwardOp<"attention_backward", "", [],
                    ["getKernelScratch", "getFlops"]> {
  let summary = "gradient of the fused qkv tensor";
  let description = [{
    `saved` is what the forward of the same `impl` saved: the probabilities
    (`materialized`) or the log-sum-exp per row (`blocked`), whose backward
    also reads the forward's `output`. `heads`, `kv_heads` and `window`
    are the forward's; with grouped-query attention the gradient of a kv
    head sums over the query heads it serves, and with a window only the
    keys inside a query's window get a gradient from it (the blocked form
    skips the key blocks wholly outside, as its forward does).
  }];
  let arguments = (ins FSDP_FloatTensor:$grad, FSDP_FloatTensor:$qkv,
                       FSDP_FloatTensor:$saved,
                       Optional<FSDP_FloatTensor>:$output,
                       ConfinedAttr<I64Attr, [IntPositive]>:$heads,
                       DefaultValuedAttr<FSDP_AttentionImplAttr,
                           "::mlir::fsdp::AttentionImpl::Materialized">:$impl,
                       OptionalAttr<ConfinedAttr<I64Attr, [IntPositive]>>:$kv_heads,
                       DefaultValuedAttr<ConfinedAttr<I64Attr, [IntNonNegative]>,
                           "0">:$window);
  let results = (outs FSDP_FloatTensor:$result);
  let fsdpKernelVariants = ["AttentionBackward", "AttentionBackwardBlocked"];
  let extraClassDeclaration = [{
    /// The key/value head count: kv_heads, or heads when it is absent.
    int64_t getKvHeadCount() { return getKvHeads().value_or(getHeads()); }
  }];
}

def FSDP_CrossEntropyBackwardOp :
    FSDP_BackwardOp<"cross_entropy_backward", "CrossEntropyBackward"> {
  let summary = "dlogits = dloss * (softmax(logits) - onehot(targets)) / rows";
  let arguments = (ins FSDP_ScalarTensor:$grad, FSDP_FloatTensor:$logits,
                       FSDP_IdTensor:$targets);
  let results = (outs FSDP_FloatTensor:$result);
}

// Backward of Llama's ops (rms_norm, swiglu, rope)

def FSDP_RmsNormBackwardOp :
    FSDP_BackwardOp<"rms_norm_backward", "RmsNormBackward"> {
  let summary = "gradients of rms_norm's input and weight";
  let description = [{
    From the forward's saved `rstd` (f32): with `n = x * rstd` and
    `dn = weight * grad`, `input_grad = rstd * (dn - n * mean(dn * n))`
    per row and `weight_grad = sum over rows of grad * n`.
  }];
  let arguments = (ins FSDP_FloatTensor:$grad, FSDP_FloatTensor:$input,
                       FSDP_FloatTensor:$weight, FSDP_FloatTensor:$rstd);
  let results = (outs FSDP_FloatTensor:$input_grad,
                      FSDP_FloatTensor:$weight_grad);
}

def FSDP_SwiGluBackwardOp :
    FSDP_BackwardOp<"swiglu_backward", "SwiGluBackward"> {
  let summary = "gradients of swiglu's gate and up";
  let description = [{
    With `s = sigmoid(gate)`: `up_grad = grad * gate * s` and
    `gate_grad = grad * up * s * (1 + gate * (1 - s))`.
  }];
  let arguments = (ins FSDP_FloatTensor:$grad, FSDP_FloatTensor:$gate,
                       FSDP_FloatTensor:$up);
  let results = (outs FSDP_FloatTensor:$gate_grad, FSDP_FloatTensor:$up_grad);
}

def FSDP_RopeBackwardOp : FSDP_BackwardOp<"rope_backward", "RopeBackward"> {
  let summary = "gradient of rope: the inverse rotation";
  let description = [{
    A rotation's transpose is its inverse, so the gradient of `fsdp.rope`
    is the gradient rotated back: the same pairs and angles with the sign
    of the sine flipped (`out[i] = g[i] cos(a) + g[i + hs/2] sin(a)`,
    `out[i + hs/2] = g[i + hs/2] cos(a) - g[i] sin(a)`), the values'
    gradient passed through. Same operand layout and attributes as the
    forward (the scaling's included: yarn's attention factor scales the
    gradient too); it reads no saved activation.
  }];
  let arguments = !con((ins FSDP_FloatTensor:$grad,
                       ConfinedAttr<I64Attr, [IntPositive]>:$heads,
                       OptionalAttr<ConfinedAttr<I64Attr, [IntPositive]>>:
                           $kv_heads,
                       DefaultValuedAttr<F32Attr, "10000.0">:$theta),
                       FSDP_RopeScalingArgs);
  let results = (outs FSDP_FloatTensor:$result);
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    /// kv_heads, or heads where the IR leaves it out.
    int64_t getNumKvHeads() { return getKvHeads().value_or(getHeads()); }
  }];
}

def FSDP_QkNormBackwardOp :
    FSDP_BackwardOp<"qk_norm_backward", "QkNormBackward"> {
  let summary = "gradients of qk_norm's qkv and gains";
  let description = [{
    rms_norm's backward per query and key head (from the saved `rstd`):
    with `n = x_head * rstd` and `dn = gain * grad_head`, the head's
    gradient is `rstd * (dn - n * mean(dn * n))`; the values' gradient
    passes through. `q_weight_grad` sums `grad_head * n` over every query
    head of every row, `k_weight_grad` over every key head.
  }];
  let arguments = (ins FSDP_FloatTensor:$grad, FSDP_FloatTensor:$qkv,
                       FSDP_FloatTensor:$q_weight, FSDP_FloatTensor:$k_weight,
                       FSDP_FloatTensor:$rstd,
                       ConfinedAttr<I64Attr, [IntPositive]>:$heads,
                       OptionalAttr<ConfinedAttr<I64Attr, [IntPositive]>>:
                           $kv_heads);
  let results = (outs FSDP_FloatTensor:$qkv_grad,
                      FSDP_FloatTensor:$q_weight_grad,
                      FSDP_FloatTensor:$k_weight_grad);
}

//===----------------------------------------------------------------------===//
// Optimizer
//===----------------------------------------------------------------------===//

def FSDP_AdamWOp : FSDP_Op<"adamw", [
    DeclareOpInterfaceMethods<SymbolUserOpInterface>,
    MemoryEffects<[MemRead<FSDP_ParamResource>,
                   MemWrite<FSDP_ParamResource>]>]> {
  let summary = "AdamW update of one parameter, in place";
  let description = [{
    Updates parameter `param` in place from its gradient, with decoupled
    weight decay (Loshchilov & Hutter). The first and second moments are
    state owned by the parameter (zero at step 1, same shape and element
    count); `step` is the 1-based step number used for bias correction.
    `weight_decay` is the effective decay for this parameter: 0 for a
    `no_weight_decay` parameter.

    ```mlir
    fsdp.adamw @h.0.attn.qkv.w, %g, %step {lr = 3.0e-4 : f32, beta1 = 0.9 : f32,
        beta2 = 0.95 : f32, eps = 1.0e-8 : f32, weight_decay = 0.1 : f32}
        : tensor<2304x768xf32>
    ```
  }];
  let arguments = (ins FlatSymbolRefAttr:$param, FSDP_FloatTensor:$grad,
                       I64:$step, F32Attr:$lr, F32Attr:$beta1, F32Attr:$beta2,
                       F32Attr:$eps, F32Attr:$weight_decay);
  let assemblyFormat = [{
    $param `,` $grad `,` $step attr-dict `:` type($grad)
  }];
  let hasVerifier = 1;
}

include "fsdp/Dialect/FSDP/IR/FSDPMoeOps.td"
include "fsdp/Dialect/FSDP/IR/FSDPShardingOps.td"
include "fsdp/Dialect/FSDP/IR/FSDPExpertOps.td"

#endif // FSDP_OPS_TD
