//===- FSDPKernels.td - the runtime's kernel table ---------*- tablegen -*-===//
//
// Every runtime kernel, once: its opcode (the number a plan stores), its
// operands with their element-type rules and roles, its numeric
// parameters with their defaults, and the backend method that runs it.
// fsdp-tblgen (tools/fsdp-tblgen) turns these records into the runtime's
// opcode enum and kernel table (runtime/include/fsdp/runtime/
// KernelTable.inc, checked in so that the runtime builds without MLIR),
// the dispatch name lists, plan_tool.py's opcodes and plan-format.md's
// table, and checks each one against the fsdp op that lowers to it
// (FSDP_KernelOp's `kernel`): the kernel is named after the op, its inputs
// are the op's operands (names, optional ones, token ids), its results
// the op's results, and a parameter the op declares with a default
// (DefaultValuedAttr) takes that default. See docs/adding-an-op.md.
//
//===----------------------------------------------------------------------===//

#ifndef FSDP_KERNELS_TD
#define FSDP_KERNELS_TD

include "mlir/IR/Utils.td" // ins, outs

/// An operand of a kernel: its element rule (plan::ElementRule) and role
/// (plan::OperandRole); an optional input may be left out (the last ones).
class FSDP_KernelOperand<string rule_, string role_, bit optional_ = 0> {
  string rule = rule_;
  string role = role_;
  bit optional = optional_;
}
def KFloats : FSDP_KernelOperand<"Float", "Input">;
def KOptFloats : FSDP_KernelOperand<"Float", "Input", 1>;
def KIds : FSDP_KernelOperand<"TokenIds", "Input">;
def KIndices : FSDP_KernelOperand<"Indices", "Input">;
def KIndexResult : FSDP_KernelOperand<"Indices", "Result">;
def KStat : FSDP_KernelOperand<"F32", "Input">;
def KOptStat : FSDP_KernelOperand<"F32", "Input", 1>;
def KAnyFloats : FSDP_KernelOperand<"AnyFloat", "Input">;
def KResult : FSDP_KernelOperand<"Float", "Result">;
def KStatResult : FSDP_KernelOperand<"F32", "Result">;
def KAnyResult : FSDP_KernelOperand<"AnyFloat", "Result">;
def KScratch : FSDP_KernelOperand<"Float", "Scratch">;
def KStatScratch : FSDP_KernelOperand<"F32", "Scratch">;
def KUpdated : FSDP_KernelOperand<"F32", "Updated">;
def KOptCopy : FSDP_KernelOperand<"AnyFloat", "Updated", 1>;

/// A numeric parameter (stored as a double). `type` is the attribute the
/// lowering builds for a default (f32, f64 or i64; an i64 one may be held
/// by an enum attribute, which the lowering stores as its integer). `sameAs` names the
/// parameter whose value it takes when the IR leaves it out (kv_heads:
/// heads); a default value comes from the op's DefaultValuedAttr.
class FSDP_KernelParam<string type_, string sameAs_ = ""> {
  string type = type_;
  string sameAs = sameAs_;
}
def KF32 : FSDP_KernelParam<"f32">;
def KF64 : FSDP_KernelParam<"f64">;
def KI64 : FSDP_KernelParam<"i64">;
def KHeadsOr : FSDP_KernelParam<"i64", "heads">;
def params;

/// Kernel `name` (`enumerator` in plan::Opcode), opcode `opcode`. Opcodes
/// are what plans store: they never change; a new kernel takes the next.
/// `dispatch` is the backend method that KernelDispatch.h's runCompute
/// calls for it (FSDP_RUNTIME_GEMM_KERNELS when `gemm`, else
/// FSDP_RUNTIME_OTHER_KERNELS); empty for a kernel that the executor or the
/// backends run by hand. `byHand`: the fsdp op of the kernel's name is no
/// FSDP_KernelOp but has a case of its own in LowerToRuntime.cpp (fsdp-tblgen
/// requires the op to exist, and every other op named after a kernel to be
/// an FSDP_KernelOp of it). `notes` go into plan-format.md's table.
///
/// Shapes (runtime/include/fsdp/runtime/KernelShapes.h evaluates them, for
/// the plan loader and the dispatch): `shapes` gives operands' patterns as
/// "operand: pattern" over named dims ([*R, C]: the leading dims R and the
/// width C; [#N, C]: leading dims by their product; #C: the element count
/// only); `dimChecks` the conditions on dims ("C > 0": a width a kernel
/// divides by, "R <= INT": what reaches BLAS or a CUDA grid, "P >= T");
/// `derive` what a pattern cannot say, from the parameters
/// (shapes::Derive: "AttentionHeads", "RopeHeads"); `extraCheck` the
/// loader's named check against the rest of the plan (units, buffer kinds,
/// the vocabulary: runtime/src/plan/PlanKernelChecks.cpp).
///
/// `call`: the arguments KernelDispatch.h's runCompute passes to
/// `dispatch`, in order: `$operand` (its buffer, in the kernel's element
/// type or f32 by its rule; nullptr for an optional input left out), a dim
/// of the shape rules, a parameter (f32 ones as float, i64 ones as
/// int64_t; `double(name)` as stored), `null` (no buffer) or an integer.
/// Without one, runCompute runs the kernel by hand (adamw, copy...).
/// The same list is the kernel functions' signature: fsdp-tblgen
/// declares `dispatch` from it for both backends (KernelDecls.inc: outputs
/// as pointers, inputs as const pointers, dims as int64_t), so a kernel's
/// definition that differs does not link.
/// `boundByHand`: the backends bind `dispatch` themselves (it is not in
/// the X-macro lists).
class FSDP_Kernel<int opcode_, string enumerator_, string name_, dag ins_,
                  dag outs_, dag params_ = (params)> {
  int opcode = opcode_;
  string enumerator = enumerator_;
  string name = name_;
  dag ins = ins_;
  dag outs = outs_;
  dag kernelParams = params_;
  string dispatch = "";
  bit gemm = 0;
  bit byHand = 0;
  string notes = "";
  list<string> shapes = [];
  list<string> dimChecks = [];
  string derive = "";
  string extraCheck = "";
  string call = "";
  bit boundByHand = 0;
}

defvar KCollective = (params KI64:$stream, KI64:$token, KI64:$group,
                      KI64:$axis);
defvar KAdamW = (params KF32:$lr, KF32:$beta1, KF32:$beta2, KF32:$eps,
                 KF32:$weight_decay);
/// Attention's: the head counts and the sliding window (0: none).
defvar KAttention = (params KI64:$heads, KHeadsOr:$kv_heads, KI64:$window);
/// qk_norm_backward's: the head counts alone.
defvar KHeads = (params KI64:$heads, KHeadsOr:$kv_heads);
/// The dim checks of the kernels over rows R of width C, the GEMMs and
/// attention.
defvar KRowChecks = ["C > 0", "R <= INT"];
defvar KGemmChecks = ["OC > 0", "IC > 0", "OC <= INT", "IC <= INT",
                      "N <= INT"];
defvar KAttentionChecks = ["T > 0", "W > 0", "T <= INT", "W <= INT",
                           "B*H*T <= INT"];
defvar KVocabularyChecks = ["V > 0", "N <= INT", "V <= INT"];

def : FSDP_Kernel<0, "Embedding", "embedding",
    (ins KIds:$tokens, KFloats:$wte, KOptFloats:$wpe), (outs KResult:$result)> {
  let dispatch = "embeddingForward";
  let notes = "without wpe: the token embedding alone (Llama's)";
  let shapes = ["tokens: [B, T]", "wte: [V, C]", "wpe: [P, C]",
                "result: [B, T, C]"];
  let dimChecks = ["P >= T", "B*T <= INT"];
  let extraCheck = "noteTableRows";
  let call = "$result, $tokens, $wte, $wpe, B, T, C";
}
def : FSDP_Kernel<1, "EmbeddingBackward", "embedding_backward",
    (ins KFloats:$grad, KIds:$tokens),
    (outs KResult:$wte_grad, KResult:$wpe_grad)> {
  let dispatch = "embeddingBackward";
  let shapes = ["grad: [B, T, C]", "tokens: [B, T]", "wte_grad: [V, C]",
                "wpe_grad: [P, C]"];
  let dimChecks = ["P >= T", "B*T <= INT"];
  let call = "$wte_grad, $wpe_grad, $grad, $tokens, B, T, C, V, P";
}
def : FSDP_Kernel<2, "LayerNorm", "layer_norm",
    (ins KFloats:$input, KFloats:$weight, KFloats:$bias),
    (outs KResult:$result, KStatResult:$mean, KStatResult:$rstd),
    (params KF32:$epsilon)> {
  let dispatch = "layerNormForward";
  let shapes = ["input: [*R, C]", "weight: #C", "bias: #C", "result: [*R, C]",
                "mean: #R", "rstd: #R"];
  let dimChecks = KRowChecks;
  let call = "$result, $mean, $rstd, $input, $weight, $bias, R, C, epsilon";
}
def : FSDP_Kernel<3, "LayerNormBackward", "layer_norm_backward",
    (ins KFloats:$grad, KFloats:$input, KFloats:$weight, KStat:$mean,
         KStat:$rstd),
    (outs KResult:$input_grad, KResult:$weight_grad, KResult:$bias_grad)> {
  let dispatch = "layerNormBackward";
  let shapes = ["grad: [*R, C]", "input: [*R, C]", "weight: #C", "mean: #R",
                "rstd: #R", "input_grad: [*R, C]", "weight_grad: #C",
                "bias_grad: #C"];
  let dimChecks = KRowChecks;
  let call = "$input_grad, $weight_grad, $bias_grad, $grad, $input, $weight, "
              "$mean, $rstd, R, C";
}
def : FSDP_Kernel<4, "Linear", "linear",
    (ins KFloats:$input, KFloats:$weight, KOptFloats:$bias),
    (outs KResult:$result)> {
  let dispatch = "linearForward";
  let gemm = 1;
  let shapes = ["input: [*N, IC]", "weight: [OC, IC]", "bias: #OC",
                "result: [#N, OC]"];
  let dimChecks = KGemmChecks;
  let call = "$result, $input, $weight, $bias, N, IC, OC";
}
def : FSDP_Kernel<5, "LinearGradInput", "linear_grad_input",
    (ins KFloats:$grad, KFloats:$weight), (outs KResult:$result)> {
  let dispatch = "linearGradInput";
  let gemm = 1;
  let shapes = ["grad: [*N, OC]", "weight: [OC, IC]", "result: [#N, IC]"];
  let dimChecks = KGemmChecks;
  let call = "$result, $grad, $weight, N, IC, OC";
}
def : FSDP_Kernel<6, "LinearGradWeight", "linear_grad_weight",
    (ins KFloats:$grad, KFloats:$input), (outs KResult:$result)> {
  let dispatch = "linearGradWeight";
  let gemm = 1;
  let shapes = ["grad: [*N, OC]", "input: [#N, IC]", "result: [OC, IC]"];
  let dimChecks = KGemmChecks;
  let call = "$result, $grad, $input, N, IC, OC";
}
def : FSDP_Kernel<7, "BiasGrad", "bias_grad", (ins KFloats:$grad),
    (outs KResult:$result)> {
  let dispatch = "biasGrad";
  let shapes = ["grad: [*N, C]", "result: #C"];
  let dimChecks = ["C > 0"];
  let call = "$result, $grad, N, C";
}
def : FSDP_Kernel<8, "Add", "add", (ins KFloats:$lhs, KFloats:$rhs),
    (outs KResult:$result)> {
  let dispatch = "add";
  let shapes = ["lhs: [*S]", "rhs: [*S]", "result: [*S]"];
  let call = "$result, $lhs, $rhs, S";
}
def : FSDP_Kernel<9, "Gelu", "gelu", (ins KFloats:$input),
    (outs KResult:$result)> {
  let dispatch = "geluForward";
  let shapes = ["input: [*S]", "result: [*S]"];
  let call = "$result, $input, S";
}
def : FSDP_Kernel<10, "GeluBackward", "gelu_backward",
    (ins KFloats:$grad, KFloats:$input), (outs KResult:$result)> {
  let dispatch = "geluBackward";
  let shapes = ["grad: [*S]", "input: [*S]", "result: [*S]"];
  let call = "$result, $grad, $input, S";
}
def : FSDP_Kernel<11, "Relu", "relu", (ins KFloats:$input),
    (outs KResult:$result)> {
  let dispatch = "reluForward";
  let shapes = ["input: [*S]", "result: [*S]"];
  let call = "$result, $input, S";
}
def : FSDP_Kernel<12, "ReluBackward", "relu_backward",
    (ins KFloats:$grad, KFloats:$input), (outs KResult:$result)> {
  let dispatch = "reluBackward";
  let shapes = ["grad: [*S]", "input: [*S]", "result: [*S]"];
  let call = "$result, $grad, $input, S";
}
def : FSDP_Kernel<13, "Attention", "attention", (ins KFloats:$qkv),
    (outs KResult:$result, KResult:$probs), KAttention> {
  let dispatch = "attentionForward";
  let gemm = 1;
  let shapes = ["qkv: [B, T, W]", "result: [B, T, C]", "probs: [B, H, T, T]"];
  let dimChecks = KAttentionChecks;
  let derive = "AttentionHeads";
  let call = "$result, $probs, $qkv, B, T, C, heads, kv_heads, window";
}
def : FSDP_Kernel<14, "AttentionBackward", "attention_backward",
    (ins KFloats:$grad, KFloats:$qkv, KFloats:$probs),
    (outs KResult:$result, KScratch:$dprobs), KAttention> {
  let dispatch = "attentionBackward";
  let gemm = 1;
  let shapes = ["grad: [B, T, C]", "qkv: [B, T, W]", "probs: [B, H, T, T]",
                "result: [B, T, W]", "dprobs: #B*H*T*T"];
  let dimChecks = KAttentionChecks;
  let derive = "AttentionHeads";
  let call = "$result, $dprobs, $grad, $qkv, $probs, B, T, C, heads, kv_heads, "
              "window";
}
def : FSDP_Kernel<15, "AttentionBlocked", "attention_blocked",
    (ins KFloats:$qkv), (outs KResult:$result, KStatResult:$lse), KAttention> {
  let dispatch = "blockedAttentionForward";
  let gemm = 1;
  let notes = "without the T x T matrix: one log-sum-exp per row (B x H x T)";
  let shapes = ["qkv: [B, T, W]", "result: [B, T, C]", "lse: [B, H, T]"];
  let dimChecks = KAttentionChecks;
  let derive = "AttentionHeads";
  let call = "$result, $lse, $qkv, B, T, C, heads, kv_heads, window";
}
def : FSDP_Kernel<16, "AttentionBackwardBlocked", "attention_backward_blocked",
    (ins KFloats:$grad, KFloats:$qkv, KStat:$lse, KFloats:$output),
    (outs KResult:$result), KAttention> {
  let dispatch = "blockedAttentionBackward";
  let gemm = 1;
  let notes = "output: the forward's result";
  let shapes = ["grad: [B, T, C]", "qkv: [B, T, W]", "lse: [B, H, T]",
                "output: [B, T, C]", "result: [B, T, W]"];
  let dimChecks = KAttentionChecks;
  let derive = "AttentionHeads";
  let call = "$result, $grad, $qkv, $output, $lse, B, T, C, heads, kv_heads, "
              "window";
}
def : FSDP_Kernel<17, "CrossEntropy", "cross_entropy",
    (ins KFloats:$logits, KIds:$targets),
    (outs KStatResult:$loss, KStatScratch:$row_losses)> {
  let notes = "loss: the mean; row_losses: per-row losses, which the GPU "
              "reduces in a fixed order with many blocks";
  let shapes = ["logits: [*N, V]", "targets: #N", "loss: #1", "row_losses: #N"];
  let dimChecks = KVocabularyChecks;
  let extraCheck = "checkVocabulary";
  let dispatch = "crossEntropyForward";
  let boundByHand = 1;
  let call = "$loss, $logits, $targets, N, V, $row_losses";
}
def : FSDP_Kernel<18, "CrossEntropyBackward", "cross_entropy_backward",
    (ins KStat:$grad, KFloats:$logits, KIds:$targets),
    (outs KResult:$result)> {
  let dispatch = "crossEntropyBackward";
  let shapes = ["grad: #1", "logits: [*N, V]", "targets: #N",
                "result: [*N, V]"];
  let dimChecks = KVocabularyChecks;
  let extraCheck = "checkVocabulary";
  let call = "$result, $grad, $logits, $targets, N, V";
}
def : FSDP_Kernel<19, "AdamW", "adamw", (ins KStat:$grad),
    (outs KUpdated:$param, KUpdated:$m, KUpdated:$v), KAdamW> {
  let byHand = 1;
  let dispatch = "adamw";
  let shapes = ["grad: [*S]", "param: [*S]", "m: [*S]", "v: [*S]"];
  let extraCheck = "checkAdamWBuffers";
}
def : FSDP_Kernel<20, "Fill", "fill", (ins), (outs KResult:$result),
    (params KF32:$value)> {
  let dispatch = "fill";
  let shapes = ["result: #N"];
  let call = "$result, N, value";
}
def : FSDP_Kernel<21, "AllGather", "all_gather", (ins KAnyFloats:$shard),
    (outs KResult:$gathered), KCollective> {
  let byHand = 1;
  let notes = "the unit's local shard into its full flat parameter; a "
              "narrower gathered type (mixed precision) rounds the shard "
              "into its own slot first, which then moves in that type";
  let extraCheck = "checkSharded";
}
def : FSDP_Kernel<22, "ReduceScatter", "reduce_scatter", (ins KFloats:$grad),
    (outs KResult:$shard), KCollective> {
  let byHand = 1;
  let notes = "a full flat gradient into the local shard of its mean";
  let extraCheck = "checkSharded";
}
def : FSDP_Kernel<23, "AdamWShard", "adamw_shard",
    (ins KAnyFloats:$grad, KOptStat:$scale),
    (outs KUpdated:$param, KUpdated:$m, KUpdated:$v, KOptCopy:$copy),
    KAdamW> {
  let byHand = 1;
  let notes = "scale (since version 9): a scalar, gradient clipping's "
              "coefficient; AdamW on grad x scale. grad: f32, or bf16 "
              "(widened as it is read; not for a selection bias's unit). "
              "copy (since version 18): the unit's shard_copy buffer, bf16, "
              "which it rounds the updated shard into";
  let shapes = ["grad: [*S]", "param: [*S]", "m: [*S]", "v: [*S]",
                "copy: [*S]", "scale: #1"];
  let extraCheck = "checkShardUpdate";
}
def : FSDP_Kernel<24, "Copy", "copy", (ins KFloats:$source),
    (outs KResult:$result)> {
  let shapes = ["source: #N", "result: #N"];
  let extraCheck = "checkNoOverlap";
}

def : FSDP_Kernel<25, "RmsNorm", "rms_norm",
    (ins KFloats:$input, KFloats:$weight),
    (outs KResult:$result, KStatResult:$rstd), (params KF32:$epsilon)> {
  let dispatch = "rmsNormForward";
  let notes = "rstd: one per row (since version 8, as all of Llama's)";
  let shapes = ["input: [*R, C]", "weight: #C", "result: [*R, C]", "rstd: #R"];
  let dimChecks = KRowChecks;
  let call = "$result, $rstd, $input, $weight, R, C, epsilon";
}
def : FSDP_Kernel<26, "RmsNormBackward", "rms_norm_backward",
    (ins KFloats:$grad, KFloats:$input, KFloats:$weight, KStat:$rstd),
    (outs KResult:$input_grad, KResult:$weight_grad)> {
  let dispatch = "rmsNormBackward";
  let shapes = ["grad: [*R, C]", "input: [*R, C]", "weight: #C", "rstd: #R",
                "input_grad: [*R, C]", "weight_grad: #C"];
  let dimChecks = KRowChecks;
  let call = "$input_grad, $weight_grad, $grad, $input, $weight, $rstd, R, C";
}
def : FSDP_Kernel<27, "SwiGlu", "swiglu", (ins KFloats:$gate, KFloats:$up),
    (outs KResult:$result)> {
  let dispatch = "swigluForward";
  let shapes = ["gate: [*S]", "up: [*S]", "result: [*S]"];
  let call = "$result, $gate, $up, S";
}
def : FSDP_Kernel<28, "SwiGluBackward", "swiglu_backward",
    (ins KFloats:$grad, KFloats:$gate, KFloats:$up),
    (outs KResult:$gate_grad, KResult:$up_grad)> {
  let dispatch = "swigluBackward";
  let shapes = ["grad: [*S]", "gate: [*S]", "up: [*S]", "gate_grad: [*S]",
                "up_grad: [*S]"];
  let call = "$gate_grad, $up_grad, $grad, $gate, $up, S";
}
/// rope's parameters: the heads, theta and the frequencies' scaling
/// (since plan version 14; runtime/include/fsdp/runtime/RopeScaling.h).
defvar KRope = (params KI64:$heads, KHeadsOr:$kv_heads, KF32:$theta,
                KI64:$scaling, KF64:$factor, KF64:$low_freq_factor,
                KF64:$high_freq_factor, KI64:$original_max_positions,
                KF64:$attention_factor, KF64:$correction_low,
                KF64:$correction_high);
def : FSDP_Kernel<29, "Rope", "rope", (ins KFloats:$qkv),
    (outs KResult:$result), KRope> {
  let dispatch = "ropeForward";
  let notes = "qkv: B x T x (heads + 2 kv_heads) hs; q and k rotated, v "
              "copied; scaling (since version 14): 0 default, 1 linear, "
              "2 llama3, 3 yarn";
  let shapes = ["qkv: [B, T, W]", "result: [B, T, W]"];
  let derive = "RopeHeads";
  let call = "$result, $qkv, B, T, heads, kv_heads, hs, theta, scaling, "
             "factor, low_freq_factor, high_freq_factor, "
             "original_max_positions, attention_factor, correction_low, "
             "correction_high";
}
def : FSDP_Kernel<30, "RopeBackward", "rope_backward", (ins KFloats:$grad),
    (outs KResult:$result), KRope> {
  let dispatch = "ropeBackward";
  let notes = "the gradient rotated back";
  let shapes = ["grad: [B, T, W]", "result: [B, T, W]"];
  let derive = "RopeHeads";
  let call = "$result, $grad, B, T, heads, kv_heads, hs, theta, scaling, "
             "factor, low_freq_factor, high_freq_factor, "
             "original_max_positions, attention_factor, correction_low, "
             "correction_high";
}
def : FSDP_Kernel<31, "TokenEmbeddingBackward", "token_embedding_backward",
    (ins KFloats:$grad, KIds:$tokens), (outs KResult:$wte_grad)> {
  let shapes = ["grad: [B, T, C]", "tokens: [B, T]", "wte_grad: [V, C]"];
  let dimChecks = ["B*T <= INT"];
  let dispatch = "embeddingBackward";
  let call = "$wte_grad, null, $grad, $tokens, B, T, C, V, 0";
}

def : FSDP_Kernel<32, "Cast", "cast", (ins KAnyFloats:$source),
    (outs KAnyResult:$result)> {
  let notes = "element-wise, same shape; rounds to nearest even when "
              "narrower";
  let shapes = ["source: #N", "result: #N"];
  let extraCheck = "checkNoOverlap";
}
def : FSDP_Kernel<33, "Wait", "wait",
    (ins KAnyFloats:$source, KAnyFloats:$result), (outs),
    (params KI64:$token)> {
  let byHand = 1;
  let notes = "the started collective's buffers: read, so that their "
              "lifetimes reach the wait";
}
def : FSDP_Kernel<34, "GradSqSum", "grad_sq_sum",
    (ins KFloats:$grad, KOptStat:$acc),
    (outs KStatResult:$sum, KStatScratch:$partials), (params KI64:$flat_size)> {
  let notes = "sum: acc (the sum so far) + the squares, in double, of this "
              "rank's elements of a unit's gradient shard, floor(kP/N) .. "
              "floor((k+1)P/N) - 1 of the unit's flat_size P; partials: "
              "512 f32, one double per block of the GPU's reduction";
  let shapes = ["acc: #1", "sum: #1", "partials: #512"];
  let extraCheck = "checkGradSqSum";
}
def : FSDP_Kernel<35, "AllReduceSum", "all_reduce_sum", (ins KStat:$value),
    (outs KStatResult:$sum), (params KI64:$axis)> {
  let byHand = 1;
  let notes = "a scalar summed over the shard group's ranks, synchronous; "
              "axis since version 12";
  let shapes = ["value: #1", "sum: #1"];
  let extraCheck = "checkReduceAxis";
}
def : FSDP_Kernel<36, "ClipCoefficient", "clip_coefficient",
    (ins KStat:$sum_sq), (outs KStatResult:$coefficient),
    (params KF32:$max_norm)> {
  let dispatch = "clipCoefficient";
  let notes = "min(1, max_norm / (sqrt(sum_sq) + 1e-6)), PyTorch's "
              "clip_grad_norm_";
  let shapes = ["sum_sq: #1", "coefficient: #1"];
  let extraCheck = "checkMaxNorm";
  let call = "$coefficient, $sum_sq, double(max_norm)";
}
def : FSDP_Kernel<37, "AllReduceMean", "all_reduce_mean", (ins KFloats:$shard),
    (outs KResult:$result), KCollective> {
  let byHand = 1;
  let notes = "hybrid sharding (since version 12): a unit's gradient shard "
              "averaged in place over the replica group; result is the "
              "shard's buffer";
  let extraCheck = "checkSharded";
}

def : FSDP_Kernel<38, "QkNorm", "qk_norm",
    (ins KFloats:$qkv, KFloats:$q_weight, KFloats:$k_weight),
    (outs KResult:$result, KStatResult:$rstd),
    (params KI64:$heads, KHeadsOr:$kv_heads, KF32:$epsilon)> {
  let dispatch = "qkNormForward";
  let notes = "Qwen3's q_norm and k_norm (since version 14): RMSNorm over "
              "each q and k head of qkv (B x T x (heads + 2 kv_heads) hs), "
              "v copied; rstd: one per q and k head of each row";
  let shapes = ["qkv: [B, T, W]", "q_weight: #hs", "k_weight: #hs",
                "result: [B, T, W]", "rstd: [B, T, QK]"];
  let dimChecks = ["B*T*QK <= INT"];
  let derive = "QkNormHeads";
  let call = "$result, $rstd, $qkv, $q_weight, $k_weight, B, T, heads, "
             "kv_heads, hs, epsilon";
}
def : FSDP_Kernel<39, "QkNormBackward", "qk_norm_backward",
    (ins KFloats:$grad, KFloats:$qkv, KFloats:$q_weight, KFloats:$k_weight,
         KStat:$rstd),
    (outs KResult:$qkv_grad, KResult:$q_weight_grad, KResult:$k_weight_grad),
    KHeads> {
  let dispatch = "qkNormBackward";
  let notes = "the values' gradient passed through";
  let shapes = ["grad: [B, T, W]", "qkv: [B, T, W]", "q_weight: #hs",
                "k_weight: #hs", "rstd: [B, T, QK]", "qkv_grad: [B, T, W]",
                "q_weight_grad: #hs", "k_weight_grad: #hs"];
  let dimChecks = ["B*T*QK <= INT"];
  let derive = "QkNormHeads";
  let call = "$qkv_grad, $q_weight_grad, $k_weight_grad, $grad, $qkv, "
             "$q_weight, $k_weight, $rstd, B, T, heads, kv_heads, hs";
}

// Mixture of experts (docs/moe.md; the ops in FSDPMoeOps.td). R tokens,
// K choices a token, E experts, P = R K pairs, E1 = E + 1 offsets.

/// The router's kind: scoring 0 softmax, 1 sigmoid; normalize 0 or 1.
defvar KMoeRouter = (params KI64:$scoring, KI64:$normalize, KF64:$scale);
defvar KMoeGemmChecks = ["O > 0", "I > 0", "P <= INT", "O <= INT",
                         "I <= INT"];
def : FSDP_Kernel<40, "MoeRouter", "moe_router",
    (ins KStat:$logits, KOptStat:$bias),
    (outs KStatResult:$weights, KIndexResult:$experts), KMoeRouter> {
  let dispatch = "moeRouterForward";
  let notes = "each row's K chosen experts (decreasing score, ties to the "
              "lower index) and their weights";
  let shapes = ["logits: [*R, E]", "bias: #E", "weights: [*R, K]",
                "experts: [*R, K]"];
  let dimChecks = ["K > 0", "E >= K", "64 >= K", "R <= INT", "E <= INT"];
  let derive = "MoeRouter";
  let call = "$weights, $experts, $logits, $bias, R, E, K, scoring, "
             "normalize, double(scale)";
}
def : FSDP_Kernel<41, "MoeRouterBackward", "moe_router_backward",
    (ins KStat:$grad, KStat:$logits, KIndices:$experts),
    (outs KStatResult:$result), KMoeRouter> {
  let dispatch = "moeRouterBackward";
  let notes = "zero for the experts not chosen";
  let shapes = ["grad: [*R, K]", "logits: [*R, E]", "experts: [*R, K]",
                "result: [*R, E]"];
  let dimChecks = ["K > 0", "E >= K", "64 >= K", "R <= INT", "E <= INT"];
  let derive = "MoeRouter";
  let call = "$result, $grad, $logits, $experts, R, E, K, scoring, "
             "normalize, double(scale)";
}
def : FSDP_Kernel<42, "MoeSort", "moe_sort", (ins KIndices:$experts),
    (outs KIndexResult:$order, KIndexResult:$position,
          KIndexResult:$offsets), (params KI64:$num_experts)> {
  let dispatch = "moeSort";
  let notes = "a stable counting sort of the pairs by expert";
  let shapes = ["experts: [*R, K]", "order: [*R, K]", "position: [*R, K]",
                "offsets: [E1]"];
  let dimChecks = ["P <= INT"];
  let derive = "MoeSort";
  let call = "$order, $position, $offsets, $experts, R, K, E";
}
def : FSDP_Kernel<43, "MoePermute", "moe_permute",
    (ins KFloats:$input, KIndices:$order), (outs KResult:$result)> {
  let dispatch = "moePermute";
  let shapes = ["input: [*R, C]", "order: [*R, K]", "result: [P, C]"];
  let dimChecks = ["C > 0", "P <= INT"];
  let derive = "MoeRows";
  let call = "$result, $input, $order, R, K, C";
}
def : FSDP_Kernel<44, "MoePermuteBackward", "moe_permute_backward",
    (ins KFloats:$grad, KIndices:$position), (outs KResult:$result)> {
  let dispatch = "moePermuteBackward";
  let notes = "each token's K rows summed in choice order";
  let shapes = ["grad: [P, C]", "position: [*R, K]", "result: [*R, C]"];
  let dimChecks = ["C > 0", "P <= INT"];
  let derive = "MoeRows";
  let call = "$result, $grad, $position, R, K, C";
}
def : FSDP_Kernel<45, "MoeGroupedLinear", "moe_grouped_linear",
    (ins KFloats:$input, KFloats:$weight, KIndices:$offsets),
    (outs KResult:$result)> {
  let dispatch = "moeGroupedLinear";
  let gemm = 1;
  let notes = "expert e's rows offsets[e] .. offsets[e + 1] - 1 times "
              "weight[e]^T";
  let shapes = ["input: [P, I]", "weight: [E, O, I]", "offsets: [E1]",
                "result: [P, O]"];
  let dimChecks = KMoeGemmChecks;
  let derive = "MoeRows";
  let call = "$result, $input, $weight, $offsets, E, P, I, O";
}
def : FSDP_Kernel<46, "MoeGroupedLinearGradInput",
    "moe_grouped_linear_grad_input",
    (ins KFloats:$grad, KFloats:$weight, KIndices:$offsets),
    (outs KResult:$result)> {
  let dispatch = "moeGroupedLinearGradInput";
  let gemm = 1;
  let shapes = ["grad: [P, O]", "weight: [E, O, I]", "offsets: [E1]",
                "result: [P, I]"];
  let dimChecks = KMoeGemmChecks;
  let derive = "MoeRows";
  let call = "$result, $grad, $weight, $offsets, E, P, I, O";
}
def : FSDP_Kernel<47, "MoeGroupedLinearGradWeight",
    "moe_grouped_linear_grad_weight",
    (ins KFloats:$grad, KFloats:$input, KIndices:$offsets),
    (outs KResult:$result)> {
  let dispatch = "moeGroupedLinearGradWeight";
  let gemm = 1;
  let notes = "zero for an expert no pair chose";
  let shapes = ["grad: [P, O]", "input: [P, I]", "offsets: [E1]",
                "result: [E, O, I]"];
  let dimChecks = KMoeGemmChecks;
  let derive = "MoeRows";
  let call = "$result, $grad, $input, $offsets, E, P, I, O";
}
def : FSDP_Kernel<48, "MoeCombine", "moe_combine",
    (ins KFloats:$rows, KStat:$weights, KIndices:$position),
    (outs KResult:$result)> {
  let dispatch = "moeCombine";
  let notes = "a token's rows weighted and summed in choice order, in f32";
  let shapes = ["rows: [P, C]", "weights: [*R, K]", "position: [*R, K]",
                "result: [*R, C]"];
  let dimChecks = ["C > 0", "P <= INT"];
  let derive = "MoeRows";
  let call = "$result, $rows, $weights, $position, R, K, C";
}
def : FSDP_Kernel<49, "MoeCombineBackward", "moe_combine_backward",
    (ins KFloats:$grad, KFloats:$rows, KStat:$weights, KIndices:$position),
    (outs KResult:$rows_grad, KStatResult:$weights_grad)> {
  let dispatch = "moeCombineBackward";
  let shapes = ["grad: [*R, C]", "rows: [P, C]", "weights: [*R, K]",
                "position: [*R, K]", "rows_grad: [P, C]",
                "weights_grad: [*R, K]"];
  let dimChecks = ["C > 0", "P <= INT"];
  let derive = "MoeRows";
  let call = "$rows_grad, $weights_grad, $grad, $rows, $weights, $position, "
             "R, K, C";
}

def : FSDP_Kernel<50, "MoeAuxStats", "moe_aux_stats",
    (ins KStat:$logits, KIndices:$experts, KOptStat:$sum),
    (outs KStatResult:$result, KStatScratch:$rows)> {
  let dispatch = "moeAuxStatsForward";
  let notes = "result: row 0 each expert's summed softmax probability, row "
              "1 its pair count, plus sum (the earlier layers'); rows: each "
              "row's max and reciprocal sum";
  let shapes = ["logits: [*R, E]", "experts: [*R, K]", "sum: [2, E]",
                "result: [2, E]", "rows: #2*R"];
  let dimChecks = ["E > 0", "R*E <= INT"];
  let call = "$result, $logits, $experts, $sum, R, E, K, $rows";
}
def : FSDP_Kernel<51, "MoeAuxStatsBackward", "moe_aux_stats_backward",
    (ins KStat:$grad, KStat:$logits), (outs KStatResult:$result)> {
  let dispatch = "moeAuxStatsBackward";
  let notes = "through each row's softmax from grad's row 0";
  let shapes = ["grad: [2, E]", "logits: [*R, E]", "result: [*R, E]"];
  let dimChecks = ["E > 0", "R*E <= INT"];
  let call = "$result, $grad, $logits, R, E";
}
/// The auxiliary loss's: the experts a token chooses and the weight.
defvar KMoeAuxLoss = (params KI64:$top_k, KF64:$coef);
def : FSDP_Kernel<52, "MoeAuxLoss", "moe_aux_loss",
    (ins KStat:$stats, KStat:$loss), (outs KStatResult:$result),
    KMoeAuxLoss> {
  let dispatch = "moeAuxLossForward";
  let notes = "loss + coef E sum_e F_e P_e over the layers' summed stats "
              "(transformers' load_balancing_loss_func)";
  let shapes = ["stats: [2, E]", "loss: #1", "result: #1"];
  let derive = "MoeAuxLoss";
  let call = "$result, $stats, $loss, E, top_k, double(coef)";
}
def : FSDP_Kernel<53, "MoeAuxLossBackward", "moe_aux_loss_backward",
    (ins KStat:$grad, KStat:$stats), (outs KStatResult:$result),
    KMoeAuxLoss> {
  let dispatch = "moeAuxLossGrad";
  let notes = "the stats' gradient: row 0 grad coef E F_e / rows, row 1 zero";
  let shapes = ["grad: #1", "stats: [2, E]", "result: [2, E]"];
  let derive = "MoeAuxLoss";
  let call = "$result, $grad, $stats, E, top_k, double(coef)";
}
def : FSDP_Kernel<54, "MoeBiasSignal", "moe_bias_signal",
    (ins KIndices:$experts), (outs KResult:$result)> {
  let dispatch = "moeBiasSignal";
  let notes = "a selection bias's load signal: each expert's pairs above "
              "the mean R K / E";
  let shapes = ["experts: [*R, K]", "result: [E]"];
  let dimChecks = ["E > 0", "R*K <= INT"];
  let call = "$result, $experts, R, K, E";
}

// Expert parallelism (FSDPExpertOps.td): G the expert group's ranks, L the
// experts each holds. Counts are G x L matrices of i32.
def : FSDP_Kernel<55, "MoeExpertCounts", "moe_expert_counts",
    (ins KIndices:$offsets), (outs KIndexResult:$counts)> {
  let dispatch = "moeExpertCounts";
  let notes = "counts[g, l]: the sort's rows for expert g L + l";
  let shapes = ["offsets: [E1]", "counts: [G, L]"];
  let dimChecks = ["G > 0", "L > 0", "E1 <= INT"];
  let derive = "MoeGroups";
  let call = "$counts, $offsets, G, L";
}
def : FSDP_Kernel<56, "AllToAllCounts", "all_to_all_counts",
    (ins KIndices:$counts), (outs KIndexResult:$recv), (params KI64:$axis)> {
  let byHand = 1;
  let notes = "row d of counts to the group's rank d; rank s's row g into "
              "row s of recv";
  let shapes = ["counts: [G, L]", "recv: [G, L]"];
  let dimChecks = ["G > 0", "L > 0"];
}
def : FSDP_Kernel<57, "AllToAll", "all_to_all",
    (ins KFloats:$input, KIndices:$send, KIndices:$recv),
    (outs KResult:$result), KCollective> {
  let byHand = 1;
  let notes = "rows to the group's ranks by send's row sums, from them by "
              "recv's into rank order; rows past those received are zero; "
              "counts over input's rows or result's stop the step; started "
              "(stream 4) it reads its counts at the start";
  let shapes = ["input: [N, C]", "send: [G, L]", "recv: [G, L]",
                "result: [M, C]"];
  let dimChecks = ["C > 0", "N <= INT", "M <= INT"];
}
def : FSDP_Kernel<58, "MoeRegroup", "moe_regroup",
    (ins KFloats:$input, KIndices:$counts), (outs KResult:$result),
    (params KI64:$inverse)> {
  let dispatch = "moeRegroup";
  let notes = "runs (s, l) of counts[s, l] rows into the order (l, s); "
              "inverse 1: back; rows past the counts' sum are zero";
  let shapes = ["input: [M, C]", "counts: [G, L]", "result: [M, C]"];
  let dimChecks = ["C > 0", "M <= INT"];
  let call = "$result, $input, $counts, G, L, M, C, inverse";
}
def : FSDP_Kernel<59, "MoeLocalOffsets", "moe_local_offsets",
    (ins KIndices:$counts), (outs KIndexResult:$offsets)> {
  let dispatch = "moeLocalOffsets";
  let notes = "offsets[l]: the rows of local experts before l, over every "
              "rank";
  let shapes = ["counts: [G, L]", "offsets: [L1]"];
  let dimChecks = ["G > 0", "L > 0"];
  let derive = "MoeGroups";
  let call = "$offsets, $counts, G, L";
}
def : FSDP_Kernel<60, "MoeCapacityTrim", "moe_capacity_trim",
    (ins KIndices:$recv), (outs KIndexResult:$kept, KIndexResult:$dropped),
    (params KI64:$capacity)> {
  let dispatch = "moeCapacityTrim";
  let notes = "recv within capacity rows: runs kept in the order (l, s) "
              "while room is left, each cut to what fits; dropped[0] the "
              "rows cut";
  let shapes = ["recv: [G, L]", "kept: [G, L]", "dropped: [1]"];
  let dimChecks = ["G > 0", "L > 0"];
  let call = "$kept, $dropped, $recv, G, L, capacity";
}
def : FSDP_Kernel<61, "MoeCompact", "moe_compact",
    (ins KFloats:$input, KIndices:$counts, KIndices:$kept),
    (outs KResult:$result), (params KI64:$inverse)> {
  let dispatch = "moeCompact";
  let notes = "of each run (g, l) of counts[g, l] rows, the first kept[g, "
              "l], packed in run order; the rest zero; inverse 1: back, "
              "the cut rows zero";
  let shapes = ["input: [P, C]", "counts: [G, L]", "kept: [G, L]",
                "result: [P, C]"];
  let dimChecks = ["C > 0", "P <= INT"];
  let call = "$result, $input, $counts, $kept, G, L, P, C, inverse";
}

#endif // FSDP_KERNELS_TD
