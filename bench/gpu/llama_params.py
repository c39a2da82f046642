"""The Llama's parameters as `fsdp-gen llama` declares them, and the
runtime's initial values and batches, in pure Python (no PyTorch): what
torch_llama.py trains, and what --describe, llama_forward_check.py and
test/Runtime/Inputs/torch_llama_init.py check without a GPU.
"""

import json
import math

# fsdp-gen llama's defaults (tools/fsdp-gen/ModelBuilder.h LlamaConfig).
NORM_EPS = 1.0e-6
ROPE_THETA = 10000.0
INIT_STD = 0.02
VARIANTS = ("manual", "sdpa", "manual-bf16", "sdpa-bf16", "compile-bf16")


# --------------------------------------------------------------------------
# The parameters, without PyTorch: names, shapes, inits as fsdp-gen declares
# --------------------------------------------------------------------------

def declared_params(layers, dim, heads, kv_heads, ffn, vocab, std=INIT_STD):
    """[(name, shape, init, no_weight_decay)] in fsdp-gen's order."""
    C, hs = dim, dim // heads
    qkv = C + 2 * kv_heads * hs
    normal, ones = "normal(%g)" % std, "ones"
    out = [("embed_tokens.w", (vocab, C), normal, False)]
    for l in range(layers):
        p = "layers.%d." % l
        out += [(p + "input_layernorm.w", (C,), ones, True),
                (p + "self_attn.qkv_proj.w", (qkv, C), normal, False),
                (p + "self_attn.o_proj.w", (C, C), normal, False),
                (p + "post_attention_layernorm.w", (C,), ones, True),
                (p + "mlp.gate_proj.w", (ffn, C), normal, False),
                (p + "mlp.up_proj.w", (ffn, C), normal, False),
                (p + "mlp.down_proj.w", (C, ffn), normal, False)]
    out += [("norm.w", (C,), ones, True),
            ("lm_head.w", (vocab, C), normal, False)]
    return out


def expected_param_count(layers, dim, heads, kv_heads, ffn, vocab):
    """docs/models.md: 2 V C + C + L (2 C^2 + 2 C K hs + 3 C F + 2 C)."""
    C, hs = dim, dim // heads
    return 2 * vocab * C + C + layers * (
        2 * C * C + 2 * C * kv_heads * hs + 3 * C * ffn + 2 * C)


def flops_per_token(params, vocab, layers, heads, dim, seq):
    """6 N' + 12 L H hs T, N' = parameters less the token embedding."""
    return 6 * (params - vocab * dim) + 12 * layers * heads * (dim // heads) * seq


def read_manifest(path):
    """prepare.sh's llama-124m-params.json: {"params": [[name, [shape],
    init, no_weight_decay], ..], "rope_theta": .., "norm_eps": ..}."""
    with open(path) as f:
        data = json.load(f)
    data["params"] = [(n, tuple(s), i, bool(d)) for n, s, i, d in
                      data["params"]]
    return data


def check_params(declared, manifest=None, expect=None, theta=None, eps=None):
    """Compares the declared parameters (and rope theta, RMSNorm epsilon)
    with the manifest and the count; returns a list of problems (empty: they
    agree)."""
    problems = []
    count = sum(math.prod(s) for _, s, _, _ in declared)
    if expect is not None and count != expect:
        problems.append("%d parameters, the plan has %d" % (count, expect))
    if manifest is not None:
        theirs_list = manifest["params"]
        if len(theirs_list) != len(declared):
            problems.append("%d parameter tensors, fsdp-gen declares %d"
                            % (len(declared), len(theirs_list)))
        for ours, theirs in zip(declared, theirs_list):
            if ours != theirs:
                problems.append("ours %s, fsdp-gen's %s" % (ours, theirs))
                break
        # The manifest's values went through f32 attributes: 1e-5 reads
        # back as 9.99999974e-06.
        for what, mine, key in (("rope theta", theta, "rope_theta"),
                                ("RMSNorm epsilon", eps, "norm_eps")):
            if mine is not None and not math.isclose(
                    mine, manifest[key], rel_tol=1e-6):
                problems.append("%s %g, fsdp-gen's %g"
                                % (what, mine, manifest[key]))
    return problems


# --------------------------------------------------------------------------
# Our runtime's initial values and batches, without PyTorch (small models)
# --------------------------------------------------------------------------

_MASK64 = (1 << 64) - 1


def _splitmix64(x):
    x = (x + 0x9E3779B97F4A7C15) & _MASK64
    x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & _MASK64
    x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & _MASK64
    return x ^ (x >> 31)


def _fnv1a(name):
    h = 0xCBF29CE484222325
    for c in name.encode():
        h = ((h ^ c) * 0x100000001B3) & _MASK64
    return h


def our_init(name, count, init, seed=1):
    """The values runtime/src/exec/Init.cpp initialises parameter `name` with
    (`count` elements; init "ones", "zeros" or "normal(STD)"; fsdp-run's
    --seed, 1 by default), as Python floats rounded through float32 by the
    caller. Pure Python: for small models only."""
    if init in ("ones", "zeros"):
        return [1.0 if init == "ones" else 0.0] * count
    std = float(init[len("normal("):-1])
    key = _splitmix64(seed ^ _fnv1a(name))
    out = []
    for i in range(count):
        bits = _splitmix64((key + (i >> 1)) & _MASK64)
        u1 = (float((bits >> 32) & 0xFFFFFFFF) + 1.0) / 4294967296.0
        u2 = (float(bits & 0xFFFFFFFF) + 1.0) / 4294967296.0
        r, theta = math.sqrt(-2.0 * math.log(u1)), 2.0 * math.pi * u2
        out.append(std * r * (math.sin(theta) if i & 1 else math.cos(theta)))
    return out


def our_batch(data, step, batch, seq):
    """Step `step`'s (from 1) inputs and targets as fsdp-run reads them
    (runtime/src/io/Data.cpp TokenData::batch, one rank): B*T + 1 consecutive
    tokens from window (step - 1) mod windows; `data` is the list of token
    ids. Returns (inputs, targets), each B lists of T ids."""
    per = batch * seq
    windows = (len(data) - 1) // per
    start = ((step - 1) % windows) * per
    flat = data[start:start + per + 1]
    return ([flat[b * seq:(b + 1) * seq] for b in range(batch)],
            [flat[b * seq + 1:(b + 1) * seq + 1] for b in range(batch)])


def read_tokens(path):
    """A data file as fsdp-run reads it: llm.c's token format (a 256-int32
    header, magic 20240520, then uint16 ids) or raw bytes."""
    import struct
    raw = open(path, "rb").read()
    if len(raw) >= 1024 and struct.unpack_from("<i", raw, 0)[0] == 20240520:
        count = struct.unpack_from("<i", raw, 8)[0]
        return list(struct.unpack_from("<%dH" % count, raw, 1024))
    return list(raw)
