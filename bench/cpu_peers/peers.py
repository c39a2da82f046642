#!/usr/bin/env python3
"""One peer's GPT-2 124M training run, for bench/cpu_peers/run.py.

    peers.py SYSTEM TOKENS WARMUP STEPS THREADS

SYSTEM is eager, compile, eager-bf16 (PyTorch) or jax. The model is GPT-2
124M as fsdp-gen's gpt2-124m preset builds it (pre-norm blocks, GELU with
the tanh approximation, learned positions, the head tied to the token
embedding), at batch 4 x sequence 64, trained with AdamW (lr 3e-4, betas
0.9 / 0.95, eps 1e-8, weight decay 0.1 on the matrices). Prints one JSON
line: the mean step in ms over the timed steps, and the last loss.
"""
import json
import math
import sys
import time

import numpy as np

B, T, VOCAB, LAYERS, WIDTH, HEADS = 4, 64, 50257, 12, 768, 12
LR, BETAS, EPS, DECAY = 3e-4, (0.9, 0.95), 1e-8, 0.1


def batches(path):
    data = np.fromfile(path, dtype=np.uint16, offset=1024).astype(np.int64)
    i = 0
    while True:
        if i + B * T + 1 > len(data):
            i = 0
        chunk = data[i:i + B * T + 1]
        yield chunk[:-1].reshape(B, T), chunk[1:].reshape(B, T)
        i += B * T


def timed(step, data, warmup, steps):
    for _ in range(warmup):
        loss = step(*next(data))
    start = time.perf_counter()
    for _ in range(steps):
        loss = step(*next(data))
    ms = (time.perf_counter() - start) * 1e3 / steps
    return ms, float(loss)


def torch_run(system, path, warmup, steps, threads):
    import torch
    import torch.nn as nn
    import torch.nn.functional as F
    torch.set_num_threads(threads)
    torch.manual_seed(0)

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.ln1, self.ln2 = nn.LayerNorm(WIDTH), nn.LayerNorm(WIDTH)
            self.qkv = nn.Linear(WIDTH, 3 * WIDTH)
            self.proj = nn.Linear(WIDTH, WIDTH)
            self.fc = nn.Linear(WIDTH, 4 * WIDTH)
            self.out = nn.Linear(4 * WIDTH, WIDTH)

        def forward(self, x):
            q, k, v = self.qkv(self.ln1(x)).split(WIDTH, dim=2)
            shape = (x.size(0), x.size(1), HEADS, WIDTH // HEADS)
            q, k, v = (t.view(shape).transpose(1, 2) for t in (q, k, v))
            a = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            x = x + self.proj(a.transpose(1, 2).reshape(x.shape))
            return x + self.out(F.gelu(self.fc(self.ln2(x)),
                                       approximate="tanh"))

    class GPT(nn.Module):
        def __init__(self):
            super().__init__()
            self.wte = nn.Embedding(VOCAB, WIDTH)
            self.wpe = nn.Embedding(T, WIDTH)
            self.blocks = nn.ModuleList(Block() for _ in range(LAYERS))
            self.ln = nn.LayerNorm(WIDTH)
            for p in self.parameters():
                if p.dim() > 1:
                    nn.init.normal_(p, std=0.02)

        def forward(self, idx, targets):
            x = self.wte(idx) + self.wpe(torch.arange(idx.size(1)))
            for block in self.blocks:
                x = block(x)
            logits = F.linear(self.ln(x), self.wte.weight)
            return F.cross_entropy(logits.view(-1, VOCAB), targets.view(-1))

    model = GPT()
    decay = [p for p in model.parameters() if p.dim() > 1]
    rest = [p for p in model.parameters() if p.dim() <= 1]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": DECAY},
                             {"params": rest, "weight_decay": 0.0}],
                            lr=LR, betas=BETAS, eps=EPS)
    bf16 = system == "eager-bf16"

    def train(x, y):
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
            loss = model(x, y)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        return loss.detach()

    step = torch.compile(train) if system == "compile" else train

    def run(x, y):
        return step(torch.from_numpy(x), torch.from_numpy(y))
    return timed(run, batches(path), warmup, steps)


def jax_run(path, warmup, steps):
    import jax
    import jax.numpy as jnp

    key = jax.random.PRNGKey(0)

    def normal(shape):
        nonlocal key
        key, sub = jax.random.split(key)
        return 0.02 * jax.random.normal(sub, shape, jnp.float32)

    def layer_norm():
        return {"g": jnp.ones(WIDTH), "b": jnp.zeros(WIDTH)}

    def linear(i, o):
        return {"w": normal((i, o)), "b": jnp.zeros(o)}

    params = {"wte": normal((VOCAB, WIDTH)), "wpe": normal((T, WIDTH)),
              "ln": layer_norm(),
              "blocks": [{"ln1": layer_norm(), "ln2": layer_norm(),
                          "qkv": linear(WIDTH, 3 * WIDTH),
                          "proj": linear(WIDTH, WIDTH),
                          "fc": linear(WIDTH, 4 * WIDTH),
                          "out": linear(4 * WIDTH, WIDTH)}
                         for _ in range(LAYERS)]}

    def ln(p, x):
        mean = x.mean(-1, keepdims=True)
        var = ((x - mean) ** 2).mean(-1, keepdims=True)
        return (x - mean) / jnp.sqrt(var + 1e-5) * p["g"] + p["b"]

    def dense(p, x):
        return x @ p["w"] + p["b"]

    mask = jnp.tril(jnp.ones((T, T), bool))

    def block(p, x):
        q, k, v = jnp.split(dense(p["qkv"], ln(p["ln1"], x)), 3, axis=-1)
        heads = lambda t: t.reshape(B, T, HEADS, -1).transpose(0, 2, 1, 3)
        q, k, v = heads(q), heads(k), heads(v)
        s = q @ k.transpose(0, 1, 3, 2) / math.sqrt(WIDTH // HEADS)
        a = jax.nn.softmax(jnp.where(mask, s, -jnp.inf), axis=-1) @ v
        x = x + dense(p["proj"], a.transpose(0, 2, 1, 3).reshape(B, T, WIDTH))
        h = jax.nn.gelu(dense(p["fc"], ln(p["ln2"], x)), approximate=True)
        return x + dense(p["out"], h)

    def loss_fn(params, x, y):
        h = params["wte"][x] + params["wpe"][None]
        for p in params["blocks"]:
            h = block(p, h)
        logits = ln(params["ln"], h) @ params["wte"].T
        logp = jax.nn.log_softmax(logits, axis=-1)
        return -jnp.take_along_axis(logp, y[..., None], -1).mean()

    zeros = jax.tree_util.tree_map(jnp.zeros_like, params)
    state = (params, zeros, zeros, jnp.zeros((), jnp.int32))

    @jax.jit
    def train(state, x, y):
        params, m, v, t = state
        loss, grads = jax.value_and_grad(loss_fn)(params, x, y)
        t = t + 1
        c1 = 1 - BETAS[0] ** t
        c2 = 1 - BETAS[1] ** t

        def update(p, g, m, v):
            m = BETAS[0] * m + (1 - BETAS[0]) * g
            v = BETAS[1] * v + (1 - BETAS[1]) * g * g
            wd = DECAY if p.ndim > 1 else 0.0
            p = p - LR * ((m / c1) / (jnp.sqrt(v / c2) + EPS) + wd * p)
            return p, m, v
        out = jax.tree_util.tree_map(update, params, grads, m, v)
        unzip = lambda i: jax.tree_util.tree_map(
            lambda _, o: o[i], params, out)
        return (unzip(0), unzip(1), unzip(2), t), loss

    holder = {"state": state}

    def run(x, y):
        holder["state"], loss = train(holder["state"], jnp.asarray(x),
                                      jnp.asarray(y))
        return loss.block_until_ready()
    return timed(run, batches(path), warmup, steps)


def main():
    system, path, warmup, steps, threads = sys.argv[1:6]
    warmup, steps, threads = int(warmup), int(steps), int(threads)
    if system == "jax":
        ms, loss = jax_run(path, warmup, steps)
    else:
        ms, loss = torch_run(system, path, warmup, steps, threads)
    print(json.dumps({"system": system, "ms_per_step": ms, "loss": loss}))


if __name__ == "__main__":
    main()
