#!/usr/bin/env python3
"""A bounded mutation fuzzer of Hugging Face config files (docs/testing.md).

Seeds are the configs of test/fsdp-gen/Inputs (GPT-2 124M, LLaMA-13B,
Llama 2 7B, Llama 3 8B in both transformers spellings, Llama 3.1 8B with
its rope scaling, Mistral 7B v0.3, Qwen2.5 7B, Qwen3 8B, and the mixtures
of experts Mixtral 8x7B and Qwen3-30B-A3B, which are described only),
scaled down so that a GPT-2 that parses is also
built quickly. Per case one to three mutations: a key's value replaced by
an extreme or another JSON type (0, -1, 2^31, 2^63, 1e308, NaN as a bare
token, "", null, [], {}, true, a long string), a key removed or an
unknown one added, the text cut short, bytes flipped or odd bytes put in
(NUL, 0xFF, broken UTF-8), the object nested or made a list, or a key set
just past what fsdp-gen builds (issue 27): a depth past its IR bound,
heads that do not divide the width, a rope_theta or an epsilon that is no
finite f32, a vocabulary past i32's ids, a dropout above 1. Every such
value is refused quickly (none is a model that would be built slowly). Each mutant
runs `fsdp-gen --config FILE` (with --describe for half of them). A run
must succeed or reject cleanly (fuzzlib.py) and a rejection must name the
config file on its `error:` line; failures are saved under
test/fuzz/crashers/ as config-<hash>.json. Replay runs each saved file.

    fuzz_configs.py --bin build-asan/bin [--seed 1] [--cases 400]
                    [--time-budget 40] [--replay]
"""

import json
import os
import random
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fuzzlib  # noqa: E402

ROOT = fuzzlib.ROOT
INPUTS = os.path.join(ROOT, "test", "fsdp-gen", "Inputs")
SEEDS = ["gpt2-config.json", "llama-13b-config.json",
         "llama2-7b-config.json", "llama3-8b-config.json",
         "llama3-8b-config-v5.json", "llama3.1-8b-config.json",
         "mistral-7b-v0.3-config.json", "qwen2.5-7b-config.json",
         "qwen3-8b-config.json", "mixtral-8x7b-config.json",
         "qwen3-30b-a3b-config.json"]
# Small sizes, so that a GPT-2 seed that survives is built in moments.
SMALL = {"n_layer": 1, "n_embd": 8, "n_head": 2, "vocab_size": 16,
         "n_positions": 8, "n_ctx": 8, "num_hidden_layers": 1,
         "hidden_size": 8, "num_attention_heads": 2,
         "num_key_value_heads": 1, "intermediate_size": 16,
         "max_position_embeddings": 8, "max_sequence_length": 8,
         "head_dim": 4, "sliding_window": 4, "max_window_layers": 1,
         "num_local_experts": 4, "num_experts": 4, "num_experts_per_tok": 2,
         "moe_intermediate_size": 16}
VALUES = ["0", "-1", "1", "2147483648", "9223372036854775807",
          "18446744073709551616", "1e308", "-1e-308", "NaN", "Infinity",
          '""', "null", "[]", "{}", "true", "false", '"x"', "0.5",
          '"' + "a" * 5000 + '"']
ODD = [b"\x00", b"\xff", b"\xc3", b"\xe2\x82", b"\\", b'"', b"{", b"}"]
# Values just past fsdp-gen's rules, per key: each must be refused, by key,
# before any IR is built. Depths are past the IR bound of every family
# (116508 MLP layers, the most); heads do not divide the seeds' widths of 8.
BOUNDS = {
    "n_layer": ["116509", "1048576"],
    "num_hidden_layers": ["116509", "1048576"],
    "n_head": ["3", "5", "7"],
    "num_attention_heads": ["3", "5", "7"],
    "num_key_value_heads": ["3", "4"],
    "rope_theta": ["1e308", "3.5e38", "1e-50"],
    # transformers 5's nesting: theta and scaling type inside one object.
    "rope_parameters": ['{"rope_type": "default", "rope_theta": 1e308}',
                        '{"rope_type": "default", "rope_theta": -1}',
                        '{"rope_type": "default", "rope_theta": "x"}',
                        '{"rope_type": "llama3", "factor": 8.0}',
                        '{"rope_type": "dynamic", "factor": 2.0}',
                        '{"rope_type": "yarn", "factor": -1, '
                        '"original_max_position_embeddings": 8}',
                        '{"rope_type": 7}', '[]'],
    # transformers 4.x's rope scaling object.
    "rope_scaling": ['{"rope_type": "llama3", "factor": 8.0, '
                     '"low_freq_factor": 4.0, "high_freq_factor": 1.0}',
                     '{"type": "linear", "factor": 0}',
                     '{"rope_type": "longrope"}', '{"type": "linear"}'],
    "rms_norm_eps": ["1e-50", "1e39"],
    "initializer_range": ["1e39"],
    "vocab_size": ["2147483648"],
    "attn_pdrop": ["1.5"],
    "attention_dropout": ["2"],
    # Mistral's window, Qwen's head size and flags (issue 30).
    "sliding_window": ["-1", "0.5", '"4"'],
    "head_dim": ["3", "-4", "2147483648"],
    "attention_bias": ['"yes"', "1"],
    "use_sliding_window": ["true"],
    # The experts' keys (issue 31): a top k above the experts, random
    # jitter, dense layers, counts past int64.
    "num_experts_per_tok": ["5", "0"],
    "num_local_experts": ["9223372036854775807", "0"],
    "num_experts": ["9223372036854775807", "0"],
    "moe_intermediate_size": ["9223372036854775807"],
    "router_jitter_noise": ["0.01", '"x"'],
    "decoder_sparse_step": ["2", "0"],
    "mlp_only_layers": ["[0]", '"x"'],
    "router_aux_loss_coef": ["-1", "1e309"],
}


def make_seeds():
    seeds = []
    for name in SEEDS:
        config = json.load(open(os.path.join(INPUTS, name)))
        for key, value in SMALL.items():
            if key in config:
                config[key] = value
        seeds.append(json.dumps(config, indent=1).encode())
    return seeds


def mutate_keys(rng, data):
    """A structural mutation of the parsed object; the text if it no longer
    parses."""
    try:
        config = json.loads(data)
    except ValueError:
        return data
    if not isinstance(config, dict) or not config:
        return data
    key = rng.choice(sorted(config))
    kind = rng.randrange(5)
    if kind == 0:
        text = json.dumps(config).replace(
            json.dumps(key) + ": " + json.dumps(config[key]),
            json.dumps(key) + ": " + rng.choice(VALUES), 1)
        return text.encode()
    if kind == 1:
        del config[key]
    elif kind == 2:
        config["fuzz_%d" % rng.randrange(100)] = rng.randrange(10)
    elif kind == 3:
        config = {"wrapped": config} if rng.random() < 0.5 else [config]
    else:
        config[key] = rng.choice([config[key], str(config[key]), [config[key]]])
    return json.dumps(config).encode()


def mutate_bounds(rng, data):
    """A key of BOUNDS the object has set to one of its values (as text, so
    that 1e308 stays a JSON number)."""
    try:
        config = json.loads(data)
    except ValueError:
        return data
    keys = sorted(k for k in BOUNDS if isinstance(config, dict) and k in config)
    if not keys:
        return data
    key = rng.choice(keys)
    text = json.dumps(config)
    return text.replace(
        json.dumps(key) + ": " + json.dumps(config[key]),
        json.dumps(key) + ": " + rng.choice(BOUNDS[key]), 1).encode()


def mutate(rng, data):
    kind = rng.randrange(5)
    if kind == 4:
        return mutate_bounds(rng, data)
    if kind <= 1:
        return mutate_keys(rng, data)
    if kind == 2 and data:
        return data[:rng.randrange(len(data))]
    at = rng.randrange(len(data) + 1)
    return data[:at] + rng.choice(ODD) * rng.randint(1, 3) + data[at:]


def check_config(bin_dir, path, describe, timeout, env, work):
    out_path = os.path.join(work, os.path.basename(path) + ".mlir")
    argv = [os.path.join(bin_dir, "fsdp-gen"), "--config", path, "-o",
            out_path]
    if describe:
        argv.append("--describe")
    verdict, out = fuzzlib.run_tool(argv, timeout, env)
    if verdict is None and "error:" in out:
        if not any("error:" in line and path in line
                   for line in out.splitlines()):
            verdict = "rejected without an error line naming the config"
        elif os.path.exists(out_path):
            verdict = "rejected but left an output file"
    if os.path.exists(out_path):
        os.unlink(out_path)
    return verdict, out


def main():
    args = fuzzlib.arguments(__doc__, 400)
    env = fuzzlib.environment()
    work = args.work or tempfile.mkdtemp(prefix="fuzz-configs-")
    os.makedirs(work, exist_ok=True)
    if args.replay:
        def both_ways(path):
            for describe in (False, True):
                verdict, out = check_config(args.bin, path, describe,
                                            args.timeout, env, work)
                if verdict is not None:
                    return verdict, out
            return None, out
        return fuzzlib.replay(args, "config", ".json", both_ways)
    seeds = make_seeds()
    campaign = fuzzlib.Campaign(args, "config")

    def case(i):
        rng = random.Random(args.seed * 1000003 + i)
        data = rng.choice(seeds)
        for _ in range(rng.randint(1, 3)):
            data = mutate(rng, data)
        describe = rng.random() < 0.5
        path = os.path.join(work, "case-%d.json" % i)
        with open(path, "wb") as f:
            f.write(data)
        verdict, out = check_config(args.bin, path, describe, args.timeout,
                                    env, work)
        os.unlink(path)
        return verdict, out, data, ".json", \
            "config case %d (seed %d%s)" % (
                i, args.seed, ", --describe" if describe else "")

    return campaign.run(case, args.cases)


if __name__ == "__main__":
    sys.exit(main())
