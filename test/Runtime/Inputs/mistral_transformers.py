#!/usr/bin/env python3
"""A tiny MistralForCausalLM made by transformers itself, and its loss.

usage: mistral_transformers.py make DIR --window W [--seed S]
       mistral_transformers.py check DIR CORPUS REPORT --batch B --seq T
                                     [--rtol X]

make: builds MistralForCausalLM from a MistralConfig with small dims and
a sliding window of W keys (transformers' own random init, std 0.2 so that
attention is far from uniform and the window changes the loss) and
save_pretrained()s it into DIR: config.json and model.safetensors, as a
user's checkpoint would come.

check: transformers' loss of the model in DIR on the batch fsdp-run trains
on first at one rank (the corpus's bytes: inputs tokens[0:B T], targets
tokens[1:B T + 1], rows of T), against the first loss of fsdp-run's
--report-json REPORT: within rtol (1e-5) relative. The same model with
sliding_window None must give another loss (the window is exercised).
"""
import argparse
import json
import sys

import numpy as np


def make(args):
    import torch
    from transformers import MistralConfig, MistralForCausalLM
    config = MistralConfig(
        vocab_size=256, hidden_size=32, intermediate_size=64,
        num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
        max_position_embeddings=64, sliding_window=args.window,
        rms_norm_eps=1e-6, tie_word_embeddings=False, initializer_range=0.2)
    torch.manual_seed(args.seed)
    model = MistralForCausalLM(config)
    model.save_pretrained(args.dir)
    print("mistral_transformers: made MistralForCausalLM, sliding_window %d, "
          "%d parameters" % (args.window,
                             sum(p.numel() for p in model.parameters())))
    return 0


def loss_of(path, inputs, targets, window="config"):
    import torch
    import transformers
    kwargs = {} if window == "config" else {"sliding_window": window}
    model = transformers.MistralForCausalLM.from_pretrained(
        path, dtype=torch.float32, attn_implementation="eager", **kwargs)
    model.eval()
    with torch.no_grad():
        logits = model(torch.tensor(inputs)).logits.double()
        loss = torch.nn.functional.cross_entropy(
            logits.reshape(-1, logits.shape[-1]),
            torch.tensor(targets).reshape(-1))
    return float(loss), model.config.sliding_window


def check(args):
    import transformers
    tokens = np.frombuffer(open(args.corpus, "rb").read(), np.uint8)
    n = args.batch * args.seq
    inputs = tokens[:n].astype(np.int64).reshape(args.batch, args.seq)
    targets = tokens[1:n + 1].astype(np.int64).reshape(args.batch, args.seq)
    fsdp = json.load(open(args.report))["losses"][0]
    theirs, window = loss_of(args.dir, inputs, targets)
    full, _ = loss_of(args.dir, inputs, targets, window=None)
    rel = abs(fsdp - theirs) / abs(theirs)
    ok = rel <= args.rtol
    print("mistral_transformers: MistralForCausalLM %s sliding_window %s loss "
          "%.9g, fsdp-run %.9g: relative difference %.2e (<= %g): %s"
          % (transformers.__version__, window, theirs, fsdp, rel, args.rtol,
             "ok" if ok else "FAILED"))
    apart = abs(full - theirs) / abs(theirs)
    differs = apart > 100 * args.rtol
    print("mistral_transformers: without the window the loss is %.9g "
          "(relative %.2e away): %s" % (full, apart,
                                        "ok" if differs else "FAILED"))
    return 0 if ok and differs else 1


def main():
    parser = argparse.ArgumentParser()
    sub = parser.add_subparsers(dest="command", required=True)
    m = sub.add_parser("make")
    m.add_argument("dir")
    m.add_argument("--window", type=int, required=True)
    m.add_argument("--seed", type=int, default=0)
    c = sub.add_parser("check")
    c.add_argument("dir")
    c.add_argument("corpus")
    c.add_argument("report")
    c.add_argument("--batch", type=int, required=True)
    c.add_argument("--seq", type=int, required=True)
    c.add_argument("--rtol", type=float, default=1e-5)
    args = parser.parse_args()
    return make(args) if args.command == "make" else check(args)


if __name__ == "__main__":
    sys.exit(main())
