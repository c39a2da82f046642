#!/usr/bin/env python3
"""Writes a tiny model's config.json with Hugging Face transformers itself
(whichever version is installed), for fsdp-gen --config to read:

  write_hf_config.py llama|gpt2|mixtral|qwen3_moe DIR
"""
import sys

import transformers

kind, out = sys.argv[1:3]
if kind == "llama":
    config = transformers.LlamaConfig(
        hidden_size=64, intermediate_size=172, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, vocab_size=256,
        max_position_embeddings=128, rope_theta=500000.0, dtype="bfloat16")
elif kind == "mixtral":
    config = transformers.MixtralConfig(
        hidden_size=64, intermediate_size=96, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, vocab_size=256,
        num_local_experts=4, num_experts_per_tok=2,
        max_position_embeddings=128)
elif kind == "qwen3_moe":
    config = transformers.Qwen3MoeConfig(
        hidden_size=64, intermediate_size=96, moe_intermediate_size=32,
        num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
        vocab_size=256, num_experts=8, num_experts_per_tok=2,
        norm_topk_prob=True, max_position_embeddings=128)
else:
    config = transformers.GPT2Config(
        n_layer=2, n_embd=64, n_head=4, vocab_size=256, n_positions=128,
        initializer_range=0.01, bos_token_id=0, eos_token_id=0)
config.save_pretrained(out)
print(f"write_hf_config: {kind} by transformers {transformers.__version__}")
