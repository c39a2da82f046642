#!/usr/bin/env python3
"""Writes a copy of a config.json with one key set to a JSON value:

  edit_config.py IN OUT KEY JSON_VALUE
"""
import json
import sys

src, dst, key, value = sys.argv[1:5]
config = json.load(open(src))
config[key] = json.loads(value)
json.dump(config, open(dst, "w"), indent=2)
