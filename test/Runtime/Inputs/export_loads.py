"""What fsdp-run --export writes, loaded the way the Python ecosystem loads
it: the file read by the format's own rules (safetensors_tool.py: json and
struct), by the `safetensors` package where it is installed (the same
names, shapes, values and metadata), and, where `transformers` (and torch)
are, as GPT2LMHeadModel / LlamaForCausalLM from the file and a config.json
written from the tensors' shapes; each forward's loss on fsdp-run's first
batch against the loss fsdp-run reported for it.

usage: export_loads.py randomize IN OUT [--seed S]
           IN's tensors (Hugging Face names) with random values of the same
           shapes: weights N(0, 0.3^2), norm weights 1 + N(0, 0.1^2),
           biases N(0, 0.1^2), so that every weight moves the loss (at the
           initializers' 0.02 attention is nearly uniform and a wrong rope,
           split or transpose would hardly show)
       export_loads.py check-dir DIR DATA REPORT --batch B --seq T
                       [--dtype f32|bf16] [--rtol X]
           DIR: what fsdp-run --export DIR wrote (config.json, shards,
           index), loaded by AutoModelForCausalLM.from_pretrained(DIR)
           with nothing added: its dtype the config's (--dtype), and its
           loss in f32 on DATA's first batch REPORT's (fsdp-run --init-from
           DIR --steps 1 --lr 0)
       export_loads.py save gpt2|llama DIR --seq T [--dtype f32|bf16]
                       [--max-shard SIZE] [--seed S]
           a tiny model (vocab 256, 2 layers, dim 16) made by transformers,
           its weights N(0, 0.3^2) (norms 1 + that), saved by
           save_pretrained(DIR, max_shard_size=SIZE) in DTYPE
       export_loads.py check gpt2|llama WEIGHTS DATA REPORT --heads H
                       --batch B --seq T [--eps X] [--theta X]
                       [--rope-scaling JSON]
                       [--require safetensors|transformers]... [--rtol X]
           REPORT: fsdp-run's --report-json of a run --init-from WEIGHTS
           (--steps 1 --lr 0: its loss is the forward of WEIGHTS); DATA's
           first B x T bytes as B rows, targets shifted by one. The
           reference: an independent numpy forward by Hugging Face's names
           (GPT-2: hf_gpt2.py's; Llama: below; in float64), to X
           relative (1e-5; the transformers model's too). --require X:
           fail (exit 1) where X is not importable, instead of saying so
           and going on; lit.cfg sets the features that decide.

Prints one line per reader and forward, each ending in ok or FAILED; the
config.json it hands transformers is printed too (written either way, so
that the shapes it reads are checked where transformers is missing).
"""
import argparse
import importlib.util
import json
import math
import os
import sys
import tempfile

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import hf_gpt2  # noqa: E402
import safetensors_tool as st  # noqa: E402

# What each check imports, and what to install for it.
NEEDS = {"safetensors": (["safetensors"], "pip install safetensors"),
         "transformers": (["transformers", "torch"],
                          "pip install torch transformers")}


def read_stdlib(path):
    """(tensors by name as float32 arrays, metadata) by the format's rules."""
    tensors, metadata = st.read(path)
    return {name: np.array(st.floats(dtype, raw), np.float32).reshape(shape)
            for name, dtype, shape, raw in tensors}, metadata


def randomize(args):
    rng = np.random.default_rng(args.seed)
    tensors, metadata = st.read(args.inp)
    out = []
    for name, dtype, shape, _ in tensors:
        if name.endswith("bias"):
            value = 0.1 * rng.standard_normal(shape)
        elif "ln_" in name or "norm" in name:
            value = 1 + 0.1 * rng.standard_normal(shape)
        else:
            value = 0.3 * rng.standard_normal(shape)
        out.append((name, "F32", shape, value.astype("<f4").tobytes()))
    st.write(args.out, out, metadata)
    return 0


def gpt2_config(w, heads):
    """GPT2LMHeadModel's config from the tensors' shapes (heads: given; no
    shape holds them)."""
    vocab, dim = w["transformer.wte.weight"].shape
    layers = sum(1 for n in w if n.endswith(".ln_1.weight"))
    return {"model_type": "gpt2", "architectures": ["GPT2LMHeadModel"],
            "vocab_size": vocab, "n_embd": dim, "n_layer": layers,
            "n_head": heads,
            "n_positions": w["transformer.wpe.weight"].shape[0],
            "n_inner": w["transformer.h.0.mlp.c_fc.weight"].shape[1],
            "activation_function": "gelu_new", "layer_norm_epsilon": 1e-5,
            "resid_pdrop": 0.0, "embd_pdrop": 0.0, "attn_pdrop": 0.0,
            "tie_word_embeddings": True}


def llama_config(w, heads, seq, eps, theta, scaling=None):
    vocab, dim = w["model.embed_tokens.weight"].shape
    layers = sum(1 for n in w if n.endswith(".input_layernorm.weight"))
    kv_rows = w["model.layers.0.self_attn.k_proj.weight"].shape[0]
    return {"model_type": "llama", "architectures": ["LlamaForCausalLM"],
            "vocab_size": vocab, "hidden_size": dim,
            "num_hidden_layers": layers, "num_attention_heads": heads,
            "num_key_value_heads": kv_rows // (dim // heads),
            "head_dim": dim // heads,
            "intermediate_size":
                w["model.layers.0.mlp.gate_proj.weight"].shape[0],
            "max_position_embeddings": seq, "rms_norm_eps": eps,
            "rope_theta": theta, "hidden_act": "silu",
            "attention_bias": False, "mlp_bias": False,
            "tie_word_embeddings": False, "rope_scaling": scaling}


def rms_norm(x, g, eps):
    return x / np.sqrt((x * x).mean(-1, keepdims=True) + eps) * g


def inv_freq(theta, hs, scaling):
    """Hugging Face's inverse frequencies (modeling_rope_utils.py's
    rope_init_fn for default, linear, llama3 and yarn), in f32 as torch
    computes them, and yarn's attention factor."""
    f32 = np.float32
    pos = f32(theta) ** (np.arange(0, hs, 2, dtype=f32) / f32(hs))
    inv = f32(1.0) / pos
    kind = (scaling or {}).get("rope_type", "default")
    factor = (scaling or {}).get("factor", 1.0)
    if kind == "linear":
        return inv / f32(factor), 1.0
    if kind == "llama3":
        old = scaling["original_max_position_embeddings"]
        low, high = scaling["low_freq_factor"], scaling["high_freq_factor"]
        wavelen = (f32(1.0) / inv) * f32(2 * math.pi)
        scaled = np.where(wavelen > f32(old / low), inv / f32(factor), inv)
        smooth = ((f32(1.0) / wavelen) * f32(old) - f32(low)) / f32(high - low)
        smoothed = (f32(1.0) - smooth) * scaled / f32(factor) + smooth * scaled
        medium = ~(wavelen < f32(old / high)) & ~(wavelen > f32(old / low))
        return np.where(medium, smoothed, scaled).astype(f32), 1.0
    if kind == "yarn":
        old = scaling["original_max_position_embeddings"]
        attention = scaling.get("attention_factor") or (
            0.1 * math.log(factor) + 1.0 if factor > 1 else 1.0)
        dim_of = lambda r: (hs * math.log(old / (r * 2 * math.pi))) / (  # noqa
            2 * math.log(theta))
        lo = dim_of(scaling.get("beta_fast") or 32)
        hi = dim_of(scaling.get("beta_slow") or 1)
        if scaling.get("truncate", True):
            lo, hi = math.floor(lo), math.ceil(hi)
        lo, hi = max(lo, 0), min(hi, hs - 1)
        if lo == hi:
            hi += 0.001
        ramp = np.clip((np.arange(hs // 2, dtype=f32) - f32(lo)) /
                       f32(hi - lo), 0, 1)
        extrapolation = f32(1.0) - ramp
        interpolation = f32(1.0) / (f32(factor) * pos)
        return (interpolation * (f32(1.0) - extrapolation) +
                inv * extrapolation).astype(f32), attention
    return inv, 1.0


def rotate(x, theta, scaling=None):
    """Rotate-half rope over the last axis (positions on axis -2), the
    inverse frequencies and the angles rounded to f32 as Hugging Face's
    and our kernels compute them."""
    T, hs = x.shape[-2], x.shape[-1]
    inv, attention = inv_freq(theta, hs, scaling)
    angle = (np.arange(T, dtype=np.float32)[:, None] * inv[None, :]).astype(
        np.float64)
    cos = np.concatenate([np.cos(angle)] * 2, -1) * attention
    sin = np.concatenate([np.sin(angle)] * 2, -1) * attention
    half = hs // 2
    rotated = np.concatenate([-x[..., half:], x[..., :half]], -1)
    return x * cos + rotated * sin


def llama_loss(w, inputs, targets, heads, eps, theta, scaling=None):
    """LlamaForCausalLM's forward by its tensor names, in float64."""
    w = {n: v.astype(np.float64) for n, v in w.items()}
    B, T = inputs.shape
    x = w["model.embed_tokens.weight"][inputs]
    C = x.shape[-1]
    hs = C // heads
    layer = 0
    while "model.layers.%d.input_layernorm.weight" % layer in w:
        p = "model.layers.%d." % layer
        h = rms_norm(x, w[p + "input_layernorm.weight"], eps)
        split = lambda m: (h @ w[p + "self_attn.%s_proj.weight" % m].T  # noqa
                           ).reshape(B, T, -1, hs).transpose(0, 2, 1, 3)
        q, k, v = split("q"), split("k"), split("v")
        group = heads // k.shape[1]
        k, v = np.repeat(k, group, 1), np.repeat(v, group, 1)
        q, k = rotate(q, theta, scaling), rotate(k, theta, scaling)
        scores = q @ k.transpose(0, 1, 3, 2) / np.sqrt(hs)
        scores = np.where(np.tril(np.ones((T, T), bool)), scores, -np.inf)
        scores = np.exp(scores - scores.max(-1, keepdims=True))
        y = (scores / scores.sum(-1, keepdims=True)) @ v
        y = y.transpose(0, 2, 1, 3).reshape(B, T, C)
        x = x + y @ w[p + "self_attn.o_proj.weight"].T
        h = rms_norm(x, w[p + "post_attention_layernorm.weight"], eps)
        gate = h @ w[p + "mlp.gate_proj.weight"].T
        up = h @ w[p + "mlp.up_proj.weight"].T
        x = x + (gate / (1 + np.exp(-gate)) * up) @ \
            w[p + "mlp.down_proj.weight"].T
        layer += 1
    logits = rms_norm(x, w["model.norm.weight"], eps) @ w["lm_head.weight"].T
    top = logits.max(-1, keepdims=True)
    lse = np.log(np.exp(logits - top).sum(-1)) + top[..., 0]
    picked = np.take_along_axis(logits, targets[..., None], -1)[..., 0]
    return float((lse - picked).mean()), layer


def verdict(name, got, want, rtol):
    rel = abs(got - want) / abs(want)
    ok = rel <= rtol
    print("export_loads: %s loss %.7f, fsdp-run %.7f, relative difference "
          "%.1e (limit %.0e): %s" % (name, got, want, rel, rtol,
                                    "ok" if ok else "FAILED"))
    return ok


def available(check, required):
    """Whether what `check` imports is installed; where it is not, a line
    saying what to install (a failure where the check is required)."""
    modules, install = NEEDS[check]
    missing = [m for m in modules if importlib.util.find_spec(m) is None]
    if not missing:
        return True
    print("export_loads: %s not installed (%s): the %s check %s" % (
        " and ".join(missing), install, check,
        "is required: FAILED" if required else "is skipped"))
    return False


def check_package(path, stdlib, metadata):
    """The safetensors package reads what the format's rules read."""
    from safetensors import safe_open
    from safetensors.numpy import load_file
    theirs = load_file(path)
    with safe_open(path, framework="np") as f:
        their_metadata = f.metadata()
    ok = set(theirs) == set(stdlib) and their_metadata == metadata and all(
        theirs[n].dtype == np.float32 and theirs[n].shape == v.shape and
        np.array_equal(theirs[n], v) for n, v in stdlib.items())
    print("export_loads: safetensors %s: %d tensors, metadata %s, the same "
          "names, shapes and values: %s" % (
              importlib.import_module("safetensors").__version__, len(theirs),
              json.dumps(their_metadata, sort_keys=True),
              "ok" if ok else "FAILED"))
    return ok


def transformers_loss(family, path, config, inputs, targets):
    """The loss of transformers' model built from the file and `config`."""
    import torch
    import transformers
    with tempfile.TemporaryDirectory() as tmp:
        with open(os.path.join(tmp, "config.json"), "w") as f:
            json.dump(config, f)
        os.symlink(os.path.abspath(path), os.path.join(tmp, "model.safetensors"))
        cls = (transformers.GPT2LMHeadModel if family == "gpt2" else
               transformers.LlamaForCausalLM)
        model = cls.from_pretrained(tmp, torch_dtype=torch.float32)
    model.eval()
    with torch.no_grad():
        logits = model(torch.tensor(inputs)).logits.double()
        loss = torch.nn.functional.cross_entropy(
            logits.reshape(-1, logits.shape[-1]),
            torch.tensor(targets).reshape(-1))
    return float(loss), "%s %s" % (cls.__name__, transformers.__version__)


def check(args):
    weights, metadata = read_stdlib(args.weights)
    print("export_loads: read by the format's rules: %d tensors, metadata %s"
          % (len(weights), json.dumps(metadata, sort_keys=True)))
    tokens = np.frombuffer(open(args.data, "rb").read(), np.uint8)
    n = args.batch * args.seq
    inputs = tokens[:n].astype(np.int64).reshape(args.batch, args.seq)
    targets = tokens[1:n + 1].astype(np.int64).reshape(args.batch, args.seq)
    if args.family == "gpt2":
        config = gpt2_config(weights, args.heads)
        stripped = {k[len("transformer."):] if k.startswith("transformer.")
                    else k: v.astype(np.float64) for k, v in weights.items()}
        reference, layers = hf_gpt2.gpt2_loss(stripped, inputs, targets,
                                              args.heads)
    else:
        scaling = json.loads(args.rope_scaling) if args.rope_scaling else None
        config = llama_config(weights, args.heads, args.seq, args.eps,
                              args.theta, scaling)
        reference, layers = llama_loss(weights, inputs, targets, args.heads,
                                       args.eps, args.theta, scaling)
    print("export_loads: config.json %s" % json.dumps(config, sort_keys=True))
    fsdp = json.load(open(args.report))["losses"][0]
    ok = verdict("numpy forward (%d layers)" % layers, reference, fsdp,
                 args.rtol)
    required = set(args.require)
    if available("safetensors", "safetensors" in required):
        ok &= check_package(args.weights, weights, metadata)
    else:
        ok &= "safetensors" not in required
    if available("transformers", "transformers" in required):
        loss, what = transformers_loss(args.family, args.weights, config,
                                       inputs, targets)
        ok &= verdict(what, loss, fsdp, args.rtol)
    else:
        ok &= "transformers" not in required
    return 0 if ok else 1


def check_dir(args):
    """from_pretrained(DIR) alone: the config.json and shards fsdp-run
    --export DIR wrote, nothing written here. The model's dtype is the
    config's (transformers 5 loads dtype "auto"); its loss, computed in
    f32 (the bf16 weights widened exactly, as fsdp-run's --init-from
    widens them), is fsdp-run's on the same batch."""
    import torch
    import transformers
    config = json.load(open(os.path.join(args.dir, "config.json")))
    want = {"f32": torch.float32, "bf16": torch.bfloat16}[args.dtype]
    auto = transformers.AutoModelForCausalLM.from_pretrained(args.dir)
    ok = auto.dtype == want and config["dtype"] == str(want).split(".")[1]
    print("export_loads: from_pretrained(DIR): %s, dtype %s (config %s): %s"
          % (type(auto).__name__, str(auto.dtype).split(".")[1],
             config["dtype"], "ok" if ok else "FAILED"))
    model = transformers.AutoModelForCausalLM.from_pretrained(
        args.dir, dtype=torch.float32)
    model.eval()
    tokens = np.frombuffer(open(args.data, "rb").read(), np.uint8)
    n = args.batch * args.seq
    inputs = tokens[:n].astype(np.int64).reshape(args.batch, args.seq)
    targets = tokens[1:n + 1].astype(np.int64).reshape(args.batch, args.seq)
    with torch.no_grad():
        logits = model(torch.tensor(inputs)).logits.double()
        loss = torch.nn.functional.cross_entropy(
            logits.reshape(-1, logits.shape[-1]),
            torch.tensor(targets).reshape(-1))
    fsdp = json.load(open(args.report))["losses"][0]
    ok &= verdict("%s %s from %s" % (type(model).__name__,
                                     transformers.__version__, args.dtype),
                  float(loss), fsdp, args.rtol)
    return 0 if ok else 1


def save(args):
    """A tiny model made and saved by transformers itself: its own config,
    its own random init, save_pretrained's shards."""
    import torch
    import transformers
    torch.manual_seed(args.seed)
    if args.family == "gpt2":
        config = transformers.GPT2Config(
            vocab_size=256, n_embd=16, n_layer=2, n_head=2,
            n_positions=args.seq, activation_function="gelu_new")
        model = transformers.GPT2LMHeadModel(config)
    else:
        config = transformers.LlamaConfig(
            vocab_size=256, hidden_size=16, intermediate_size=24,
            num_hidden_layers=2, num_attention_heads=4,
            num_key_value_heads=2, max_position_embeddings=args.seq,
            tie_word_embeddings=False)
        model = transformers.LlamaForCausalLM(config)
    with torch.no_grad():  # weights large enough that every one matters
        for name, p in model.named_parameters():
            p.normal_(1.0 if "norm" in name or "ln_" in name else 0.0, 0.3)
    if args.dtype == "bf16":
        model = model.to(torch.bfloat16)
    model.save_pretrained(args.dir, max_shard_size=args.max_shard)
    print("export_loads: saved %s in %s: %s" % (
        type(model).__name__, args.dir, " ".join(sorted(os.listdir(args.dir)))))
    return 0


def main():
    p = argparse.ArgumentParser(description=__doc__)
    sub = p.add_subparsers(dest="command", required=True)
    v = sub.add_parser("save")
    v.add_argument("family", choices=["gpt2", "llama"])
    v.add_argument("dir")
    v.add_argument("--seq", type=int, required=True)
    v.add_argument("--dtype", choices=["f32", "bf16"], default="f32")
    v.add_argument("--max-shard", default="5GB")
    v.add_argument("--seed", type=int, default=1)
    d = sub.add_parser("check-dir")
    for name in ("dir", "data", "report"):
        d.add_argument(name)
    for flag in ("batch", "seq"):
        d.add_argument("--" + flag, type=int, required=True)
    d.add_argument("--dtype", choices=["f32", "bf16"], default="f32")
    d.add_argument("--rtol", type=float, default=1e-5)
    r = sub.add_parser("randomize")
    r.add_argument("inp")
    r.add_argument("out")
    r.add_argument("--seed", type=int, default=1)
    c = sub.add_parser("check")
    c.add_argument("family", choices=["gpt2", "llama"])
    for name in ("weights", "data", "report"):
        c.add_argument(name)
    for flag in ("heads", "batch", "seq"):
        c.add_argument("--" + flag, type=int, required=True)
    c.add_argument("--eps", type=float, default=1e-6)
    c.add_argument("--theta", type=float, default=10000.0)
    c.add_argument("--rope-scaling", default="",
                   help="llama: the config's rope_scaling, as JSON")
    c.add_argument("--require", action="append", default=[],
                   choices=sorted(NEEDS))
    c.add_argument("--rtol", type=float, default=1e-5)
    args = p.parse_args()
    if args.command == "check-dir":
        return check_dir(args)
    if args.command == "save":
        return save(args)
    return randomize(args) if args.command == "randomize" else check(args)


if __name__ == "__main__":
    sys.exit(main())
