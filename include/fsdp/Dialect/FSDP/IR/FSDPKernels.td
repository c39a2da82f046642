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
def KStat : FSDP_KernelOperand<"F32", "Input">;
def KOptStat : FSDP_KernelOperand<"F32", "Input", 1>;
def KAnyFloats : FSDP_KernelOperand<"AnyFloat", "Input">;
def KResult : FSDP_KernelOperand<"Float", "Result">;
def KStatResult : FSDP_KernelOperand<"F32", "Result">;
def KAnyResult : FSDP_KernelOperand<"AnyFloat", "Result">;
def KScratch : FSDP_KernelOperand<"Float", "Scratch">;
def KStatScratch : FSDP_KernelOperand<"F32", "Scratch">;
def KUpdated : FSDP_KernelOperand<"F32", "Updated">;

/// A numeric parameter (stored as a double). `type` is the attribute the
/// lowering builds for a default (f32 or i64). `sameAs` names the
/// parameter whose value it takes when the IR leaves it out (kv_heads:
/// heads); a default value comes from the op's DefaultValuedAttr.
class FSDP_KernelParam<string type_, string sameAs_ = ""> {
  string type = type_;
  string sameAs = sameAs_;
}
def KF32 : FSDP_KernelParam<"f32">;
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
}

defvar KCollective = (params KI64:$stream, KI64:$token, KI64:$group,
                      KI64:$axis);
defvar KAdamW = (params KF32:$lr, KF32:$beta1, KF32:$beta2, KF32:$eps,
                 KF32:$weight_decay);
defvar KHeads = (params KI64:$heads, KHeadsOr:$kv_heads);

def : FSDP_Kernel<0, "Embedding", "embedding",
    (ins KIds:$tokens, KFloats:$wte, KOptFloats:$wpe), (outs KResult:$result)> {
  let dispatch = "embeddingForward";
  let notes = "without wpe: the token embedding alone (Llama's)";
}
def : FSDP_Kernel<1, "EmbeddingBackward", "embedding_backward",
    (ins KFloats:$grad, KIds:$tokens),
    (outs KResult:$wte_grad, KResult:$wpe_grad)> {
  let dispatch = "embeddingBackward";
}
def : FSDP_Kernel<2, "LayerNorm", "layer_norm",
    (ins KFloats:$input, KFloats:$weight, KFloats:$bias),
    (outs KResult:$result, KStatResult:$mean, KStatResult:$rstd),
    (params KF32:$epsilon)> {
  let dispatch = "layerNormForward";
}
def : FSDP_Kernel<3, "LayerNormBackward", "layer_norm_backward",
    (ins KFloats:$grad, KFloats:$input, KFloats:$weight, KStat:$mean,
         KStat:$rstd),
    (outs KResult:$input_grad, KResult:$weight_grad, KResult:$bias_grad)> {
  let dispatch = "layerNormBackward";
}
def : FSDP_Kernel<4, "Linear", "linear",
    (ins KFloats:$input, KFloats:$weight, KOptFloats:$bias),
    (outs KResult:$result)> {
  let dispatch = "linearForward";
  let gemm = 1;
}
def : FSDP_Kernel<5, "LinearGradInput", "linear_grad_input",
    (ins KFloats:$grad, KFloats:$weight), (outs KResult:$result)> {
  let dispatch = "linearGradInput";
  let gemm = 1;
}
def : FSDP_Kernel<6, "LinearGradWeight", "linear_grad_weight",
    (ins KFloats:$grad, KFloats:$input), (outs KResult:$result)> {
  let dispatch = "linearGradWeight";
  let gemm = 1;
}
def : FSDP_Kernel<7, "BiasGrad", "bias_grad", (ins KFloats:$grad),
    (outs KResult:$result)> {
  let dispatch = "biasGrad";
}
def : FSDP_Kernel<8, "Add", "add", (ins KFloats:$lhs, KFloats:$rhs),
    (outs KResult:$result)> {
  let dispatch = "add";
}
def : FSDP_Kernel<9, "Gelu", "gelu", (ins KFloats:$input),
    (outs KResult:$result)> {
  let dispatch = "geluForward";
}
def : FSDP_Kernel<10, "GeluBackward", "gelu_backward",
    (ins KFloats:$grad, KFloats:$input), (outs KResult:$result)> {
  let dispatch = "geluBackward";
}
def : FSDP_Kernel<11, "Relu", "relu", (ins KFloats:$input),
    (outs KResult:$result)> {
  let dispatch = "reluForward";
}
def : FSDP_Kernel<12, "ReluBackward", "relu_backward",
    (ins KFloats:$grad, KFloats:$input), (outs KResult:$result)> {
  let dispatch = "reluBackward";
}
def : FSDP_Kernel<13, "Attention", "attention", (ins KFloats:$qkv),
    (outs KResult:$result, KResult:$probs), KHeads> {
  let dispatch = "attentionForward";
  let gemm = 1;
}
def : FSDP_Kernel<14, "AttentionBackward", "attention_backward",
    (ins KFloats:$grad, KFloats:$qkv, KFloats:$probs),
    (outs KResult:$result, KScratch:$dprobs), KHeads> {
  let dispatch = "attentionBackward";
  let gemm = 1;
}
def : FSDP_Kernel<15, "AttentionBlocked", "attention_blocked",
    (ins KFloats:$qkv), (outs KResult:$result, KStatResult:$lse), KHeads> {
  let dispatch = "blockedAttentionForward";
  let gemm = 1;
  let notes = "without the T x T matrix: one log-sum-exp per row (B x H x T)";
}
def : FSDP_Kernel<16, "AttentionBackwardBlocked", "attention_backward_blocked",
    (ins KFloats:$grad, KFloats:$qkv, KStat:$lse, KFloats:$output),
    (outs KResult:$result), KHeads> {
  let dispatch = "blockedAttentionBackward";
  let gemm = 1;
  let notes = "output: the forward's result";
}
def : FSDP_Kernel<17, "CrossEntropy", "cross_entropy",
    (ins KFloats:$logits, KIds:$targets),
    (outs KStatResult:$loss, KStatScratch:$row_losses)> {
  let notes = "loss: the mean; row_losses: per-row losses, which the GPU "
              "reduces in a fixed order with many blocks";
}
def : FSDP_Kernel<18, "CrossEntropyBackward", "cross_entropy_backward",
    (ins KStat:$grad, KFloats:$logits, KIds:$targets),
    (outs KResult:$result)> {
  let dispatch = "crossEntropyBackward";
}
def : FSDP_Kernel<19, "AdamW", "adamw", (ins KStat:$grad),
    (outs KUpdated:$param, KUpdated:$m, KUpdated:$v), KAdamW> {
  let byHand = 1;
  let dispatch = "adamw";
}
def : FSDP_Kernel<20, "Fill", "fill", (ins), (outs KResult:$result),
    (params KF32:$value)> {
  let dispatch = "fill";
}
def : FSDP_Kernel<21, "AllGather", "all_gather", (ins KAnyFloats:$shard),
    (outs KResult:$gathered), KCollective> {
  let byHand = 1;
  let notes = "the unit's local shard into its full flat parameter; a "
              "narrower gathered type (mixed precision) rounds the shard "
              "into its own slot first, which then moves in that type";
}
def : FSDP_Kernel<22, "ReduceScatter", "reduce_scatter", (ins KFloats:$grad),
    (outs KResult:$shard), KCollective> {
  let byHand = 1;
  let notes = "a full flat gradient into the local shard of its mean";
}
def : FSDP_Kernel<23, "AdamWShard", "adamw_shard",
    (ins KStat:$grad, KOptStat:$scale),
    (outs KUpdated:$param, KUpdated:$m, KUpdated:$v), KAdamW> {
  let byHand = 1;
  let notes = "scale (since version 9): a scalar, gradient clipping's "
              "coefficient; AdamW on grad x scale";
}
def : FSDP_Kernel<24, "Copy", "copy", (ins KFloats:$source),
    (outs KResult:$result)>;
def : FSDP_Kernel<25, "RmsNorm", "rms_norm",
    (ins KFloats:$input, KFloats:$weight),
    (outs KResult:$result, KStatResult:$rstd), (params KF32:$epsilon)> {
  let dispatch = "rmsNormForward";
  let notes = "rstd: one per row (since version 8, as all of Llama's)";
}
def : FSDP_Kernel<26, "RmsNormBackward", "rms_norm_backward",
    (ins KFloats:$grad, KFloats:$input, KFloats:$weight, KStat:$rstd),
    (outs KResult:$input_grad, KResult:$weight_grad)> {
  let dispatch = "rmsNormBackward";
}
def : FSDP_Kernel<27, "SwiGlu", "swiglu", (ins KFloats:$gate, KFloats:$up),
    (outs KResult:$result)> {
  let dispatch = "swigluForward";
}
def : FSDP_Kernel<28, "SwiGluBackward", "swiglu_backward",
    (ins KFloats:$grad, KFloats:$gate, KFloats:$up),
    (outs KResult:$gate_grad, KResult:$up_grad)> {
  let dispatch = "swigluBackward";
}
def : FSDP_Kernel<29, "Rope", "rope", (ins KFloats:$qkv),
    (outs KResult:$result),
    (params KI64:$heads, KHeadsOr:$kv_heads, KF32:$theta)> {
  let dispatch = "ropeForward";
  let notes = "qkv: B x T x (heads + 2 kv_heads) hs; q and k rotated, v "
              "copied";
}
def : FSDP_Kernel<30, "RopeBackward", "rope_backward", (ins KFloats:$grad),
    (outs KResult:$result),
    (params KI64:$heads, KHeadsOr:$kv_heads, KF32:$theta)> {
  let dispatch = "ropeBackward";
  let notes = "the gradient rotated back";
}
def : FSDP_Kernel<31, "TokenEmbeddingBackward", "token_embedding_backward",
    (ins KFloats:$grad, KIds:$tokens), (outs KResult:$wte_grad)>;
def : FSDP_Kernel<32, "Cast", "cast", (ins KAnyFloats:$source),
    (outs KAnyResult:$result)> {
  let notes = "element-wise, same shape; rounds to nearest even when "
              "narrower";
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
}
def : FSDP_Kernel<35, "AllReduceSum", "all_reduce_sum", (ins KStat:$value),
    (outs KStatResult:$sum), (params KI64:$axis)> {
  let byHand = 1;
  let notes = "a scalar summed over the shard group's ranks, synchronous; "
              "axis since version 12";
}
def : FSDP_Kernel<36, "ClipCoefficient", "clip_coefficient",
    (ins KStat:$sum_sq), (outs KStatResult:$coefficient),
    (params KF32:$max_norm)> {
  let dispatch = "clipCoefficient";
  let notes = "min(1, max_norm / (sqrt(sum_sq) + 1e-6)), PyTorch's "
              "clip_grad_norm_";
}
def : FSDP_Kernel<37, "AllReduceMean", "all_reduce_mean", (ins KFloats:$shard),
    (outs KResult:$result), KCollective> {
  let byHand = 1;
  let notes = "hybrid sharding (since version 12): a unit's gradient shard "
              "averaged in place over the replica group; result is the "
              "shard's buffer";
}

#endif // FSDP_KERNELS_TD
