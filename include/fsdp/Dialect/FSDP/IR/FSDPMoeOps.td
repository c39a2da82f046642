//===- FSDPMoeOps.td - mixture-of-experts ops --------------*- tablegen -*-===//
//
// The ops of a mixture-of-experts block (docs/moe.md): the router, the sort
// of its (token, choice) pairs by expert, the rows permuted into expert
// order, the grouped linear over ragged per-expert rows, and the weighted
// combine back into token order, with their backward ops. Included by
// FSDPOps.td. Notation: R the tokens (the leading dims), K the experts a
// token chooses, E the experts, P = R K the pairs.
//
//===----------------------------------------------------------------------===//

#ifndef FSDP_MOE_OPS_TD
#define FSDP_MOE_OPS_TD

/// The router's kind and options, shared by the forward and the backward.
defvar FSDP_MoeRouterArgs = (ins
    DefaultValuedAttr<FSDP_MoeScoringAttr,
                      "::mlir::fsdp::MoeScoring::Softmax">:$scoring,
    DefaultValuedAttr<BoolAttr, "true">:$normalize,
    DefaultValuedAttr<F64Attr, "1.0">:$scale);

def FSDP_MoeRouterOp : FSDP_DiffOp<"moe_router", "MoeRouter"> {
  let summary = "a mixture-of-experts router: each token's top-k experts "
                "and their weights";
  let description = [{
    From router logits `... x E` (f32: the router computes in f32, as
    transformers does), each row's `K` chosen experts (`experts`, i32, in
    decreasing score order, ties to the lower index) and their weights
    (`weights`, f32), both `... x K`: `K` is the results' last dim.

    * `softmax` (Mixtral, Qwen3-MoE): the top K of the logits; the weights
      are the softmax over the chosen logits when `normalize` (Mixtral;
      Qwen3-MoE's `norm_topk_prob`), else the softmax probabilities over
      all E.
    * `sigmoid` (DeepSeek-V3): the top K of `sigmoid(z) + bias` (`bias`,
      `E`, optional, f32: chooses, never weighs); the weights are the
      chosen sigmoids, divided by their sum when `normalize`.

    Both are then multiplied by `scale` (DeepSeek-V3's
    `routed_scaling_factor`). The choice has no gradient; the weights'
    gradient reaches the logits (`fsdp.moe_router_backward`).

    ```mlir
    %w, %e = fsdp.moe_router %logits {scoring = #fsdp.moe_scoring<softmax>}
        : (tensor<2x4x8xf32>) -> (tensor<2x4x2xf32>, tensor<2x4x2xi32>)
    ```
  }];
  let arguments = !con((ins FSDP_FloatTensor:$logits,
                            Optional<FSDP_FloatTensor>:$bias),
                       FSDP_MoeRouterArgs);
  let results = (outs FSDP_FloatTensor:$weights, FSDP_IndexTensor:$experts);
}

def FSDP_MoeSortOp : FSDP_KernelOp<"moe_sort", "MoeSort", [Pure]> {
  let summary = "the (token, choice) pairs sorted by expert, stably";
  let description = [{
    From a router's `experts` (`... x K`, i32), the pairs `t K + j` in
    expert order, then pair order: `order` lists them, `position` is its
    inverse (where each pair landed), both `... x K`, and `offsets`
    (`num_experts + 1`) is where each expert's run starts (the last is
    the pair count). Integers only: no gradient.

    ```mlir
    %order, %position, %offsets = fsdp.moe_sort %e {num_experts = 8}
        : (tensor<2x4x2xi32>) -> (tensor<2x4x2xi32>, tensor<2x4x2xi32>, tensor<9xi32>)
    ```
  }];
  let arguments = (ins FSDP_IndexTensor:$experts, I64Attr:$num_experts);
  let results = (outs FSDP_IndexTensor:$order, FSDP_IndexTensor:$position,
                      FSDP_IndexTensor:$offsets);
  let assemblyFormat =
      "operands attr-dict `:` functional-type(operands, results)";
}

def FSDP_MoePermuteOp : FSDP_DiffOp<"moe_permute", "MoePermute"> {
  let summary = "the tokens' rows in expert order (one per pair)";
  let description = [{
    `result[i] = input[order[i] / K]`: `input` is `... x C` (R rows),
    `order` a sort's (`... x K`), the result `P x C` with `P = R K`. Its
    backward (`fsdp.moe_permute_backward`) sums each token's K rows in
    choice order, reading the sort's `position`: `order` must come from
    an `fsdp.moe_sort` to be differentiated.
  }];
  let arguments = (ins FSDP_FloatTensor:$input, FSDP_IndexTensor:$order);
  let results = (outs FSDP_FloatTensor:$result);
}

def FSDP_MoeGroupedLinearOp :
    FSDP_DiffOp<"moe_grouped_linear", "MoeGroupedLinear", [], ["getFlops"]> {
  let summary = "one linear per expert over its rows (ragged sizes)";
  let description = [{
    Rows `offsets[e] .. offsets[e + 1] - 1` of `input` (`P x I`, in expert
    order) times expert `e`'s `weight[e]^T` (`weight` is `E x O x I`, each
    expert's matrix as nn.Linear holds it): the result is `P x O`. An
    expert no pair chose computes nothing. `offsets` is a sort's.

    ```mlir
    %h = fsdp.moe_grouped_linear %xs, %w1, %offsets
        : (tensor<16x8xf32>, tensor<8x32x8xf32>, tensor<9xi32>) -> tensor<16x32xf32>
    ```
  }];
  let arguments = (ins FSDP_FloatTensor:$input, FSDP_FloatTensor:$weight,
                       FSDP_IndexTensor:$offsets);
  let results = (outs FSDP_FloatTensor:$result);
}

def FSDP_MoeCombineOp : FSDP_DiffOp<"moe_combine", "MoeCombine"> {
  let summary = "each token's expert rows, weighted and summed in choice "
                "order";
  let description = [{
    `result[t] = sum over j of weights[t, j] * rows[position[t K + j]]`,
    summed in f32 in choice order j (the same sum however the pairs were
    grouped): `rows` is `P x C` in expert order, `weights` a router's
    (`... x K`, f32), `position` a sort's; the result is `... x C`.
  }];
  let arguments = (ins FSDP_FloatTensor:$rows, FSDP_FloatTensor:$weights,
                       FSDP_IndexTensor:$position);
  let results = (outs FSDP_FloatTensor:$result);
}

def FSDP_MoeAuxStatsOp :
    FSDP_DiffOp<"moe_aux_stats", "MoeAuxStats", [], ["getKernelScratch"]> {
  let summary = "one layer's load-balancing statistics, added to the "
                "earlier layers'";
  let description = [{
    From a layer's router logits (`... x E`, f32) and choices: row 0 of the
    result (`2 x E`, f32) is each expert's softmax probability summed over
    the rows, row 1 the number of (token, choice) pairs that chose it; plus
    `sum`, the same of the earlier layers, when given. Chained over the
    layers, the last one holds what transformers' `load_balancing_loss_func`
    takes from the layers' concatenated logits (`fsdp.moe_aux_loss`). The
    counts have no gradient; the probability sums' reaches the logits
    (`fsdp.moe_aux_stats_backward`), and `sum`'s is the result's.
  }];
  let arguments = (ins FSDP_FloatTensor:$logits, FSDP_IndexTensor:$experts,
                       Optional<FSDP_FloatTensor>:$sum);
  let results = (outs FSDP_FloatTensor:$result);
}

def FSDP_MoeAuxLossOp : FSDP_DiffOp<"moe_aux_loss", "MoeAuxLoss"> {
  let summary = "the training loss plus the load-balancing loss";
  let description = [{
    `result = loss + coef * E * sum_e F_e P_e` over the layers' summed
    statistics `stats` (`2 x E`): with N = (sum of the counts) / `top_k`
    the rows they cover (L layers of T tokens), `F_e = counts_e / N` and
    `P_e = probability sum_e / N` (Switch Transformer's balancing loss as
    transformers computes it for Mixtral and Qwen3-MoE, `coef` the
    config's `router_aux_loss_coef`). All f32 scalars and statistics.

    ```mlir
    %total = fsdp.moe_aux_loss %stats, %ce {top_k = 2 : i64, coef = 2.0e-02 : f64}
        : (tensor<2x8xf32>, tensor<f32>) -> tensor<f32>
    ```
  }];
  let arguments = (ins FSDP_FloatTensor:$stats, FSDP_ScalarTensor:$loss,
                       I64Attr:$top_k, F64Attr:$coef);
  let results = (outs FSDP_ScalarTensor:$result);
}

//===----------------------------------------------------------------------===//
// Backward
//===----------------------------------------------------------------------===//

def FSDP_MoeAuxStatsBackwardOp :
    FSDP_BackwardOp<"moe_aux_stats_backward", "MoeAuxStatsBackward"> {
  let summary = "the logits' gradient from the probability sums'";
  let description = [{
    With `g` row 0 of `grad` (the counts' row has no gradient), each row's
    `dz = p (g - <p, g>)`, `p` the row's softmax.
  }];
  let arguments = (ins FSDP_FloatTensor:$grad, FSDP_FloatTensor:$logits);
  let results = (outs FSDP_FloatTensor:$result);
}

def FSDP_MoeAuxLossBackwardOp :
    FSDP_BackwardOp<"moe_aux_loss_backward", "MoeAuxLossBackward"> {
  let summary = "the summed statistics' gradient from the loss's";
  let description = [{
    Row 0: `grad * coef * E * F_e / N` (the counts are constant); row 1:
    zero.
  }];
  let arguments = (ins FSDP_ScalarTensor:$grad, FSDP_FloatTensor:$stats,
                       I64Attr:$top_k, F64Attr:$coef);
  let results = (outs FSDP_FloatTensor:$result);
}

def FSDP_MoeRouterBackwardOp :
    FSDP_BackwardOp<"moe_router_backward", "MoeRouterBackward"> {
  let summary = "the router logits' gradient from its weights' gradient";
  let description = [{
    For the choice `experts` the forward made (docs/moe.md, "The block,
    backward"): softmax renormalised, `dz = g (dg - <g, dg>)` over the
    chosen experts; not renormalised, softmax's gradient over all E;
    sigmoid, through the chosen sigmoids and their sum. Zero elsewhere;
    f32 (`... x E`).
  }];
  let arguments = !con((ins FSDP_FloatTensor:$grad, FSDP_FloatTensor:$logits,
                            FSDP_IndexTensor:$experts),
                       FSDP_MoeRouterArgs);
  let results = (outs FSDP_FloatTensor:$result);
}

def FSDP_MoeBiasSignalOp :
    FSDP_BackwardOp<"moe_bias_signal", "MoeBiasSignal"> {
  let summary = "a selection bias's load signal, in place of its gradient";
  let description = [{
    DeepSeek-V3's selection bias has no gradient (it chooses, never
    weighs); what updates it is its experts' load. In the place of its
    gradient, `result[e] = n_e - R K / E`, n_e the pairs of `experts` that
    chose expert e: the reduce-scatter then averages it over the ranks like
    any gradient, and the parameter's `selection_bias` update moves it by
    its rate against the sign, b_e <- b_e - rate * sign(mean over ranks),
    which is DeepSeek-V3's b_e <- b_e + rate * sign(mean load - n_e) on the
    whole batch. Gradient clipping's sum of squares leaves it out.
  }];
  let arguments = (ins FSDP_IndexTensor:$experts);
  let results = (outs FSDP_FloatTensor:$result);
}

def FSDP_MoePermuteBackwardOp :
    FSDP_BackwardOp<"moe_permute_backward", "MoePermuteBackward"> {
  let summary = "each token's gradient: its K rows' gradients summed in "
                "choice order";
  let arguments = (ins FSDP_FloatTensor:$grad, FSDP_IndexTensor:$position);
  let results = (outs FSDP_FloatTensor:$result);
}

def FSDP_MoeGroupedLinearGradInputOp :
    FSDP_BackwardOp<"moe_grouped_linear_grad_input",
                    "MoeGroupedLinearGradInput", [], ["getFlops"]> {
  let summary = "dX = dY W_e over each expert's rows";
  let arguments = (ins FSDP_FloatTensor:$grad, FSDP_FloatTensor:$weight,
                       FSDP_IndexTensor:$offsets);
  let results = (outs FSDP_FloatTensor:$result);
}

def FSDP_MoeGroupedLinearGradWeightOp :
    FSDP_BackwardOp<"moe_grouped_linear_grad_weight",
                    "MoeGroupedLinearGradWeight", [], ["getFlops"]> {
  let summary = "dW_e = dY_e^T X_e per expert (zero for an expert no pair "
                "chose)";
  let arguments = (ins FSDP_FloatTensor:$grad, FSDP_FloatTensor:$input,
                       FSDP_IndexTensor:$offsets);
  let results = (outs FSDP_FloatTensor:$result);
}

def FSDP_MoeCombineBackwardOp :
    FSDP_BackwardOp<"moe_combine_backward", "MoeCombineBackward"> {
  let summary = "the gradients of moe_combine's rows and weights";
  let description = [{
    `rows_grad[position[t K + j]] = weights[t, j] * grad[t]` and
    `weights_grad[t, j] = <grad[t], rows[position[t K + j]]>` (f32).
  }];
  let arguments = (ins FSDP_FloatTensor:$grad, FSDP_FloatTensor:$rows,
                       FSDP_FloatTensor:$weights,
                       FSDP_IndexTensor:$position);
  let results = (outs FSDP_FloatTensor:$rows_grad,
                      FSDP_FloatTensor:$weights_grad);
}

#endif // FSDP_MOE_OPS_TD
