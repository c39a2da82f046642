#!/usr/bin/env python3
"""PyTorch baseline for one GPU: the GPT-2 that fsdp-gen builds, trained
with AdamW, timed step by step.

What it measures
  `--warmup` untimed steps, then `--steps` timed training steps, each
      optimizer.zero_grad(set_to_none=True); loss = model(tokens, targets);
      loss.backward(); optimizer.step()
  timed with a pair of CUDA events per step (median and mean ms/step), plus
  the wall time of all timed steps between two torch.cuda.synchronize().
  Reported: ms/step, tokens/s (B*T per step), MFU, peak device memory of the
  timed steps (max_memory_allocated / max_memory_reserved after
  reset_peak_memory_stats()), and the loss of every step.

How it matches our plan (tools/fsdp-gen/ModelBuilder.cpp, the kernels in
runtime/src/cpu/, the AdamW defaults of include/fsdp/Pipelines/Pipelines.h)
  * Model, parameter for parameter, same names and declaration order:
      wte (V x C), wpe (T x C: one row per position of --seq),
      per block l: h.l.ln_1.{w,b}, h.l.attn.qkv.{w (3C x C), b},
      h.l.attn.proj.{w (C x C), b}, h.l.ln_2.{w,b}, h.l.mlp.fc.{w (4C x C), b},
      h.l.mlp.proj.{w (C x 4C), b}; then ln_f.{w,b}.
    Weights are stored OC x IC (y = x W^T + b, as fsdp.linear).
    x = wte[tokens] + wpe[t]; per block (pre-norm):
      x += proj(attention(qkv(ln_1(x)))); x += mlp.proj(gelu(mlp.fc(ln_2(x))))
    then ln_f, logits = x wte^T (the head is tied to wte: fsdp-gen loads @wte
    a second time, no bias) and the mean cross-entropy over the B*T rows.
  * Layer norm: eps 1e-5, biased variance, weight and bias.
  * Attention: qkv is B x T x 3C with q | k | v side by side; head h is the
    column block [h*hs, (h+1)*hs) of each, hs = C / NH; scores scaled by
    1/sqrt(hs), causal. `--attention manual` (the default) materialises the
    B x NH x T x T probabilities as our runtime does (its attention kernel
    keeps them for the backward); `--attention sdpa` uses
    F.scaled_dot_product_attention(is_causal=True) instead, an extra
    reference point (for fp32 inputs PyTorch picks its memory-efficient
    kernel; FlashAttention needs 16-bit inputs).
  * GELU, tanh approximation.
  * Initialisation as fsdp-gen's #fsdp.init: normal(0.02) for wte, wpe,
    attn.qkv.w and mlp.fc.w; normal(0.02 / sqrt(2 * layers)) for the residual
    projections attn.proj.w and mlp.proj.w; biases zeros; norm gains ones
    (values differ from our runtime's generator, torch.manual_seed(0) here;
    only the distributions match, which is all the timing needs).
  * fp32 parameters, activations and optimizer state; matmuls in TF32 with
    `--tf32 on` (default; our runtime uses cuBLAS TF32 tensor-op math by
    default), full fp32 with `--tf32 off`.
  * `--autocast bf16`: the forward and the loss under
    torch.autocast("cuda", dtype=torch.bfloat16), PyTorch's mixed
    precision (matmuls and attention in bf16 with fp32 sums, layer norm,
    softmax and the loss in fp32; parameters, gradients and AdamW stay
    fp32, no gradient scaler): what our plans compiled with
    `param-dtype=bf16 reduce-dtype=f32` are measured against. MFU is then
    against the dense bf16 peak.
  * AdamW with the pipeline's defaults (lr 3e-4, betas 0.9/0.95, eps 1e-8,
    weight decay 0.1), decoupled decay, bias corrections, no gradient
    clipping, no schedule. Weight decay is 0 for the parameters fsdp-gen marks
    no_weight_decay, which are exactly the rank-1 ones (all biases and layer
    norm weights and biases); wte and wpe are rank 2 and are decayed.
    torch.optim.AdamW(fused=True) where this PyTorch has it, else foreach.
  * Data: synthetic, one fixed batch used at every step: tokens uniform in
    [0, V) from a torch.Generator seeded 1234, targets = the same stream
    shifted by one position. Our plan takes int32 token ids; PyTorch's
    cross_entropy wants int64 targets, so both tensors are converted once,
    before any step (not timed). The loss therefore falls quickly (the model
    memorises the batch); it starts near ln(V).

MFU (nanoGPT's estimate_mfu / the PaLM appendix formula)
  flops per token = 6 N + 12 L NH hs T, flops per step = that * B * T, with
  N = ALL parameters (wpe included; nanoGPT leaves wpe out of N, PaLM counts
  only non-embedding parameters; at the 124M shape wpe is 0.6% of N). The
  attention term counts the full T x T products, not just the causal half.
  MFU = flops per step / median step time / peak, the peak from
  --peak-tflops, by default 494.7 TFLOPS (H100/H200 SXM, dense TF32) with
  --tf32 on and 66.9 TFLOPS (their fp32 non-tensor-core rate) with --tf32 off.

Usage
  python3 bench/gpu/torch_baseline.py [--layers 12 --dim 768 --heads 12
      --vocab 50257 --seq 1024 --batch 4] [--steps 20 --warmup 3]
      [--attention manual|sdpa] [--tf32 on|off] [--autocast off|bf16]
      [--compile] [--json FILE]
  One GPU: --batch is the global batch and the per-rank batch. Exits 2 with
  a one-line message when PyTorch or a CUDA device is missing.
"""

import argparse
import contextlib
import json
import math
import os
import statistics
import sys
import time

try:
    import torch
    import torch.nn as nn
    import torch.nn.functional as F
    _TORCH_IMPORT_ERROR = None
except ImportError as error:  # --help and py_compile still work
    torch = nn = F = None
    _TORCH_IMPORT_ERROR = error

# Module classes below subclass nn.Module; without torch they are never
# instantiated (main exits first), so a plain base keeps the file importable.
_Module = nn.Module if nn is not None else object

# Defaults of --fsdp-train-pipeline (include/fsdp/Pipelines/Pipelines.h).
PIPELINE_LR = 3.0e-4
PIPELINE_BETA1 = 0.9
PIPELINE_BETA2 = 0.95
PIPELINE_EPS = 1.0e-8
PIPELINE_WEIGHT_DECAY = 0.1
# fsdp.layer_norm's epsilon as fsdp-gen emits it (ModelBuilder.cpp).
LAYER_NORM_EPS = 1.0e-5
# Dense peaks of an H100/H200 SXM, TFLOPS.
PEAK_TFLOPS_TF32 = 494.7
PEAK_TFLOPS_FP32 = 66.9
PEAK_TFLOPS_BF16 = 989.4
DATA_SEED = 1234


# --------------------------------------------------------------------------
# The model
# --------------------------------------------------------------------------

class LayerNorm(_Module):
    """fsdp.layer_norm: `w` (ones) and `b` (zeros), eps 1e-5."""

    def __init__(self, channels, device):
        super().__init__()
        self.w = nn.Parameter(torch.ones(channels, device=device))
        self.b = nn.Parameter(torch.zeros(channels, device=device))

    def forward(self, x):
        return F.layer_norm(x, (x.shape[-1],), self.w, self.b, LAYER_NORM_EPS)


class Linear(_Module):
    """fsdp.linear: `w` (OC x IC, normal(std)) and `b` (OC, zeros)."""

    def __init__(self, in_features, out_features, std, device):
        super().__init__()
        self.w = nn.Parameter(
            torch.empty(out_features, in_features, device=device)
            .normal_(0.0, std))
        self.b = nn.Parameter(torch.zeros(out_features, device=device))

    def forward(self, x):
        return F.linear(x, self.w, self.b)


class Attention(_Module):
    """attn.qkv, fsdp.attention (causal, NH heads), attn.proj."""

    def __init__(self, dim, heads, std, residual_std, attention, device):
        super().__init__()
        self.qkv = Linear(dim, 3 * dim, std, device)
        self.proj = Linear(dim, dim, residual_std, device)
        self.heads = heads
        self.attention = attention

    def forward(self, x, above_diagonal):
        B, T, C = x.shape
        NH, hs = self.heads, C // self.heads
        # q | k | v side by side; head h is columns [h*hs, (h+1)*hs) of each.
        q, k, v = self.qkv(x).split(C, dim=2)
        q = q.view(B, T, NH, hs).transpose(1, 2)  # B x NH x T x hs
        k = k.view(B, T, NH, hs).transpose(1, 2)
        v = v.view(B, T, NH, hs).transpose(1, 2)
        if self.attention == "sdpa":
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        else:
            # As our kernel: scores = q k^T / sqrt(hs) (the scale applied
            # to q, which is cheaper than to the T x T scores), masked
            # softmax, then probs v; the B x NH x T x T probabilities are
            # materialised and autograd keeps them for the backward.
            scores = torch.matmul(q * (1.0 / math.sqrt(hs)), k.transpose(-2, -1))
            scores = scores.masked_fill(above_diagonal, float("-inf"))
            probs = torch.softmax(scores, dim=-1)
            y = torch.matmul(probs, v)
        y = y.transpose(1, 2).contiguous().view(B, T, C)  # heads side by side
        return self.proj(y)


class MLP(_Module):
    """mlp.fc (4C), GELU (tanh), mlp.proj."""

    def __init__(self, dim, std, residual_std, device):
        super().__init__()
        self.fc = Linear(dim, 4 * dim, std, device)
        self.proj = Linear(4 * dim, dim, residual_std, device)

    def forward(self, x):
        return self.proj(F.gelu(self.fc(x), approximate="tanh"))


class Block(_Module):
    def __init__(self, dim, heads, std, residual_std, attention, device):
        super().__init__()
        # Registration order = fsdp-gen's declaration order.
        self.ln_1 = LayerNorm(dim, device)
        self.attn = Attention(dim, heads, std, residual_std, attention, device)
        self.ln_2 = LayerNorm(dim, device)
        self.mlp = MLP(dim, std, residual_std, device)

    def forward(self, x, above_diagonal):
        x = x + self.attn(self.ln_1(x), above_diagonal)
        return x + self.mlp(self.ln_2(x))


class GPT2(_Module):
    """fsdp_gen::buildGPT2: forward(tokens, targets) returns the mean loss.

    named_parameters() yields fsdp-gen's names in its declaration order.
    """

    def __init__(self, layers, dim, heads, vocab, seq, attention, device):
        super().__init__()
        std = 0.02
        residual_std = 0.02 / math.sqrt(2.0 * layers)
        self.wte = nn.Parameter(
            torch.empty(vocab, dim, device=device).normal_(0.0, std))
        self.wpe = nn.Parameter(
            torch.empty(seq, dim, device=device).normal_(0.0, std))
        self.h = nn.ModuleList(
            Block(dim, heads, std, residual_std, attention, device)
            for _ in range(layers))
        self.ln_f = LayerNorm(dim, device)
        # True above the diagonal: the entries the causal softmax drops.
        self.register_buffer(
            "above_diagonal",
            torch.triu(torch.ones(seq, seq, dtype=torch.bool, device=device),
                       diagonal=1),
            persistent=False)

    def forward(self, tokens, targets):
        T = tokens.shape[1]
        x = F.embedding(tokens, self.wte) + self.wpe[:T]
        mask = self.above_diagonal[:T, :T]
        for block in self.h:
            x = block(x, mask)
        x = self.ln_f(x)
        logits = F.linear(x, self.wte)  # tied head, no bias
        return F.cross_entropy(logits.view(-1, logits.shape[-1]),
                               targets.view(-1))


def expected_param_count(layers, dim, vocab, seq):
    """wte + wpe + L (12 C^2 + 13 C) + ln_f, as fsdp-gen declares them."""
    C = dim
    return vocab * C + seq * C + layers * (12 * C * C + 13 * C) + 2 * C


def flops_per_token(params, layers, heads, dim, seq):
    """nanoGPT's estimate_mfu: 6 N + 12 L NH hs T (N: all parameters)."""
    return 6 * params + 12 * layers * heads * (dim // heads) * seq


# --------------------------------------------------------------------------
# Optimizer, TF32
# --------------------------------------------------------------------------

def make_optimizer(model, lr, betas, eps, weight_decay, try_fused=True):
    """AdamW; rank-1 parameters (fsdp-gen's no_weight_decay) get no decay.

    Returns (optimizer, fused, decayed names, not-decayed names).
    """
    decay, no_decay, decay_names, no_decay_names = [], [], [], []
    for name, p in model.named_parameters():
        if p.dim() == 1:
            no_decay.append(p)
            no_decay_names.append(name)
        else:
            decay.append(p)
            decay_names.append(name)
    groups = [{"params": decay, "weight_decay": weight_decay},
              {"params": no_decay, "weight_decay": 0.0}]
    common = dict(lr=lr, betas=betas, eps=eps)
    if try_fused:
        try:
            return (torch.optim.AdamW(groups, fused=True, **common), True,
                    decay_names, no_decay_names)
        except (TypeError, RuntimeError, ValueError):
            pass  # no fused AdamW in this PyTorch, or not for this device
    try:
        optimizer = torch.optim.AdamW(groups, foreach=True, **common)
    except TypeError:
        optimizer = torch.optim.AdamW(groups, **common)
    return optimizer, False, decay_names, no_decay_names


def set_tf32(enabled):
    """Allows (or forbids) TF32 in cuBLAS matmuls and cuDNN.

    PyTorch >= 2.9 has the fp32_precision settings and refuses to mix them
    with the legacy allow_tf32 flags, so only one API is touched. Returns a
    description of what was set.
    """
    matmul = torch.backends.cuda.matmul
    if hasattr(matmul, "fp32_precision"):
        mode = "tf32" if enabled else "ieee"
        matmul.fp32_precision = mode
        conv = getattr(torch.backends.cudnn, "conv", None)
        if conv is not None and hasattr(conv, "fp32_precision"):
            conv.fp32_precision = mode
        return "cuda.matmul.fp32_precision=%s" % matmul.fp32_precision
    matmul.allow_tf32 = enabled
    torch.backends.cudnn.allow_tf32 = enabled
    return "cuda.matmul.allow_tf32=%s" % matmul.allow_tf32


# --------------------------------------------------------------------------
# The benchmark
# --------------------------------------------------------------------------

def parse_args(argv=None):
    parser = argparse.ArgumentParser(
        description=" ".join(__doc__.splitlines()[:2]))
    d = " (default %(default)s)"
    model = parser.add_argument_group("model (fsdp-gen gpt2 options)")
    model.add_argument("--layers", type=int, default=12, help="blocks" + d)
    model.add_argument("--dim", type=int, default=768, help="width C" + d)
    model.add_argument("--heads", type=int, default=12,
                       help="attention heads NH" + d)
    model.add_argument("--vocab", type=int, default=50257,
                       help="vocabulary V" + d)
    model.add_argument("--seq", type=int, default=1024,
                       help="sequence length T" + d)
    model.add_argument("--batch", type=int, default=4,
                       help="global batch B; one GPU, so also the per-rank "
                            "batch" + d)
    run = parser.add_argument_group("run")
    run.add_argument("--steps", type=int, default=20, help="timed steps" + d)
    run.add_argument("--warmup", type=int, default=3,
                     help="untimed steps before them; with --compile they "
                          "include the compilation" + d)
    run.add_argument("--attention", choices=("manual", "sdpa"),
                     default="manual",
                     help="manual: q k^T, masked softmax, probs v with the "
                          "B x NH x T x T probabilities materialised, as our "
                          "runtime; sdpa: F.scaled_dot_product_attention("
                          "is_causal=True)" + d)
    run.add_argument("--tf32", choices=("on", "off"), default="on",
                     help="TF32 tensor-core matmuls" + d)
    run.add_argument("--autocast", choices=("off", "bf16"), default="off",
                     help="the forward and loss under torch.autocast(bf16)"
                     + d)
    run.add_argument("--compile", action="store_true",
                     help="torch.compile the model (forward, loss, backward)")
    run.add_argument("--peak-tflops", type=float, default=None,
                     help="peak for MFU (default %s with --tf32 on, %s with "
                          "--tf32 off)" % (PEAK_TFLOPS_TF32, PEAK_TFLOPS_FP32))
    run.add_argument("--json", metavar="FILE", help="write the results here")
    run.add_argument("--seed", type=int, default=0,
                     help="torch.manual_seed for the initialisation" + d)
    opt = parser.add_argument_group("AdamW (defaults of --fsdp-train-pipeline)")
    opt.add_argument("--lr", type=float, default=PIPELINE_LR, help=d.strip())
    opt.add_argument("--beta1", type=float, default=PIPELINE_BETA1,
                     help=d.strip())
    opt.add_argument("--beta2", type=float, default=PIPELINE_BETA2,
                     help=d.strip())
    opt.add_argument("--adam-eps", type=float, default=PIPELINE_EPS,
                     help=d.strip())
    opt.add_argument("--weight-decay", type=float,
                     default=PIPELINE_WEIGHT_DECAY,
                     help="for rank-2 parameters; rank-1 ones get 0" + d)
    args = parser.parse_args(argv)
    for name in ("layers", "dim", "heads", "vocab", "seq", "batch", "steps"):
        if getattr(args, name) <= 0:
            parser.error("--%s must be positive" % name)
    if args.warmup < 0:
        parser.error("--warmup must be >= 0")
    if args.dim % args.heads != 0:
        parser.error("--heads (%d) must divide --dim (%d)"
                     % (args.heads, args.dim))
    if args.vocab > 2 ** 31 - 1:
        parser.error("--vocab must fit int32 token ids")
    return args


def fail(message):
    print("torch_baseline: " + message, file=sys.stderr)
    sys.exit(2)


def make_batch(batch, seq, vocab, device):
    """One fixed batch: int32 ids as our plan feeds them, converted to int64
    for PyTorch (outside the timed steps). targets[t] = tokens[t + 1]."""
    generator = torch.Generator().manual_seed(DATA_SEED)
    stream = torch.randint(0, vocab, (batch, seq + 1), generator=generator,
                           dtype=torch.int32)
    tokens = stream[:, :seq].to(device=device, dtype=torch.int64)
    targets = stream[:, 1:].to(device=device, dtype=torch.int64)
    return tokens, targets


def gib(n):
    return n / 2.0 ** 30


def main(argv=None):
    args = parse_args(argv)
    if torch is None:
        fail("PyTorch is not installed (import torch: %s)" % _TORCH_IMPORT_ERROR)
    if not torch.cuda.is_available() or torch.cuda.device_count() == 0:
        fail("no CUDA device (torch %s, built for CUDA %s)"
             % (torch.__version__, torch.version.cuda))
    if args.attention == "sdpa" and not hasattr(
            F, "scaled_dot_product_attention"):
        fail("--attention sdpa needs F.scaled_dot_product_attention "
             "(PyTorch >= 2.0), this is %s" % torch.__version__)
    if args.compile and not hasattr(torch, "compile"):
        fail("--compile needs torch.compile (PyTorch >= 2.0), this is %s"
             % torch.__version__)

    device = torch.device("cuda", 0)
    torch.cuda.set_device(device)
    tf32 = args.tf32 == "on"
    tf32_setting = set_tf32(tf32)
    if args.peak_tflops is not None:
        peak_tflops, peak_source = args.peak_tflops, "--peak-tflops"
    elif args.autocast == "bf16":
        peak_tflops = PEAK_TFLOPS_BF16
        peak_source = "default: H100/H200 SXM dense bf16"
    elif tf32:
        peak_tflops = PEAK_TFLOPS_TF32
        peak_source = "default: H100/H200 SXM dense TF32"
    else:
        peak_tflops = PEAK_TFLOPS_FP32
        peak_source = "default: H100/H200 SXM fp32 (no tensor cores)"

    torch.manual_seed(args.seed)
    model = GPT2(args.layers, args.dim, args.heads, args.vocab, args.seq,
                 args.attention, device)
    params = sum(p.numel() for p in model.parameters())
    expected = expected_param_count(args.layers, args.dim, args.vocab, args.seq)
    if params != expected:
        fail("internal error: %d parameters, fsdp-gen declares %d"
             % (params, expected))
    optimizer, fused, decay_names, no_decay_names = make_optimizer(
        model, args.lr, (args.beta1, args.beta2), args.adam_eps,
        args.weight_decay)
    tokens, targets = make_batch(args.batch, args.seq, args.vocab, device)
    step_model = torch.compile(model) if args.compile else model

    def autocast():
        if args.autocast == "bf16":
            return torch.autocast("cuda", dtype=torch.bfloat16)
        return contextlib.nullcontext()

    def train_step():
        optimizer.zero_grad(set_to_none=True)
        with autocast():
            loss = step_model(tokens, targets)
        loss.backward()
        optimizer.step()
        return loss.detach()

    impl = "pytorch-compile" if args.compile else "pytorch-eager"
    device_name = torch.cuda.get_device_name(device)
    print("torch_baseline: %s on %s, torch %s (CUDA %s); GPT-2 L=%d C=%d "
          "NH=%d V=%d T=%d B=%d, %d params; attention=%s, tf32=%s (%s), "
          "autocast=%s, AdamW %s"
          % (impl, device_name, torch.__version__, torch.version.cuda,
             args.layers, args.dim, args.heads, args.vocab, args.seq,
             args.batch, params, args.attention, args.tf32, tf32_setting,
             args.autocast,
             "fused" if fused else "foreach (fused unavailable)"),
          flush=True)

    losses = []  # device tensors until the end: no sync inside the steps
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
    mean_ms = statistics.fmean(step_ms)
    wall_ms = wall_s * 1e3 / args.steps
    tokens_per_step = args.batch * args.seq
    tokens_per_s = tokens_per_step / (median_ms / 1e3)
    flops_token = flops_per_token(params, args.layers, args.heads, args.dim,
                                  args.seq)
    flops_step = flops_token * tokens_per_step
    mfu = flops_step / (median_ms / 1e3) / (peak_tflops * 1e12)

    shown = ", ".join("%.4f" % x for x in losses[:5])
    print("torch_baseline: losses (steps 1..%d of %d, %d warmup): %s; "
          "ln(V) = %.4f" % (min(5, len(losses)), len(losses), args.warmup,
                            shown, math.log(args.vocab)))
    if not all(math.isfinite(x) for x in losses):
        print("torch_baseline: warning: non-finite loss", file=sys.stderr)
    print("torch_baseline: %s attention=%s tf32=%s fused_adamw=%s | "
          "%.2f ms/step median, %.2f mean, %.2f wall (%d steps) | "
          "%.0f tokens/s | MFU %.1f%% of %.1f TFLOPS (%s) | "
          "peak allocated %.2f GiB, reserved %.2f GiB | loss %.4f -> %.4f"
          % (impl, args.attention, args.tf32, fused, median_ms, mean_ms,
             wall_ms, args.steps, tokens_per_s, 100.0 * mfu, peak_tflops,
             peak_source, gib(peak_allocated), gib(peak_reserved), losses[0],
             losses[-1]), flush=True)

    if args.json:
        result = {
            "impl": impl,
            "attention": args.attention,
            "tf32": tf32,
            "autocast": args.autocast,
            "ms_per_step_median": median_ms,
            "ms_per_step_mean": mean_ms,
            "ms_per_step_wall": wall_ms,
            "ms_per_step": step_ms,
            "tokens_per_s": tokens_per_s,
            "mfu": mfu,
            "peak_tflops": peak_tflops,
            "peak_tflops_source": peak_source,
            "flops_per_step": flops_step,
            "flops_per_token": flops_token,
            "flops_convention": "6*N + 12*L*NH*hs*T per token (nanoGPT "
                                "estimate_mfu), N = all parameters incl. "
                                "wpe; MFU from the median step",
            "params": params,
            "peak_allocated_bytes": peak_allocated,
            "peak_reserved_bytes": peak_reserved,
            "losses": losses,
            "losses_note": "every step in order, the first `warmup` of them "
                           "untimed; one fixed synthetic batch",
            "torch_version": torch.__version__,
            "cuda_version": torch.version.cuda,
            "device": device_name,
            "fused_adamw": fused,
            "tf32_setting": tf32_setting,
            "config": {"layers": args.layers, "dim": args.dim,
                       "heads": args.heads, "vocab": args.vocab,
                       "seq": args.seq, "batch": args.batch,
                       "steps": args.steps, "warmup": args.warmup,
                       "seed": args.seed},
            "adamw": {"lr": args.lr, "beta1": args.beta1,
                      "beta2": args.beta2, "eps": args.adam_eps,
                      "weight_decay": args.weight_decay,
                      "decayed_params": len(decay_names),
                      "no_weight_decay_params": len(no_decay_names)},
        }
        directory = os.path.dirname(os.path.abspath(args.json))
        os.makedirs(directory, exist_ok=True)
        with open(args.json, "w") as f:
            json.dump(result, f, indent=2)
            f.write("\n")
        print("torch_baseline: wrote " + args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
