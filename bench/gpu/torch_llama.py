#!/usr/bin/env python3
"""PyTorch baseline for one GPU: the Llama that `fsdp-gen llama` builds,
written in plain PyTorch, trained with AdamW and timed step by step, the way
torch_baseline.py times GPT-2.

What it measures
  For each variant of `--variants` (one process: PyTorch is imported and the
  CUDA context made once), a fresh model from torch.manual_seed(--seed),
  `--warmup` untimed steps, then `--steps` timed training steps, each
      optimizer.zero_grad(set_to_none=True); loss = model(tokens, targets);
      loss.backward(); optimizer.step()
  timed with a pair of CUDA events per step (median and mean ms/step), plus
  the wall time of all timed steps between two torch.cuda.synchronize().
  Reported per variant: ms/step, tokens/s (B*T per step), MFU, peak device
  memory of the timed steps, the loss of every step; written to
  `--json-dir`/torch-llama-VARIANT.json as soon as the variant is done (a
  later variant that is killed keeps the earlier files).

  Variants: `manual` and `sdpa` (fp32 parameters, TF32 matmuls with --tf32
  on), `manual-bf16` and `sdpa-bf16` (the same under
  torch.autocast("cuda", dtype=torch.bfloat16)), `compile-bf16`
  (torch.compile of the sdpa model under autocast; the compilation is part
  of the warmup, so give it a hard timeout from outside).

How it matches our plan (tools/fsdp-gen/ModelBuilder.cpp buildLlama, the
kernels in runtime/src/cpu/, the AdamW defaults of
include/fsdp/Pipelines/Pipelines.h)
  * Model, parameter for parameter, same names, shapes and declaration order
    (named_parameters() yields fsdp-gen's names; `--manifest` checks them
    against the fsdp.param lines prepare.sh took from fsdp-gen's output):
      embed_tokens.w (V x C),
      per block l: layers.l.input_layernorm.w (C),
        layers.l.self_attn.qkv_proj.w ((C + 2 K hs) x C: q, k, v fused),
        layers.l.self_attn.o_proj.w (C x C),
        layers.l.post_attention_layernorm.w (C),
        layers.l.mlp.gate_proj.w (F x C), layers.l.mlp.up_proj.w (F x C),
        layers.l.mlp.down_proj.w (C x F);
      then norm.w (C) and the untied lm_head.w (V x C).
    No biases. Weights are stored OC x IC (y = x W^T, as fsdp.linear).
    x = embed_tokens[tokens]; per block (pre-norm):
      h = input_layernorm(x); qkv = qkv_proj(h); q, k = rope(q, k);
      x += o_proj(attention(q, k, v));
      h = post_attention_layernorm(x);
      x += down_proj(silu(gate_proj(h)) * up_proj(h))
    then norm, logits = x lm_head^T, the mean cross-entropy over the B*T rows.
  * RMSNorm (fsdp.rms_norm, Hugging Face's LlamaRMSNorm): y = x * rstd * w,
    rstd = 1 / sqrt(mean(x^2) + eps), eps 1e-6 (fsdp-gen llama's default,
    --norm-eps), computed in fp32 as Hugging Face does (also under
    autocast), the gain applied in the input's dtype.
  * Attention: qkv is B x T x (H + 2 K) hs: H query heads, then K key heads,
    then K value heads (hs = C / H). Rotary embeddings on q and k, Hugging
    Face's rotate-half convention (fsdp.rope, runtime/src/cpu/Elementwise.cpp
    rotate()): pairs (i, i + hs/2), at position t the angle
    t * inv_freq[i], inv_freq[i] = 1 / theta^(2i/hs) in fp32, theta 10000
    (--rope-theta); cos and sin in fp32, cast to q's dtype before the
    products (Hugging Face). Grouped-query: query head h reads kv head
    h // (H / K) (repeat_kv; our QkvLayout::kOffset). Scores scaled by
    1/sqrt(hs), causal. `manual` materialises the B x H x T x T
    probabilities (our attention=materialized; autograd keeps them for the
    backward); `sdpa` calls F.scaled_dot_product_attention(is_causal=True)
    on the repeated k and v (Hugging Face's sdpa path), closer to our
    default blocked attention, which keeps one log-sum-exp per row.
  * SwiGLU: silu(gate) * up (fsdp.swiglu), two linears without bias.
  * Initialisation as fsdp-gen's #fsdp.init for a Llama: every weight
    normal(0.02) (initializer_range; no residual scaling), norm gains ones
    (for the timing, from torch.manual_seed: only the distributions match
    our runtime's, which is all the timing needs; --equivalence uses our
    runtime's own values, below).
  * fp32 parameters, gradients and AdamW state; matmuls in TF32 with
    `--tf32 on` (default; our runtime's cuBLAS default), full fp32 with
    `--tf32 off`. The -bf16 variants: the forward and the loss under
    torch.autocast(bfloat16), no gradient scaler: what our plans compiled
    with `param-dtype=bf16 reduce-dtype=f32` are measured against.
  * AdamW with the pipeline's defaults (lr 3e-4, betas 0.9/0.95, eps 1e-8,
    weight decay 0.1), decoupled decay, bias corrections, no clipping, no
    schedule; weight decay 0 for the rank-1 parameters (the norm gains,
    which fsdp-gen marks no_weight_decay), as torch_baseline.py's
    make_optimizer does; fused AdamW where this PyTorch has it.
  * Data: one fixed synthetic batch, as torch_baseline.py (tokens uniform in
    [0, V) seeded 1234, targets the same stream shifted by one).

Equivalence (--equivalence, before the variants)
  The tiny Llama that prepare.sh compiled (reference.json's
  "tiny-llama-shape": 2 layers, dim 64, 4 heads, 2 kv heads, ffn 172, byte
  vocabulary, 8 x 64 tokens, lr 1e-3), its parameters set to the values our
  runtime initialises them with (our_init: runtime/src/exec/Init.cpp's
  generator, reproduced in Python and checked bit for bit against
  fsdp-run --export by test/Runtime/torch-llama-baseline.test), trained on fsdp-run's batches of data/corpus.txt
  (our_batch: runtime/src/io/Data.cpp's windows) in fp32 with TF32 off and
  manual attention, with this file's AdamW: its losses must be the CPU
  backend's (reference.json "tiny-llama", 30 steps) within 5e-3 relative,
  as our GPU's must. That checks the model, the initial values and the
  optimizer here against ours on a GPU machine; where MLIR is (no PyTorch),
  llama_forward_check.py checks the same forward in pure Python.

MFU
  flops per token = 6 N' + 12 L H hs T, N' = all parameters less the token
  embedding (a lookup, no matmul: untied here, unlike GPT-2's wte, which is
  also its head and so counts), the attention term the full T x T products
  (PaLM's appendix formula; query heads, grouped-query attention does the
  same products). MFU = flops per step / median step time / peak (dense
  TF32 494.7, fp32 66.9, bf16 989.4 TFLOPS: H100/H200 SXM; --peak-tflops
  overrides). summarize.py computes our rows' MFU with the same formula.

Usage
  python3 bench/gpu/torch_llama.py [--layers 12 --dim 768 --heads 12
      --kv-heads 4 --ffn-dim 2048 --vocab 32000 --seq 1024 --batch 4]
      [--variants manual,sdpa,manual-bf16,sdpa-bf16] [--steps 10 --warmup 3]
      [--tf32 on|off] [--reference REFERENCE_JSON] [--manifest FILE]
      [--expect-params N] [--equivalence] [--json-dir DIR] [--describe]
  --describe prints the parameters and their count and exits (no PyTorch
  needed: it checks --manifest and --expect-params too). Exits 2 with a
  one-line message when PyTorch or a CUDA device is missing, 3 when the
  parameters differ from the manifest or the expected count.
"""

import argparse
import contextlib
import gc
import json
import math
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import torch_baseline as tb  # noqa: E402  (constants, AdamW, TF32, data)
# The parameters, inits and batches (no PyTorch), by their names here too:
# llama_forward_check.py and the lit tests call them as torch_llama.X.
from llama_params import (  # noqa: E402,F401
    INIT_STD, NORM_EPS, ROPE_THETA, VARIANTS, check_params, declared_params,
    expected_param_count, flops_per_token, our_batch, our_init, read_manifest,
    read_tokens)

torch, nn, F = tb.torch, tb.nn, tb.F
_Module = tb._Module


# --------------------------------------------------------------------------
# The model
# --------------------------------------------------------------------------

class RMSNorm(_Module):
    """fsdp.rms_norm: gain `w` (ones), eps; Hugging Face's LlamaRMSNorm."""

    def __init__(self, channels, eps, device):
        super().__init__()
        self.w = nn.Parameter(torch.ones(channels, device=device))
        self.eps = eps

    def forward(self, x):
        dtype = x.dtype
        x = x.float()
        x = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps)
        return self.w * x.to(dtype)


class Linear(_Module):
    """fsdp.linear without bias: `w` (OC x IC, normal(std))."""

    def __init__(self, in_features, out_features, std, device):
        super().__init__()
        self.w = nn.Parameter(
            torch.empty(out_features, in_features, device=device)
            .normal_(0.0, std))

    def forward(self, x):
        return F.linear(x, self.w)


class Embedding(_Module):
    """fsdp.embedding without positions: `w` (V x C, normal(std))."""

    def __init__(self, vocab, dim, std, device):
        super().__init__()
        self.w = nn.Parameter(
            torch.empty(vocab, dim, device=device).normal_(0.0, std))

    def forward(self, tokens):
        return F.embedding(tokens, self.w)


def rotate_half(x):
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


class Attention(_Module):
    """qkv_proj (fused, no bias), rope on q and k, grouped-query causal
    attention, o_proj."""

    def __init__(self, dim, heads, kv_heads, std, attention, device):
        super().__init__()
        hs = dim // heads
        self.qkv_proj = Linear(dim, dim + 2 * kv_heads * hs, std, device)
        self.o_proj = Linear(dim, dim, std, device)
        self.heads, self.kv_heads, self.hs = heads, kv_heads, hs
        self.attention = attention

    def forward(self, x, cos, sin, above_diagonal):
        B, T, C = x.shape
        H, K, hs = self.heads, self.kv_heads, self.hs
        q, k, v = self.qkv_proj(x).split((H * hs, K * hs, K * hs), dim=2)
        q = q.view(B, T, H, hs).transpose(1, 2)  # B x H x T x hs
        k = k.view(B, T, K, hs).transpose(1, 2)  # B x K x T x hs
        v = v.view(B, T, K, hs).transpose(1, 2)
        cos, sin = cos[:T].to(q.dtype), sin[:T].to(q.dtype)
        q = q * cos + rotate_half(q) * sin
        k = k * cos + rotate_half(k) * sin
        if K != H:  # repeat_kv: query head h reads kv head h // (H / K)
            k = k.repeat_interleave(H // K, dim=1)
            v = v.repeat_interleave(H // K, dim=1)
        if self.attention == "sdpa":
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        else:
            scores = torch.matmul(q * (1.0 / math.sqrt(hs)), k.transpose(-2, -1))
            scores = scores.masked_fill(above_diagonal, float("-inf"))
            y = torch.matmul(torch.softmax(scores, dim=-1), v)
        y = y.transpose(1, 2).contiguous().view(B, T, C)
        return self.o_proj(y)


class MLP(_Module):
    """gate_proj, up_proj, silu(gate) * up, down_proj; no biases."""

    def __init__(self, dim, ffn, std, device):
        super().__init__()
        self.gate_proj = Linear(dim, ffn, std, device)
        self.up_proj = Linear(dim, ffn, std, device)
        self.down_proj = Linear(ffn, dim, std, device)

    def forward(self, x):
        return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))


class Block(_Module):
    def __init__(self, dim, heads, kv_heads, ffn, std, eps, attention, device):
        super().__init__()
        # Registration order = fsdp-gen's declaration order.
        self.input_layernorm = RMSNorm(dim, eps, device)
        self.self_attn = Attention(dim, heads, kv_heads, std, attention, device)
        self.post_attention_layernorm = RMSNorm(dim, eps, device)
        self.mlp = MLP(dim, ffn, std, device)

    def forward(self, x, cos, sin, above_diagonal):
        x = x + self.self_attn(self.input_layernorm(x), cos, sin,
                               above_diagonal)
        return x + self.mlp(self.post_attention_layernorm(x))


class Llama(_Module):
    """fsdp_gen::buildLlama (untied head): forward(tokens, targets) returns
    the mean loss. named_parameters() yields fsdp-gen's names in order."""

    def __init__(self, layers, dim, heads, kv_heads, ffn, vocab, seq,
                 attention, device, eps=NORM_EPS, theta=ROPE_THETA,
                 std=INIT_STD):
        super().__init__()
        self.embed_tokens = Embedding(vocab, dim, std, device)
        self.layers = nn.ModuleList(
            Block(dim, heads, kv_heads, ffn, std, eps, attention, device)
            for _ in range(layers))
        self.norm = RMSNorm(dim, eps, device)
        self.lm_head = Linear(dim, vocab, std, device)
        hs = dim // heads
        # Hugging Face's LlamaRotaryEmbedding, in fp32: inv_freq, the angles
        # t * inv_freq, then cos and sin of (angles, angles).
        inv_freq = 1.0 / (theta ** (
            torch.arange(0, hs, 2, dtype=torch.int64, device=device).float()
            / hs))
        t = torch.arange(seq, device=device, dtype=torch.float32)
        angles = torch.outer(t, inv_freq)
        emb = torch.cat((angles, angles), dim=-1)  # T x hs
        self.register_buffer("cos", emb.cos(), persistent=False)
        self.register_buffer("sin", emb.sin(), persistent=False)
        self.register_buffer(
            "above_diagonal",
            torch.triu(torch.ones(seq, seq, dtype=torch.bool, device=device),
                       diagonal=1),
            persistent=False)

    def forward(self, tokens, targets):
        T = tokens.shape[1]
        x = self.embed_tokens(tokens)
        mask = self.above_diagonal[:T, :T]
        for block in self.layers:
            x = block(x, self.cos, self.sin, mask)
        logits = self.lm_head(self.norm(x))
        return F.cross_entropy(logits.view(-1, logits.shape[-1]),
                               targets.view(-1))


# --------------------------------------------------------------------------
# The benchmark
# --------------------------------------------------------------------------

def parse_args(argv=None):
    parser = argparse.ArgumentParser(
        description=" ".join(__doc__.splitlines()[:3]))
    d = " (default %(default)s)"
    model = parser.add_argument_group("model (fsdp-gen llama options)")
    model.add_argument("--layers", type=int, default=12, help="blocks" + d)
    model.add_argument("--dim", type=int, default=768, help="width C" + d)
    model.add_argument("--heads", type=int, default=12,
                       help="query heads H" + d)
    model.add_argument("--kv-heads", type=int, default=4,
                       help="key/value heads K" + d)
    model.add_argument("--ffn-dim", type=int, default=2048,
                       help="SwiGLU width F" + d)
    model.add_argument("--vocab", type=int, default=32000,
                       help="vocabulary V" + d)
    model.add_argument("--seq", type=int, default=1024,
                       help="sequence length T" + d)
    model.add_argument("--batch", type=int, default=4,
                       help="global batch B (one GPU)" + d)
    model.add_argument("--rope-theta", type=float, default=ROPE_THETA,
                       help=d.strip())
    model.add_argument("--norm-eps", type=float, default=NORM_EPS,
                       help=d.strip())
    run = parser.add_argument_group("run")
    run.add_argument("--variants", default="manual,sdpa,manual-bf16,sdpa-bf16",
                     help="comma-separated, of %s" % ", ".join(VARIANTS) + d)
    run.add_argument("--steps", type=int, default=10, help="timed steps" + d)
    run.add_argument("--warmup", type=int, default=3,
                     help="untimed steps before them" + d)
    run.add_argument("--tf32", choices=("on", "off"), default="on",
                     help="TF32 tensor-core matmuls" + d)
    run.add_argument("--peak-tflops", type=float, default=None,
                     help="peak for MFU (default: by variant and --tf32)")
    run.add_argument("--json-dir", metavar="DIR",
                     help="write DIR/torch-llama-VARIANT.json")
    run.add_argument("--seed", type=int, default=0,
                     help="torch.manual_seed for the initialisation" + d)
    run.add_argument("--reference", metavar="FILE",
                     help="prepare.sh's reference.json: the model's shape, "
                          "rope theta, RMSNorm epsilon and the plan's "
                          "parameter count from its \"llama-124m-shape\" "
                          "(over the model options)")
    run.add_argument("--manifest", metavar="FILE",
                     help="fsdp-gen's parameters (prepare.sh's "
                          "llama-124m-params.json): names, shapes, inits "
                          "and weight decay must match")
    run.add_argument("--expect-params", type=int, default=None,
                     help="the parameter count our plan reports")
    run.add_argument("--equivalence", action="store_true",
                     help="first train the tiny Llama of --reference's "
                          "\"tiny-llama-shape\" from our runtime's initial "
                          "values on fsdp-run's batches in fp32 and compare "
                          "its losses with the CPU backend's (\"tiny-llama\"); "
                          "writes torch-llama-equivalence.json")
    run.add_argument("--describe", action="store_true",
                     help="print the parameters and their count, check "
                          "them, and exit (no PyTorch needed)")
    opt = parser.add_argument_group("AdamW (defaults of --fsdp-train-pipeline)")
    opt.add_argument("--lr", type=float, default=tb.PIPELINE_LR,
                     help=d.strip())
    opt.add_argument("--beta1", type=float, default=tb.PIPELINE_BETA1,
                     help=d.strip())
    opt.add_argument("--beta2", type=float, default=tb.PIPELINE_BETA2,
                     help=d.strip())
    opt.add_argument("--adam-eps", type=float, default=tb.PIPELINE_EPS,
                     help=d.strip())
    opt.add_argument("--weight-decay", type=float,
                     default=tb.PIPELINE_WEIGHT_DECAY,
                     help="for rank-2 parameters; rank-1 ones get 0" + d)
    args = parser.parse_args(argv)
    if args.reference:
        try:
            with open(args.reference) as f:
                shape = json.load(f)["llama-124m-shape"]
            for key in ("layers", "dim", "heads", "kv_heads", "ffn_dim",
                        "vocab", "seq", "batch"):
                setattr(args, key, int(shape[key]))
            args.rope_theta = float(shape["rope_theta"])
            args.norm_eps = float(shape["norm_eps"])
            args.expect_params = int(shape["params"])
        except (OSError, ValueError, KeyError, TypeError) as error:
            parser.error("--reference %s: %s" % (args.reference, error))
    for name in ("layers", "dim", "heads", "kv_heads", "ffn_dim", "vocab",
                 "seq", "batch", "steps"):
        if getattr(args, name) <= 0:
            parser.error("--%s must be positive" % name.replace("_", "-"))
    if args.warmup < 0:
        parser.error("--warmup must be >= 0")
    if args.dim % args.heads != 0 or (args.dim // args.heads) % 2 != 0:
        parser.error("--heads (%d) must divide --dim (%d) into an even head "
                     "size" % (args.heads, args.dim))
    if args.heads % args.kv_heads != 0:
        parser.error("--kv-heads (%d) must divide --heads (%d)"
                     % (args.kv_heads, args.heads))
    if args.equivalence and not args.reference:
        parser.error("--equivalence needs --reference")
    args.variant_list = [v for v in args.variants.split(",") if v]
    for v in args.variant_list:
        if v not in VARIANTS:
            parser.error("unknown variant '%s', expected one of %s"
                         % (v, ", ".join(VARIANTS)))
    if not args.variant_list and not args.equivalence:
        parser.error("--variants is empty")
    return args


def fail(message, code=2):
    print("torch_llama: " + message, file=sys.stderr)
    sys.exit(code)


def check_or_fail(args, declared):
    manifest = read_manifest(args.manifest) if args.manifest else None
    problems = check_params(declared, manifest, args.expect_params,
                            args.rope_theta, args.norm_eps)
    if problems:
        fail("the parameters differ from our plan's: " + "; ".join(problems), 3)
    count = sum(math.prod(s) for _, s, _, _ in declared)
    formula = expected_param_count(args.layers, args.dim, args.heads,
                                   args.kv_heads, args.ffn_dim, args.vocab)
    if count != formula:
        fail("internal error: %d parameters, docs/models.md's formula says %d"
             % (count, formula), 3)
    checked = [w for w, given in (("fsdp-gen's manifest", manifest),
                                  ("the plan's count", args.expect_params))
               if given is not None]
    return count, checked


def run_variant(args, variant, device, peak_default):
    """Trains one variant; returns its result dict."""
    attention = "manual" if variant.startswith("manual") else "sdpa"
    bf16 = variant.endswith("-bf16")
    compiled = variant.startswith("compile")
    torch.manual_seed(args.seed)
    model = Llama(args.layers, args.dim, args.heads, args.kv_heads,
                  args.ffn_dim, args.vocab, args.seq, attention, device,
                  args.norm_eps, args.rope_theta)
    names = [(n, tuple(p.shape)) for n, p in model.named_parameters()]
    want = [(n, s) for n, s, _, _ in declared_params(
        args.layers, args.dim, args.heads, args.kv_heads, args.ffn_dim,
        args.vocab)]
    if names != want:
        fail("internal error: the module's parameters are not the declared "
             "ones", 3)
    params = sum(p.numel() for p in model.parameters())
    optimizer, fused, decay_names, no_decay_names = tb.make_optimizer(
        model, args.lr, (args.beta1, args.beta2), args.adam_eps,
        args.weight_decay)
    tokens, targets = tb.make_batch(args.batch, args.seq, args.vocab, device)
    step_model = torch.compile(model) if compiled else model
    if args.peak_tflops is not None:
        peak, peak_source = args.peak_tflops, "--peak-tflops"
    elif bf16:
        peak, peak_source = tb.PEAK_TFLOPS_BF16, "default: H100/H200 SXM dense bf16"
    else:
        peak, peak_source = peak_default

    def autocast():
        if bf16:
            return torch.autocast("cuda", dtype=torch.bfloat16)
        return contextlib.nullcontext()

    def train_step():
        optimizer.zero_grad(set_to_none=True)
        with autocast():
            loss = step_model(tokens, targets)
        loss.backward()
        optimizer.step()
        return loss.detach()

    impl = "pytorch-compile" if compiled else "pytorch-eager"
    print("torch_llama: %s %s: %d params, attention=%s, tf32=%s, autocast=%s, "
          "AdamW %s" % (variant, impl, params, attention, args.tf32,
                        "bf16" if bf16 else "off",
                        "fused" if fused else "foreach"), flush=True)
    losses = []
    for _ in range(args.warmup):
        losses.append(train_step())
    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats(device)
    starts = [torch.cuda.Event(enable_timing=True) for _ in range(args.steps)]
    ends = [torch.cuda.Event(enable_timing=True) for _ in range(args.steps)]
    torch.cuda.synchronize()
    wall_start = time.perf_counter()
    for i in range(args.steps):
        starts[i].record()
        losses.append(train_step())
        ends[i].record()
    torch.cuda.synchronize()
    wall_s = time.perf_counter() - wall_start
    peak_allocated = torch.cuda.max_memory_allocated(device)
    peak_reserved = torch.cuda.max_memory_reserved(device)
    step_ms = [s.elapsed_time(e) for s, e in zip(starts, ends)]
    losses = [float(x) for x in torch.stack(losses).cpu().tolist()]
    median_ms = statistics.median(step_ms)
    tokens_per_step = args.batch * args.seq
    flops_token = flops_per_token(params, args.vocab, args.layers, args.heads,
                                  args.dim, args.seq)
    flops_step = flops_token * tokens_per_step
    mfu = flops_step / (median_ms / 1e3) / (peak * 1e12)
    if not all(math.isfinite(x) for x in losses):
        print("torch_llama: warning: non-finite loss", file=sys.stderr)
    print("torch_llama: %s | %.2f ms/step median, %.2f mean, %.2f wall (%d "
          "steps) | %.0f tokens/s | MFU %.1f%% of %.1f TFLOPS | peak "
          "allocated %.2f GiB, reserved %.2f GiB | loss %.4f -> %.4f "
          "(ln V = %.4f)"
          % (variant, median_ms, statistics.fmean(step_ms),
             wall_s * 1e3 / args.steps, args.steps,
             tokens_per_step / (median_ms / 1e3), 100.0 * mfu, peak,
             tb.gib(peak_allocated), tb.gib(peak_reserved), losses[0],
             losses[-1], math.log(args.vocab)), flush=True)
    result = {
        "model": "llama", "variant": variant, "impl": impl,
        "attention": attention, "tf32": args.tf32 == "on",
        "autocast": "bf16" if bf16 else "off",
        "ms_per_step_median": median_ms,
        "ms_per_step_mean": statistics.fmean(step_ms),
        "ms_per_step_wall": wall_s * 1e3 / args.steps,
        "ms_per_step": step_ms,
        "tokens_per_s": tokens_per_step / (median_ms / 1e3),
        "mfu": mfu, "peak_tflops": peak, "peak_tflops_source": peak_source,
        "flops_per_step": flops_step, "flops_per_token": flops_token,
        "flops_convention": "6*(N - V*C) + 12*L*H*hs*T per token: N all "
                            "parameters less the token embedding (a "
                            "lookup); MFU from the median step",
        "params": params,
        "peak_allocated_bytes": peak_allocated,
        "peak_reserved_bytes": peak_reserved,
        "losses": losses,
        "losses_note": "every step in order, the first `warmup` of them "
                       "untimed; one fixed synthetic batch",
        "torch_version": torch.__version__, "cuda_version": torch.version.cuda,
        "device": torch.cuda.get_device_name(device), "fused_adamw": fused,
        "config": {"layers": args.layers, "dim": args.dim,
                   "heads": args.heads, "kv_heads": args.kv_heads,
                   "ffn_dim": args.ffn_dim, "vocab": args.vocab,
                   "seq": args.seq, "batch": args.batch,
                   "rope_theta": args.rope_theta, "norm_eps": args.norm_eps,
                   "steps": args.steps, "warmup": args.warmup,
                   "seed": args.seed},
        "adamw": {"lr": args.lr, "beta1": args.beta1, "beta2": args.beta2,
                  "eps": args.adam_eps, "weight_decay": args.weight_decay,
                  "decayed_params": len(decay_names),
                  "no_weight_decay_params": len(no_decay_names)},
    }
    return result


EQUIVALENCE_TOL = 5e-3  # summarize.py's GPU-vs-CPU tolerance for tiny


def run_equivalence(args, device):
    """The tiny Llama with our runtime's initial values, on fsdp-run's
    batches, in fp32 (TF32 off): its losses must be the CPU backend's
    (reference.json "tiny-llama") up to summation order. Returns the result
    dict; the caller writes it."""
    with open(args.reference) as f:
        ref = json.load(f)
    shape, want = ref["tiny-llama-shape"], ref["tiny-llama"]["losses"]
    L, C, H, K, FF, V, T, B = (int(shape[k]) for k in (
        "layers", "dim", "heads", "kv_heads", "ffn_dim", "vocab", "seq",
        "batch"))
    root = os.path.dirname(os.path.dirname(os.path.dirname(
        os.path.abspath(__file__))))
    data = read_tokens(os.path.join(root, shape["data"]))
    previous = tb.set_tf32(False)
    torch.manual_seed(args.seed)
    model = Llama(L, C, H, K, FF, V, T, "manual", device,
                  float(shape["norm_eps"]), float(shape["rope_theta"]))
    declared = declared_params(L, C, H, K, FF, V)
    with torch.no_grad():
        for (name, p), (dname, dshape, init, _) in zip(
                model.named_parameters(), declared):
            assert name == dname and tuple(p.shape) == dshape
            values = our_init(name, p.numel(), init, int(shape["seed"]))
            p.copy_(torch.tensor(values, dtype=torch.float64)
                    .to(torch.float32).view(dshape))
    optimizer, fused, _, _ = tb.make_optimizer(
        model, float(shape["lr"]), (args.beta1, args.beta2), args.adam_eps,
        args.weight_decay)
    losses = []
    for step in range(1, len(want) + 1):
        inputs, targets = our_batch(data, step, B, T)
        tokens = torch.tensor(inputs, dtype=torch.int64, device=device)
        targets = torch.tensor(targets, dtype=torch.int64, device=device)
        optimizer.zero_grad(set_to_none=True)
        loss = model(tokens, targets)
        loss.backward()
        optimizer.step()
        losses.append(float(loss))
    rel = [abs(a - b) / max(abs(b), 1e-12) for a, b in zip(losses, want)]
    ok = all(math.isfinite(x) for x in losses) and max(rel) <= EQUIVALENCE_TOL
    print("torch_llama: equivalence: the tiny Llama (L=%d C=%d H=%d K=%d F=%d "
          "V=%d T=%d B=%d) with our initial values on fsdp-run's batches, "
          "fp32, %d steps: loss max rel diff vs the CPU backend %.2e "
          "(tolerance %.0e; step 1, the forward alone: %.2e); first %.6f vs "
          "%.6f, last %.6f vs %.6f: %s"
          % (L, C, H, K, FF, V, T, B, len(want), max(rel), EQUIVALENCE_TOL,
             rel[0], losses[0], want[0], losses[-1], want[-1],
             "PASS" if ok else "FAIL"), flush=True)
    # Restore what the timing variants use.
    tb.set_tf32(args.tf32 == "on")
    del model, optimizer
    return {"losses": losses, "reference": want, "max_rel_diff": max(rel),
            "step1_rel_diff": rel[0], "tolerance": EQUIVALENCE_TOL, "ok": ok,
            "fused_adamw": fused, "shape": shape,
            "tf32_setting_before": previous}


def main(argv=None):
    args = parse_args(argv)
    declared = declared_params(args.layers, args.dim, args.heads,
                               args.kv_heads, args.ffn_dim, args.vocab)
    count, checked = check_or_fail(args, declared)
    print("torch_llama: Llama L=%d C=%d H=%d K=%d F=%d V=%d T=%d B=%d: %d "
          "parameter tensors, %d parameters%s"
          % (args.layers, args.dim, args.heads, args.kv_heads, args.ffn_dim,
             args.vocab, args.seq, args.batch, len(declared), count,
             (", the same as " + " and ".join(checked)) if checked else ""),
          flush=True)
    if args.describe:
        for name, shape, init, nwd in declared:
            print("  %s %s %s%s" % (name, "x".join(map(str, shape)), init,
                                    " no_weight_decay" if nwd else ""))
        return 0
    if torch is None:
        fail("PyTorch is not installed (import torch: %s)"
             % tb._TORCH_IMPORT_ERROR)
    if not torch.cuda.is_available() or torch.cuda.device_count() == 0:
        fail("no CUDA device (torch %s, built for CUDA %s)"
             % (torch.__version__, torch.version.cuda))
    if any(v != "manual" and not v.startswith("manual-")
           for v in args.variant_list) and not hasattr(
               F, "scaled_dot_product_attention"):
        fail("the sdpa variants need F.scaled_dot_product_attention "
             "(PyTorch >= 2.0), this is %s" % torch.__version__)
    if "compile-bf16" in args.variant_list and not hasattr(torch, "compile"):
        fail("compile-bf16 needs torch.compile (PyTorch >= 2.0)")
    device = torch.device("cuda", 0)
    torch.cuda.set_device(device)
    tf32 = args.tf32 == "on"
    tf32_setting = tb.set_tf32(tf32)
    peak_default = ((tb.PEAK_TFLOPS_TF32, "default: H100/H200 SXM dense TF32")
                    if tf32 else
                    (tb.PEAK_TFLOPS_FP32,
                     "default: H100/H200 SXM fp32 (no tensor cores)"))
    print("torch_llama: on %s, torch %s (CUDA %s), %s"
          % (torch.cuda.get_device_name(device), torch.__version__,
             torch.version.cuda, tf32_setting), flush=True)
    # A part that fails is reported and the others still run: the check
    # wants whatever rows it can get from one device session.
    failed = []
    if args.equivalence:
        try:
            result = run_equivalence(args, device)
        except Exception as error:  # noqa: BLE001
            print("torch_llama: equivalence failed: %s: %s"
                  % (type(error).__name__, error), file=sys.stderr, flush=True)
            failed.append("equivalence")
            result = None
            tb.set_tf32(tf32)
        if result is not None and args.json_dir:
            os.makedirs(args.json_dir, exist_ok=True)
            path = os.path.join(args.json_dir, "torch-llama-equivalence.json")
            with open(path, "w") as f:
                json.dump(result, f, indent=2)
                f.write("\n")
    for variant in args.variant_list:
        # The previous variant's model, optimizer state and caches go
        # before this one allocates.
        gc.collect()
        torch.cuda.empty_cache()
        try:
            result = run_variant(args, variant, device, peak_default)
        except Exception as error:  # noqa: BLE001 (an OOM, a compile error)
            print("torch_llama: %s failed: %s: %s"
                  % (variant, type(error).__name__, error), file=sys.stderr,
                  flush=True)
            failed.append(variant)
            torch.cuda.empty_cache()
            continue
        result["tf32_setting"] = tf32_setting
        if args.json_dir:
            os.makedirs(args.json_dir, exist_ok=True)
            path = os.path.join(args.json_dir, "torch-llama-%s.json" % variant)
            with open(path, "w") as f:
                json.dump(result, f, indent=2)
                f.write("\n")
            print("torch_llama: wrote " + path, flush=True)
    if failed:
        print("torch_llama: failed: " + ", ".join(failed), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
