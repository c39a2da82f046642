#!/usr/bin/env python3
"""The Llama's forward in pure Python (no PyTorch) against our CPU backend.

torch_llama.py cannot run where MLIR is (no PyTorch there), so this checks
the architecture it writes down on a micro Llama, op by op as
torch_llama.Llama.forward computes it (the embedding, RMSNorm, the fused
qkv's layout, rotate-half rope with its theta, grouped-query causal
attention, o_proj, SwiGLU's gate and up, the residuals, the final norm,
the untied head, the mean cross-entropy), in double precision, with our
runtime's initial values (torch_llama.our_init) on fsdp-run's first batch
(torch_llama.our_batch): its loss must be the CPU backend's first loss (the
forward alone; fsdp-run --steps 1 --lr 0) to float32 accuracy.

usage: llama_forward_check.py BIN_DIR DATA_FILE     (prepare.sh runs it)
Exits 0 when they agree, 1 otherwise.
"""
import json
import math
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import torch_llama as tl  # noqa: E402

# A micro Llama: grouped-query (K < H), head size 4, two blocks, built
# from a Hugging Face config so that its weights can be large (std 0.5:
# at Llama's 0.02 the scores of so small a model are nearly zero, the
# attention uniform, and a wrong rope or kv mapping would not show) and
# its theta and epsilon not the defaults (their plumbing shows).
SHAPE = dict(layers=2, dim=16, heads=4, kv_heads=2, ffn_dim=24, vocab=256,
             seq=8, batch=2)
STD, THETA, EPS = 0.5, 30.0, 1e-5
TOLERANCE = 1e-5


def config_json(c):
    return {"model_type": "llama", "architectures": ["LlamaForCausalLM"],
            "num_hidden_layers": c["layers"], "hidden_size": c["dim"],
            "num_attention_heads": c["heads"],
            "num_key_value_heads": c["kv_heads"],
            "intermediate_size": c["ffn_dim"], "vocab_size": c["vocab"],
            "max_position_embeddings": c["seq"], "rope_theta": THETA,
            "rms_norm_eps": EPS, "initializer_range": STD,
            "tie_word_embeddings": False, "hidden_act": "silu"}


def matvec(w, x):  # w: OC rows of IC; y = W x (fsdp.linear, no bias)
    return [sum(a * b for a, b in zip(row, x)) for row in w]


def rms_norm(x, w, eps):
    rstd = 1.0 / math.sqrt(sum(v * v for v in x) / len(x) + eps)
    return [v * rstd * g for v, g in zip(x, w)]


def rope(head, t, theta):
    hs = len(head)
    half = hs // 2
    out = list(head)
    for i in range(half):
        # inv_freq and the angle in f32, as Hugging Face and our kernel.
        inv = tl_f32(1.0 / tl_f32(theta ** (2 * i / hs)))
        a = tl_f32(t * inv)
        c, s = math.cos(a), math.sin(a)
        out[i] = head[i] * c - head[i + half] * s          # x cos + rotate_half(x) sin
        out[i + half] = head[i + half] * c + head[i] * s
    return out


def tl_f32(x):
    import struct
    return struct.unpack("<f", struct.pack("<f", x))[0]


def forward(params, tokens, targets, c, eps, theta):
    L, C, H, K = c["layers"], c["dim"], c["heads"], c["kv_heads"]
    hs, group = C // H, H // K
    total, rows = 0.0, 0
    for seq_tokens, seq_targets in zip(tokens, targets):
        T = len(seq_tokens)
        x = [list(params["embed_tokens.w"][tok]) for tok in seq_tokens]
        for l in range(L):
            p = "layers.%d." % l
            h = [rms_norm(v, params[p + "input_layernorm.w"], eps) for v in x]
            qkv = [matvec(params[p + "self_attn.qkv_proj.w"], v) for v in h]
            # q: H heads, then k: K heads, then v: K heads, hs wide each.
            q = [[rope(r[n * hs:(n + 1) * hs], t, theta) for n in range(H)]
                 for t, r in enumerate(qkv)]
            k = [[rope(r[C + n * hs:C + (n + 1) * hs], t, theta)
                  for n in range(K)] for t, r in enumerate(qkv)]
            vv = [[r[C + K * hs + n * hs:C + K * hs + (n + 1) * hs]
                   for n in range(K)] for r in qkv]
            attn = []
            for i in range(T):
                row = []
                for n in range(H):
                    kv = n // group  # repeat_kv
                    scores = [sum(a * b for a, b in zip(q[i][n], k[j][kv]))
                              / math.sqrt(hs) for j in range(i + 1)]
                    m = max(scores)
                    e = [math.exp(s - m) for s in scores]
                    z = sum(e)
                    row += [sum(e[j] / z * vv[j][kv][d] for j in range(i + 1))
                            for d in range(hs)]
                attn.append(row)
            x = [[a + b for a, b in zip(xi, matvec(params[p + "self_attn.o_proj.w"], ai))]
                 for xi, ai in zip(x, attn)]
            h = [rms_norm(v, params[p + "post_attention_layernorm.w"], eps)
                 for v in x]
            out = []
            for xi, hi in zip(x, h):
                gate = matvec(params[p + "mlp.gate_proj.w"], hi)
                up = matvec(params[p + "mlp.up_proj.w"], hi)
                act = [g / (1.0 + math.exp(-g)) * u for g, u in zip(gate, up)]
                out.append([a + b for a, b in zip(
                    xi, matvec(params[p + "mlp.down_proj.w"], act))])
            x = out
        for xi, target in zip(x, seq_targets):
            logits = matvec(params["lm_head.w"],
                            rms_norm(xi, params["norm.w"], eps))
            m = max(logits)
            lse = m + math.log(sum(math.exp(v - m) for v in logits))
            total += lse - logits[target]
            rows += 1
    return total / rows


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    bin_dir, data_file = sys.argv[1], sys.argv[2]
    c = SHAPE
    # The f32 attributes' values, as the kernels see them.
    eps, theta = tl_f32(EPS), tl_f32(THETA)
    with tempfile.TemporaryDirectory() as tmp:
        plan, report = os.path.join(tmp, "micro.plan"), os.path.join(tmp, "r.json")
        config = os.path.join(tmp, "config.json")
        with open(config, "w") as f:
            json.dump(config_json(c), f)
        gen = subprocess.run(
            [os.path.join(bin_dir, "fsdp-gen"), "--config", config, "--seq",
             str(c["seq"]), "--batch", str(c["batch"])],
            check=True, capture_output=True)
        subprocess.run([os.path.join(bin_dir, "fsdp-opt"),
                        "--fsdp-train-pipeline", "-o", plan],
                       input=gen.stdout, check=True)
        subprocess.run([os.path.join(bin_dir, "fsdp-run"), plan, "--steps",
                        "1", "--lr", "0", "--threads", "1", "--data", data_file,
                        "--report-json", report],
                       check=True, stdout=subprocess.DEVNULL)
        cpu = json.load(open(report))["losses"][0]
    params = {}
    for name, shape, init, _ in tl.declared_params(
            c["layers"], c["dim"], c["heads"], c["kv_heads"], c["ffn_dim"],
            c["vocab"], STD):
        values = [tl_f32(v) for v in tl.our_init(name, math.prod(shape), init)]
        params[name] = (values if len(shape) == 1 else
                        [values[r * shape[1]:(r + 1) * shape[1]]
                         for r in range(shape[0])])
    tokens, targets = tl.our_batch(tl.read_tokens(data_file), 1, c["batch"],
                                   c["seq"])
    mine = forward(params, tokens, targets, c, eps, theta)
    rel = abs(mine - cpu) / abs(cpu)
    ok = rel <= TOLERANCE
    print("llama_forward_check: micro Llama %s std=%g theta=%g eps=%g: "
          "pure-Python forward %.7f, CPU backend %.7f, rel diff %.1e "
          "(tolerance %.0e): %s"
          % (" ".join("%s=%d" % kv for kv in c.items()), STD, THETA, EPS,
             mine, cpu, rel, TOLERANCE, "PASS" if ok else "FAIL"))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
