#!/usr/bin/env python3
"""A model family end to end against Hugging Face transformers.

usage: hf_family.py FAMILY --bin DIR --work DIR --data FILE
                    [--mpirun "mpirun ... -np"] [--ranks 1,2] [--steps K]
                    [--expert G]
                    [--attention auto|materialized|blocked] [--no-export]

FAMILY is one of FAMILIES below: a tiny model of that family is made and
saved by transformers itself (its config class, its own random
initialisation from the config's initializer_range, save_pretrained).
Then, for each world size N of --ranks:

  1. fsdp-gen --config DIR/config.json; fsdp-opt --fsdp-train-pipeline at N
     ranks (AdamW: lr 1e-3, betas 0.9/0.95, eps 1e-8, weight decay 0.1);
  2. fsdp-run --init-from the saved weights at lr 0: its loss on batch 0
     equals transformers' forward on the same tokens to 1e-5 relative;
  3. fsdp-run --init-from them for K AdamW steps: every step's loss equals
     torch.optim.AdamW's on the same batches, with the same decay rule
     (matrices decay, vectors: norms and biases, do not), to 2e-4;
  4. --export DIR (f32, then --export-dtype bf16): from_pretrained(DIR)
     alone loads each, and its loss on batch 0 equals fsdp-run's
     --init-from the same DIR at lr 0, to 1e-5.

The batches are fsdp-run's (docs/runtime.md, the data rule): DATA's bytes
as tokens, batch k the k-th window of B x T, targets shifted by one.
Prints one line per check ending in ok or FAILED, and exits 1 on a
failure.
"""
import argparse
import json
import os
import shlex
import subprocess
import sys

import numpy as np

B, T = 4, 16
LR, BETAS, EPS, WD = 1e-3, (0.9, 0.95), 1e-8, 0.1
LOSS_RTOL, TRAIN_RTOL = 1e-5, 2e-4


def llama_like(**extra):
    config = dict(hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                  num_attention_heads=4, num_key_value_heads=2,
                  vocab_size=256, max_position_embeddings=64,
                  rms_norm_eps=1e-5, initializer_range=0.2,
                  tie_word_embeddings=False)
    config.update(extra)
    return config


# Per family: transformers' config class and model class, and the config
# (small dims; an initializer_range large enough that attention is far from
# uniform, so that a wrong rotation, window or norm shows in the loss).
FAMILIES = {
    "gpt2": ("GPT2Config", "GPT2LMHeadModel",
             dict(n_layer=2, n_embd=32, n_head=4, vocab_size=256,
                  n_positions=32, initializer_range=0.2)),
    "llama": ("LlamaConfig", "LlamaForCausalLM", llama_like()),
    # Llama 3.1's rope scaling, with an original context of 64 and factors
    # that put the 4 frequencies of head_dim 8 (theta 10000) in all three
    # bands: kept (wavelength 6.3 < 64/8), smoothed (62.8), scaled (628+).
    "llama3": ("LlamaConfig", "LlamaForCausalLM", llama_like(
        rope_theta=10000.0, max_position_embeddings=512,
        rope_scaling={"rope_type": "llama3", "factor": 8.0,
                      "low_freq_factor": 1.0, "high_freq_factor": 8.0,
                      "original_max_position_embeddings": 64})),
    # Mistral with a window shorter than the sequence.
    "mistral": ("MistralConfig", "MistralForCausalLM",
                llama_like(sliding_window=5, head_dim=8)),
    # Qwen2: q, k, v biases; tied embeddings as in the small ones.
    "qwen2": ("Qwen2Config", "Qwen2ForCausalLM",
              llama_like(tie_word_embeddings=True, use_sliding_window=False)),
    # Qwen3: q/k RMSNorm per head, head_dim 16 where hidden/heads is 8.
    "qwen3": ("Qwen3Config", "Qwen3ForCausalLM",
              llama_like(head_dim=16, use_sliding_window=False)),
    # Mixtral: 4 experts of intermediate_size, 2 a token, renormalised.
    "mixtral": ("MixtralConfig", "MixtralForCausalLM",
                llama_like(num_local_experts=4, num_experts_per_tok=2,
                           sliding_window=None)),
    # Mixtral with the balancing loss (output_router_logits), a weight
    # large enough that a wrong one shows.
    "mixtral_aux": ("MixtralConfig", "MixtralForCausalLM",
                    llama_like(num_local_experts=4, num_experts_per_tok=2,
                               sliding_window=None, output_router_logits=True,
                               router_aux_loss_coef=0.5)),
    # Qwen3-MoE: 6 experts of moe_intermediate_size 24, 2 a token, with
    # Qwen3's q/k norms; the top 2's softmax probabilities not renormalised
    # (norm_topk_prob false: the weights are the probabilities over all 6).
    "qwen3_moe": ("Qwen3MoeConfig", "Qwen3MoeForCausalLM",
                  llama_like(num_experts=6, num_experts_per_tok=2,
                             moe_intermediate_size=24, norm_topk_prob=False,
                             head_dim=16, use_sliding_window=False)),
}

failed = False


def verdict(name, got, want, rtol):
    global failed
    rel = abs(got - want) / max(abs(want), 1e-30)
    ok = rel <= rtol
    failed |= not ok
    print("hf_family: %s: %.9g vs %.9g (relative %.2e, limit %.0e): %s"
          % (name, got, want, rel, rtol, "ok" if ok else "FAILED"))
    sys.stdout.flush()


def run(cmd, **kwargs):
    out = subprocess.run(cmd, capture_output=True, text=True, **kwargs)
    if out.returncode != 0:
        sys.exit("hf_family: %s failed (%d):\n%s%s" % (
            " ".join(cmd), out.returncode, out.stdout[-3000:],
            out.stderr[-3000:]))
    return out.stdout


def make_model(family, path):
    import torch
    import transformers
    config_class, model_class, values = FAMILIES[family]
    config = getattr(transformers, config_class)(**values)
    torch.manual_seed(0)
    model = getattr(transformers, model_class)(config)
    model.save_pretrained(path)
    print("hf_family: %s made by transformers %s (%s, %d parameters)"
          % (family, transformers.__version__, model_class,
             sum(p.numel() for p in model.parameters())))
    return model


def batches(data_path, count):
    """fsdp-run's first `count` batches: (inputs, targets) of B x T."""
    data = np.frombuffer(open(data_path, "rb").read(), dtype=np.uint8)
    windows = (len(data) - 1) // (B * T)
    out = []
    for k in range(count):
        start = (k % windows) * B * T
        x = data[start:start + B * T + 1].astype(np.int64)
        out.append((x[:-1].reshape(B, T), x[1:].reshape(B, T)))
    return out


def loss_of(model, inputs, targets, ranks=1):
    """The training loss: the cross-entropy, plus router_aux_loss_coef
    times the balancing loss where the config asks for it
    (output_router_logits). With N ranks, the mean of the ranks' losses on
    their B / N rows each: the balancing loss is each rank's own (as
    transformers' is under DDP), the cross-entropy's mean is the batch's."""
    import torch
    aux = getattr(model.config, "output_router_logits", False)
    per_rank = B // ranks
    total = 0
    for r in range(ranks if aux else 1):
        rows = slice(r * per_rank, (r + 1) * per_rank) if aux else slice(None)
        out = model(torch.tensor(inputs[rows]), output_router_logits=aux) \
            if aux else model(torch.tensor(inputs[rows]))
        logits = out.logits.double()
        loss = torch.nn.functional.cross_entropy(
            logits.reshape(-1, logits.shape[-1]),
            torch.tensor(targets[rows]).reshape(-1))
        if aux:
            loss = loss + model.config.router_aux_loss_coef * out.aux_loss.double()
        total = total + loss
    return total / (ranks if aux else 1)


def torch_losses(model_dir, model_class, data, steps, ranks=1):
    """The losses of `steps` AdamW steps in torch from the saved model,
    with fsdp's decay rule."""
    import torch
    import transformers
    model = getattr(transformers, model_class).from_pretrained(
        model_dir, dtype=torch.float32)
    # Dropout off (GPT-2's config has 0.1): fsdp's step has none.
    model.eval()
    params = [p for p in model.parameters() if p.requires_grad]
    groups = [{"params": [p for p in params if p.dim() >= 2],
               "weight_decay": WD},
              {"params": [p for p in params if p.dim() < 2],
               "weight_decay": 0.0}]
    opt = torch.optim.AdamW(groups, lr=LR, betas=BETAS, eps=EPS)
    losses = []
    for inputs, targets in batches(data, steps):
        opt.zero_grad()
        loss = loss_of(model, inputs, targets, ranks)
        loss.backward()
        opt.step()
        losses.append(float(loss.detach()))
    return losses


def transformers_loss(model_dir, model_class, data, ranks=1):
    import torch
    import transformers
    model = getattr(transformers, model_class).from_pretrained(
        model_dir, dtype=torch.float32)
    model.eval()
    inputs, targets = batches(data, 1)[0]
    with torch.no_grad():
        return float(loss_of(model, inputs, targets, ranks))


def main():
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("family", choices=sorted(FAMILIES))
    p.add_argument("--bin", required=True)
    p.add_argument("--work", required=True)
    p.add_argument("--data", required=True)
    p.add_argument("--mpirun", default="mpirun --oversubscribe -np")
    p.add_argument("--ranks", default="1,2")
    p.add_argument("--steps", type=int, default=6)
    p.add_argument("--attention", default="auto")
    p.add_argument("--no-export", action="store_true")
    p.add_argument("--expert", type=int, default=1,
                   help="expert parallelism: expert groups of this many "
                        "ranks at every world size it divides")
    args = p.parse_args()
    tool = lambda name: os.path.join(args.bin, name)  # noqa: E731
    os.makedirs(args.work, exist_ok=True)
    hf_dir = os.path.join(args.work, "hf")
    model_class = FAMILIES[args.family][1]
    make_model(args.family, hf_dir)
    model_mlir = os.path.join(args.work, "model.mlir")
    with open(model_mlir, "w") as f:
        f.write(run([tool("fsdp-gen"), "--config",
                     os.path.join(hf_dir, "config.json"), "--seq", str(T),
                     "--batch", str(B)]))
    for n in [int(r) for r in args.ranks.split(",")]:
        # The balancing loss is per rank: its reference depends on N.
        if (n == 1 or "reference" not in locals() or
                FAMILIES[args.family][2].get("output_router_logits")):
            reference = transformers_loss(hf_dir, model_class, args.data, n)
            trained = torch_losses(hf_dir, model_class, args.data,
                                   args.steps, n)
        plan = os.path.join(args.work, "model.%d.plan" % n)
        expert = args.expert if n % args.expert == 0 else 1
        run([tool("fsdp-opt"), model_mlir, "--fsdp-train-pipeline="
             "world-size=%d lr=%g beta1=%g beta2=%g eps=%g weight-decay=%g "
             "attention=%s expert=%d" % (n, LR, BETAS[0], BETAS[1], EPS, WD,
                                         args.attention, expert),
             "-o", plan])
        mpirun = shlex.split(args.mpirun) + [str(n)]

        def fsdp_run(tag, *extra):
            report = os.path.join(args.work, "%s.%d.json" % (tag, n))
            run(mpirun + [tool("fsdp-run"), plan, "--data", args.data,
                          "--threads", "1", "--report-json", report]
                + list(extra))
            return json.load(open(report))["losses"]

        weights = os.path.join(hf_dir, "model.safetensors")
        got = fsdp_run("lr0", "--steps", "1", "--lr", "0",
                       "--init-from", weights)[0]
        verdict("%s at %d rank%s, lr 0: fsdp-run vs %s" % (
            args.family, n, "" if n == 1 else "s", model_class),
            got, reference, LOSS_RTOL)
        # A trailing '/': --export writes a Hugging Face directory (a name
        # with a dot is otherwise one safetensors file).
        exported = os.path.join(args.work, "export.%d" % n) + "/"
        extra = [] if args.no_export else ["--export", exported]
        losses = fsdp_run("adamw", "--steps", str(args.steps),
                          "--init-from", weights, *extra)
        for k, (got, want) in enumerate(zip(losses, trained)):
            verdict("%s at %d rank%s, AdamW step %d: fsdp-run vs "
                    "torch.optim.AdamW" % (args.family, n,
                                           "" if n == 1 else "s", k + 1),
                    got, want, TRAIN_RTOL)
        if args.no_export:
            continue
        bf16 = exported[:-1] + ".bf16/"
        fsdp_run("bf16", "--steps", "1", "--lr", "0", "--init-from", exported,
                 "--export", bf16, "--export-dtype", "bf16")
        for tag, directory in (("f32", exported), ("bf16", bf16)):
            got = fsdp_run("reload-" + tag, "--steps", "1", "--lr", "0",
                           "--init-from", directory)[0]
            verdict("%s at %d rank%s, --export (%s) in from_pretrained vs "
                    "fsdp-run --init-from it" % (
                        args.family, n, "" if n == 1 else "s", tag),
                    transformers_loss(directory, model_class, args.data, n),
                    got,
                    LOSS_RTOL)
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
