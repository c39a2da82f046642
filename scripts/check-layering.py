#!/usr/bin/env python3
"""Fails when a compiler library includes a header it does not link.

A header under include/fsdp/X belongs to the library whose sources are in
lib/X (or, where lib/X holds one library in a subfolder, that one:
include/fsdp/Conversion is lib/Conversion/FSDPToRuntime's). The rule, for
every header under include/fsdp and every source under lib/:

  * each folder of include/fsdp that holds a header has a library under
    lib/ (a header under include/ that only lib/ defines is reachable from
    a library that does not link its definition: ByteSize.h was, in
    include/fsdp/Dialect/FSDP/Transforms, used by the runtime dialect's
    passes through a link to all the fsdp passes);
  * a file of library A that includes "fsdp/Y/..." needs Y's library to be
    A or among A's dependencies (direct or not); "fsdp/runtime/..." is the
    plan format, which needs fsdp_plan_format.

The libraries and their links come from the build (lib/CMakeLists.txt
writes them to library-graph.txt: one line per library, its name, its
folder, its links separated by ';'), so the check reads what CMake links,
not a copy of it.

Usage: check-layering.py --root SOURCE_DIR --graph BUILD/library-graph.txt
"""

import argparse
import pathlib
import re
import sys

INCLUDE = re.compile(r'^\s*#\s*include\s+"(fsdp/[^"]+)"', re.M)
# The runtime's headers the compiler may see, and the target that exposes
# them (runtime/CMakeLists.txt).
RUNTIME_PREFIX, RUNTIME_TARGET = "fsdp/runtime/", "fsdp_plan_format"


def read_graph(path):
    """{library: (folder, [links])} from library-graph.txt."""
    graph = {}
    for line in pathlib.Path(path).read_text().splitlines():
        if not line.strip():
            continue
        name, folder, *links = line.split(" ", 2)
        graph[name] = (folder, links[0].split(";") if links else [])
    return graph


def closure(graph, name):
    """`name` and every library it links, directly or not."""
    seen, todo = set(), [name]
    while todo:
        lib = todo.pop()
        if lib in seen:
            continue
        seen.add(lib)
        todo.extend(graph[lib][1] if lib in graph else [])
    return seen


def owners(graph, folder):
    """The libraries of lib/<folder>: the one there, else those below."""
    exact = [n for n, (f, _) in graph.items() if f == "lib/" + folder]
    if exact:
        return exact
    return [n for n, (f, _) in graph.items()
            if f.startswith("lib/" + folder + "/")]


def library_of_source(graph, path):
    """The library whose folder is the longest prefix of lib/ path `path`."""
    best = None
    for name, (folder, _) in graph.items():
        if path.startswith(folder + "/") and (
                best is None or len(folder) > len(graph[best][0])):
            best = name
    return best


def check(root, graph):
    problems = []
    files = []  # (path relative to root, the libraries the file belongs to)
    for header in sorted((root / "include/fsdp").rglob("*.h")):
        rel = header.relative_to(root).as_posix()
        folder = header.parent.relative_to(root / "include/fsdp").as_posix()
        libs = owners(graph, folder)
        if not libs:
            problems.append(f"{rel}: no library under lib/{folder} defines it "
                            "(a header under include/fsdp/X belongs to the "
                            "library of lib/X)")
        files.append((rel, libs))
    for source in sorted((root / "lib").rglob("*")):
        if source.suffix in (".cpp", ".h"):
            rel = source.relative_to(root).as_posix()
            lib = library_of_source(graph, rel)
            files.append((rel, [lib] if lib else []))
    for rel, libs in files:
        text = (root / rel).read_text(errors="replace")
        for included in INCLUDE.findall(text):
            if included.startswith(RUNTIME_PREFIX):
                needed, where = [RUNTIME_TARGET], "the plan format"
            else:
                folder = included[len("fsdp/"):].rsplit("/", 1)[0]
                needed, where = owners(graph, folder), f"include/fsdp/{folder}"
            if not needed:
                continue  # reported above, at the header's own folder
            for lib in libs:
                if not closure(graph, lib) & set(needed):
                    problems.append(
                        f"{rel}: includes {included}, whose library "
                        f"({' or '.join(needed)}, for {where}) is not a "
                        f"dependency of {lib} ({graph[lib][0]}/CMakeLists.txt)")
    return files, problems


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--root", required=True, type=pathlib.Path)
    parser.add_argument("--graph", required=True)
    args = parser.parse_args()
    graph = read_graph(args.graph)
    files, problems = check(args.root, graph)
    for problem in problems:
        print("error: " + problem)
    print(f"check-layering: {len(files)} files of {len(graph)} libraries, "
          f"{len(problems)} problems")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
