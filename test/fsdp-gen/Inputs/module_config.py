"""Prints the Hugging Face config a module carries (its `fsdp.hf_config`
string attribute), MLIR's string escapes (\\22, \\5C, \\0A: two hex
digits) undone: the config.json text fsdp-gen attached.

usage: module_config.py MODULE.mlir
"""
import re
import sys

text = open(sys.argv[1]).read()
match = re.search(r'fsdp\.hf_config = "((?:[^"\\]|\\[0-9A-Fa-f]{2}|\\.)*)"',
                  text)
if not match:
    sys.exit("module_config: %s carries no fsdp.hf_config" % sys.argv[1])
raw = re.sub(r"\\([0-9A-Fa-f]{2})", lambda m: chr(int(m.group(1), 16)),
             match.group(1))
print(raw.replace("\\\\", "\\"))
