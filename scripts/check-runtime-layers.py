#!/usr/bin/env python3
"""Holds the runtime's includes and CMake links to its layers.

  scripts/check-runtime-layers.py [RUNTIME_DIR]

RUNTIME_DIR (default: runtime/ next to this script's folder) has
layers.txt, src/ and include/fsdp/runtime/. layers.txt names each layer
and the layers it may use directly; a layer may use those and everything
below them. A file's layer is its folder: src/<layer>/... and
include/fsdp/runtime/<layer>/...; a file directly in src/ is layer
"runtime", a header directly in include/fsdp/runtime/ is "format".

Fails (exit 1, one line per problem, naming the file and line) on:
- an #include (quoted or angle) of a runtime file in a layer the
  including file's layer may not use (against the direction);
- an #include of a private header (src/<layer>/) from another folder, or
  from a public header (include/): other layers see only include/;
- an #include "fsdp/runtime/..." that names no file;
- a file in a folder that layers.txt does not name;
- a target_link_libraries in the runtime's CMakeLists.txt files that links
  a layer's library to one its layer may not use.
"""
import os
import re
import sys

INCLUDE = re.compile(r'^\s*#\s*include\s*([<"])([^">]+)[">]')
SOURCE_SUFFIXES = (".h", ".cpp", ".inc", ".cu", ".cuh")
LINK = re.compile(r"target_link_libraries\s*\(([^)]*)\)", re.S)
# A library's layer, by the name the CMake files give it.
TARGET_LAYER = [
    (re.compile(r"^fsdp_runtime_(\w+)$"), lambda m: m.group(1)),
    (re.compile(r"^fsdp_runtime$"), lambda m: "runtime"),
    (re.compile(r"^fsdp[_-]backend[_-](\w+)$"), lambda m: m.group(1)),
]


def read_layers(path):
    """{layer: set of layers it may use, itself and transitively}."""
    direct = {}
    with open(path) as f:
        for number, line in enumerate(f, 1):
            line = line.split("#", 1)[0].strip()
            if not line:
                continue
            name, _, uses = line.partition(":")
            name = name.strip()
            for used in uses.split():
                if used not in direct:
                    sys.exit(f"{path}:{number}: layer '{name}' uses "
                             f"'{used}', which is not declared above it")
            direct[name] = uses.split()
    closure = {}
    for name in direct:  # declared bottom first, so users come after
        closure[name] = {name}.union(*(closure[u] for u in direct[name]))
    return closure


def layer_of(rel):
    """The layer of a path relative to RUNTIME_DIR, or None outside."""
    parts = rel.split(os.sep)
    if parts[0] == "src":
        return "runtime" if len(parts) == 2 else parts[1]
    if parts[:3] == ["include", "fsdp", "runtime"]:
        return "format" if len(parts) == 4 else parts[3]
    return None


def resolve(root, rel, target):
    """The runtime file an include names (relative to root), or None."""
    if target.startswith("fsdp/runtime/"):
        path = os.path.join("include", target)
        return path if os.path.isfile(os.path.join(root, path)) else ""
    for base in (os.path.dirname(rel), "src"):
        path = os.path.normpath(os.path.join(base, target))
        if os.path.isfile(os.path.join(root, path)):
            return path
    return None


def check_includes(root, layers):
    problems = []
    for top in ("src", os.path.join("include", "fsdp", "runtime")):
        for folder, folders, files in os.walk(os.path.join(root, top)):
            folders.sort()
            for name in sorted(files):
                if name.endswith(SOURCE_SUFFIXES):
                    rel = os.path.relpath(os.path.join(folder, name), root)
                    problems += check_file(root, rel, layers)
    return problems


def check_file(root, rel, layers):
    layer = layer_of(rel)
    if layer not in layers:
        return [f"{rel}: in folder '{layer}', which layers.txt does not name"]
    problems = []
    with open(os.path.join(root, rel), errors="replace") as f:
        for number, line in enumerate(f, 1):
            match = INCLUDE.match(line)
            if not match:
                continue
            target = match.group(2)
            path = resolve(root, rel, target)
            where = f"{rel}:{number}: #include {target}"
            if path == "":
                problems.append(f"{where}: no such runtime header")
                continue
            if path is None:
                continue  # a system or third-party header
            used = layer_of(path)
            if used not in layers[layer]:
                problems.append(f"{where}: {layer}/ may not use {used}/ "
                                f"(against the direction of layers.txt)")
            elif path.startswith("src" + os.sep) and (
                    used != layer or not rel.startswith("src" + os.sep)):
                problems.append(f"{where}: a private header of {used}/ "
                                f"(src/); use its public headers in "
                                f"include/fsdp/runtime/{used}/")
    return problems


def target_layer(name):
    for pattern, layer in TARGET_LAYER:
        match = pattern.match(name)
        if match:
            return layer(match)
    return None


def check_links(root, layers):
    problems = []
    for folder, folders, files in os.walk(root):
        folders.sort()
        if "CMakeLists.txt" not in files:
            continue
        path = os.path.join(folder, "CMakeLists.txt")
        with open(path) as f:
            text = f.read()
        for match in LINK.finditer(re.sub(r"#[^\n]*", "", text)):
            words = match.group(1).split()
            user = target_layer(words[0]) if words else None
            if user not in layers:
                continue  # a tool or a test links whatever it uses
            for word in words[1:]:
                used = target_layer(word)
                if used and used not in layers[user]:
                    problems.append(
                        f"{os.path.relpath(path, root)}: {words[0]} links "
                        f"{word}: {user}/ may not use {used}/")
    return problems


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    root = sys.argv[1] if len(sys.argv) > 1 else os.path.join(
        here, "..", "runtime")
    layers = read_layers(os.path.join(root, "layers.txt"))
    problems = check_includes(root, layers) + check_links(root, layers)
    for problem in problems:
        print(problem, file=sys.stderr)
    if problems:
        print(f"runtime-layering: {len(problems)} problem(s); the layers "
              f"are in {os.path.join(root, 'layers.txt')}", file=sys.stderr)
        return 1
    print(f"runtime-layering: {len(layers)} layers, every include and link "
          f"in order")
    return 0


if __name__ == "__main__":
    sys.exit(main())
