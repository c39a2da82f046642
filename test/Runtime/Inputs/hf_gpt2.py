"""A GPT-2 checkpoint as Hugging Face writes one, and the loss an
independent numpy forward computes on it, for fsdp-run --init-from.

usage: hf_gpt2.py make OUT --layers L --dim C --vocab V --positions P
                  [--seed S] [--no-prefix] [--buffers] [--dtype f32|bf16]
           GPT2LMHeadModel's tensors (transformer.wte.weight, Conv1D
           weights stored [in, out], ...), random (not the initializers:
           every weight and norm matters to the loss), in float64's
           f32 (or bf16) rounding. --no-prefix drops "transformer." (files
           saved from GPT2Model), --buffers adds the attention masks
           (h.N.attn.bias, h.N.attn.masked_bias) the official file has.
       hf_gpt2.py check CKPT DATA REPORT --batch B --seq T --heads H
                  [--rtol X]
           the first step's loss in fsdp-run's --report-json REPORT
           against GPT-2's forward of CKPT in float64 on the first batch
           of DATA read as bytes (inputs: tokens [0, B T) as B rows of T;
           targets: the same shifted by one), to X relative (1e-4)

Writes and reads with the `safetensors` package when it is importable,
otherwise the format directly (safetensors_tool.py); bf16 always directly
(numpy has no bf16).
"""
import argparse
import json
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import safetensors_tool as st  # noqa: E402

try:
    import safetensors.numpy as stnp
except ImportError:
    stnp = None


def block(rng, layer, C):
    p = "h.%d." % layer
    w = lambda *shape: 0.2 * rng.standard_normal(shape)  # noqa: E731
    return {
        p + "ln_1.weight": 1 + 0.1 * rng.standard_normal(C),
        p + "ln_1.bias": 0.1 * rng.standard_normal(C),
        p + "attn.c_attn.weight": w(C, 3 * C),
        p + "attn.c_attn.bias": 0.1 * rng.standard_normal(3 * C),
        p + "attn.c_proj.weight": w(C, C),
        p + "attn.c_proj.bias": 0.1 * rng.standard_normal(C),
        p + "ln_2.weight": 1 + 0.1 * rng.standard_normal(C),
        p + "ln_2.bias": 0.1 * rng.standard_normal(C),
        p + "mlp.c_fc.weight": w(C, 4 * C),
        p + "mlp.c_fc.bias": 0.1 * rng.standard_normal(4 * C),
        p + "mlp.c_proj.weight": w(4 * C, C),
        p + "mlp.c_proj.bias": 0.1 * rng.standard_normal(C),
    }


def make(args):
    rng = np.random.default_rng(args.seed)
    C = args.dim
    tensors = {"wte.weight": 0.3 * rng.standard_normal((args.vocab, C)),
               "wpe.weight": 0.1 * rng.standard_normal((args.positions, C))}
    for layer in range(args.layers):
        tensors.update(block(rng, layer, C))
        if args.buffers:
            P = args.positions
            tensors["h.%d.attn.bias" % layer] = np.tril(
                np.ones((P, P))).reshape(1, 1, P, P)
            tensors["h.%d.attn.masked_bias" % layer] = np.array(-1e4)
    tensors["ln_f.weight"] = 1 + 0.1 * rng.standard_normal(C)
    tensors["ln_f.bias"] = 0.1 * rng.standard_normal(C)
    prefix = "" if args.no_prefix else "transformer."
    tensors = {prefix + k: v.astype(np.float32) for k, v in tensors.items()}
    metadata = {"format": "pt"}
    if args.dtype == "f32" and stnp is not None:
        stnp.save_file(tensors, args.out, metadata=metadata)
        return
    dtype = "F32" if args.dtype == "f32" else "BF16"
    raw = lambda v: v.tobytes() if dtype == "F32" else (  # noqa: E731
        v.view(np.uint32) >> 16).astype("<u2").tobytes()
    st.write(args.out, [(k, dtype, list(v.shape), raw(v))
                        for k, v in tensors.items()], metadata)


def load(path):
    """The checkpoint's tensors as float64, "transformer." dropped."""
    tensors = None
    if stnp is not None:
        try:
            tensors = stnp.load_file(path)
        except Exception:  # bf16: numpy has no such type
            tensors = None
    if tensors is None:
        tensors = {}
        for name, dtype, shape, raw in st.read(path)[0]:
            tensors[name] = np.array(st.floats(dtype, raw)).reshape(shape)
    out = {}
    for name, value in tensors.items():
        if name.startswith("transformer."):
            name = name[len("transformer."):]
        out[name] = np.asarray(value, dtype=np.float64)
    return out


def layer_norm(x, w, b):
    mean = x.mean(-1, keepdims=True)
    var = ((x - mean) ** 2).mean(-1, keepdims=True)
    return (x - mean) / np.sqrt(var + 1e-5) * w + b


def gelu(x):  # GPT-2's tanh approximation
    return 0.5 * x * (1 + np.tanh(np.sqrt(2 / np.pi) * (x + 0.044715 * x ** 3)))


def attention(x, p, w, heads):
    B, T, C = x.shape
    hs = C // heads
    qkv = x @ w[p + "attn.c_attn.weight"] + w[p + "attn.c_attn.bias"]
    q, k, v = (qkv[..., i * C:(i + 1) * C].reshape(B, T, heads, hs)
               .transpose(0, 2, 1, 3) for i in range(3))
    scores = q @ k.transpose(0, 1, 3, 2) / np.sqrt(hs)
    scores = np.where(np.tril(np.ones((T, T), bool)), scores, -np.inf)
    scores = np.exp(scores - scores.max(-1, keepdims=True))
    probs = scores / scores.sum(-1, keepdims=True)
    y = (probs @ v).transpose(0, 2, 1, 3).reshape(B, T, C)
    return y @ w[p + "attn.c_proj.weight"] + w[p + "attn.c_proj.bias"]


def gpt2_loss(w, inputs, targets, heads):
    T = inputs.shape[1]
    x = w["wte.weight"][inputs] + w["wpe.weight"][:T]
    layer = 0
    while "h.%d.ln_1.weight" % layer in w:
        p = "h.%d." % layer
        x = x + attention(layer_norm(x, w[p + "ln_1.weight"],
                                     w[p + "ln_1.bias"]), p, w, heads)
        h = layer_norm(x, w[p + "ln_2.weight"], w[p + "ln_2.bias"])
        h = gelu(h @ w[p + "mlp.c_fc.weight"] + w[p + "mlp.c_fc.bias"])
        x = x + h @ w[p + "mlp.c_proj.weight"] + w[p + "mlp.c_proj.bias"]
        layer += 1
    x = layer_norm(x, w["ln_f.weight"], w["ln_f.bias"])
    logits = x @ w["wte.weight"].T  # the head is tied
    top = logits.max(-1, keepdims=True)
    lse = np.log(np.exp(logits - top).sum(-1)) + top[..., 0]
    picked = np.take_along_axis(logits, targets[..., None], -1)[..., 0]
    return float((lse - picked).mean()), layer


def check(args):
    tokens = np.frombuffer(open(args.data, "rb").read(), np.uint8)
    n = args.batch * args.seq
    inputs = tokens[:n].astype(np.int64).reshape(args.batch, args.seq)
    targets = tokens[1:n + 1].astype(np.int64).reshape(args.batch, args.seq)
    expected, layers = gpt2_loss(load(args.ckpt), inputs, targets, args.heads)
    got = json.load(open(args.report))["losses"][0]
    rel = abs(got - expected) / abs(expected)
    print("hf_gpt2: %d layers, numpy loss %.7f, fsdp-run %.7f, relative "
          "difference %.1e (limit %.0e): %s" % (
              layers, expected, got, rel, args.rtol,
              "ok" if rel <= args.rtol else "FAILED"))
    return 0 if rel <= args.rtol else 1


def main():
    p = argparse.ArgumentParser(description=__doc__)
    sub = p.add_subparsers(dest="command", required=True)
    m = sub.add_parser("make")
    m.add_argument("out")
    for flag in ("layers", "dim", "vocab", "positions"):
        m.add_argument("--" + flag, type=int, required=True)
    m.add_argument("--seed", type=int, default=1)
    m.add_argument("--no-prefix", action="store_true")
    m.add_argument("--buffers", action="store_true")
    m.add_argument("--dtype", choices=["f32", "bf16"], default="f32")
    c = sub.add_parser("check")
    for name in ("ckpt", "data", "report"):
        c.add_argument(name)
    for flag in ("batch", "seq", "heads"):
        c.add_argument("--" + flag, type=int, required=True)
    c.add_argument("--rtol", type=float, default=1e-4)
    args = p.parse_args()
    if args.command == "make":
        make(args)
        return 0
    return check(args)


if __name__ == "__main__":
    sys.exit(main())
