"""Tiny Qwen2 and Qwen3 models made and saved by transformers itself, and
fsdp-run's losses against theirs.

usage: qwen_family.py make qwen2|qwen3 DIR [--seed S] [--attention-bias]
           Qwen2ForCausalLM (tied embeddings, q/k/v biases) or
           Qwen3ForCausalLM (head_dim 16 at hidden 32 and 4 heads: not
           hidden / heads; q_norm, k_norm; --attention-bias: q, k, v and o
           biases), vocabulary 256, 2 layers, 2 kv heads, saved with
           save_pretrained (config.json and
           model.safetensors). transformers' initializers leave the biases
           at zero, the norms at one and attention nearly uniform, where a
           wrong split, bias or norm would hardly show: the weights are
           redrawn, N(0, 0.3^2), biases N(0, 0.1^2), norm gains
           1 + N(0, 0.1^2).
       qwen_family.py check DIR REPORT DATA --batch B --seq T
                      [--weights FILE] [--rtol X]
           The model of DIR (its config.json; its weights, or FILE's:
           fsdp-run's --export) on DATA's first B x T bytes as B rows,
           targets shifted by one, in float64 logits; its loss against
           REPORT's (fsdp-run --report-json) first loss, to X relative
           (1e-5). Prints one line ending in ok or FAILED.
"""
import argparse
import json
import os
import shutil
import sys
import tempfile

import numpy as np
import torch
import transformers


def make(args):
    torch.manual_seed(args.seed)
    common = dict(vocab_size=256, hidden_size=32, intermediate_size=48,
                  num_hidden_layers=2, num_attention_heads=4,
                  num_key_value_heads=2, max_position_embeddings=64,
                  rms_norm_eps=1e-6, rope_theta=1000000.0)
    if args.family == "qwen2":
        config = transformers.Qwen2Config(tie_word_embeddings=True, **common)
        cls = transformers.Qwen2ForCausalLM
    else:
        config = transformers.Qwen3Config(tie_word_embeddings=False,
                                          head_dim=16,
                                          attention_bias=args.attention_bias,
                                          **common)
        cls = transformers.Qwen3ForCausalLM
    model = cls(config)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith("bias"):
                p.copy_(0.1 * torch.randn_like(p))
            elif "norm" in name:
                p.copy_(1 + 0.1 * torch.randn_like(p))
            else:
                p.copy_(0.3 * torch.randn_like(p))
    model.save_pretrained(args.dir)
    print("qwen_family: %s saved to %s: %d parameters" % (
        cls.__name__, args.dir, sum(p.numel() for p in model.parameters())))
    return 0


def check(args):
    tokens = np.frombuffer(open(args.data, "rb").read(), np.uint8)
    n = args.batch * args.seq
    inputs = tokens[:n].astype(np.int64).reshape(args.batch, args.seq)
    targets = tokens[1:n + 1].astype(np.int64).reshape(args.batch, args.seq)
    with tempfile.TemporaryDirectory() as tmp:
        shutil.copy(os.path.join(args.dir, "config.json"), tmp)
        weights = args.weights or os.path.join(args.dir, "model.safetensors")
        os.symlink(os.path.abspath(weights),
                   os.path.join(tmp, "model.safetensors"))
        model = transformers.AutoModelForCausalLM.from_pretrained(
            tmp, dtype=torch.float32)
    model.eval()
    with torch.no_grad():
        logits = model(torch.tensor(inputs)).logits.double()
        loss = float(torch.nn.functional.cross_entropy(
            logits.reshape(-1, logits.shape[-1]),
            torch.tensor(targets).reshape(-1)))
    fsdp = json.load(open(args.report))["losses"][0]
    rel = abs(loss - fsdp) / abs(loss)
    ok = rel <= args.rtol
    print("qwen_family: %s %s%s loss %.7f, fsdp-run %.7f, relative "
          "difference %.1e (limit %.0e): %s" % (
              type(model).__name__, transformers.__version__,
              " (exported weights)" if args.weights else "", loss, fsdp, rel,
              args.rtol, "ok" if ok else "FAILED"))
    return 0 if ok else 1


def main():
    p = argparse.ArgumentParser(description=__doc__)
    sub = p.add_subparsers(dest="command", required=True)
    m = sub.add_parser("make")
    m.add_argument("family", choices=["qwen2", "qwen3"])
    m.add_argument("dir")
    m.add_argument("--seed", type=int, default=1)
    m.add_argument("--attention-bias", action="store_true",
                   help="qwen3: biases on q, k, v and o")
    c = sub.add_parser("check")
    for name in ("dir", "report", "data"):
        c.add_argument(name)
    c.add_argument("--batch", type=int, required=True)
    c.add_argument("--seq", type=int, required=True)
    c.add_argument("--weights")
    c.add_argument("--rtol", type=float, default=1e-5)
    args = p.parse_args()
    return make(args) if args.command == "make" else check(args)


if __name__ == "__main__":
    sys.exit(main())
