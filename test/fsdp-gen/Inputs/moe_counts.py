#!/usr/bin/env python3
"""Counts a mixture of experts' parameters with transformers itself: the
model of a config.json built on the meta device (no memory), its total
and the parameters one token runs through (all but num_experts - top_k of
each layer's experts, measured from the experts' own tensors):

  moe_counts.py CONFIG.json

prints "transformers: T parameters, A active per token".
"""
import json
import sys

import torch
import transformers

values = json.load(open(sys.argv[1]))
config_class = transformers.CONFIG_MAPPING[values["model_type"]]
config = config_class.from_json_file(sys.argv[1])
with torch.device("meta"):
    model = transformers.AutoModelForCausalLM.from_config(config)
total = sum(p.numel() for p in model.parameters())
experts = getattr(config, "num_local_experts", None) or config.num_experts
top_k = config.num_experts_per_tok
idle = 0
for name, module in model.named_modules():
    if name.endswith("mlp.experts"):
        layer = sum(p.numel() for p in module.parameters())
        assert layer % experts == 0, (name, layer, experts)
        idle += (experts - top_k) * (layer // experts)
print("transformers: %d parameters, %d active per token" % (total, total - idle))
