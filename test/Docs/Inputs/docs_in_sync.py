#!/usr/bin/env python3
"""Checks claims of README.md and docs/*.md against the code (issue 27).

Each check prints `ok: ...` or `FAILED: ...`; the exit status is 1 when
any failed. The checks:

  plan-version   docs/plan-format.md's title and header table give the
                 version the code writes (kPlanVersion in PlanFormat.h).
  mutant-count   docs/testing.md's count of mutants is the number in
                 test/mutation/mutants.txt.
  blocked-cuda   docs/cuda.md's statement that the blocked attention
                 kernels are dispatched on the GPU: the plan has the
                 kernels, the shared dispatch calls them, the CUDA backend
                 binds the dispatch's kernel list.
  not-run        Until GPU results exist (docs/cuda.md's section
                 "Measured on a GPU", where bench/gpu/check.sh's results
                 go), README.md and docs/cuda.md say that the CUDA backend
                 has not run on a GPU; once they do, neither says so any
                 more. README.md and docs/runtime.md say that the cluster
                 lines have not run on a real cluster.
  paths          Every repository path README.md and docs/*.md name
                 exists (docs/runtime.md's are also read from runtime/,
                 build outputs from the build).
  options        Every option of fsdp-run, fsdp-gen and fsdp-opt (and of
                 fsdp-opt's passes, `--pass="key=value ..."`) in a
                 command of README.md or docs/*.md (a fenced block's, or
                 an inline code span starting with the tool) is one the
                 tool's --help lists: no removed option (--save) stays in
                 the docs.

Usage: docs_in_sync.py --root SRC --bin BUILD/bin [--docs FILE ...]
"""

import argparse
import glob
import os
import re
import shlex
import subprocess
import sys

failures = []


def report(ok, what):
    print(("ok: " if ok else "FAILED: ") + what)
    if not ok:
        failures.append(what)


def read(root, path):
    return open(os.path.join(root, path), encoding="utf-8").read()


def check_plan_version(root):
    code = re.search(r"kPlanVersion = (\d+);",
                     read(root, "runtime/include/fsdp/runtime/PlanFormat.h"))
    doc = read(root, "docs/plan-format.md")
    title = re.search(r"^# Plan file format \(version (\d+)\)", doc)
    table = re.search(r"^\| 8 \| u32 \| version \((\d+)\) \|", doc, re.M)
    want = code.group(1)
    for name, found in (("title", title), ("header table", table)):
        report(found is not None and found.group(1) == want,
               f"plan-version: docs/plan-format.md's {name} says version "
               f"{found.group(1) if found else '(none)'}, the code writes "
               f"{want} (kPlanVersion)")


def check_mutant_count(root):
    count = len(re.findall(r"^\[[\w.-]+\]$",
                           read(root, "test/mutation/mutants.txt"), re.M))
    claims = re.findall(r"`test/mutation/mutants.txt` holds (\d+) mutants",
                        read(root, "docs/testing.md"))
    report(claims and all(int(c) == count for c in claims),
           f"mutant-count: docs/testing.md says "
           f"{', '.join(claims) or 'nothing'} "
           f"('`test/mutation/mutants.txt` holds N mutants'), the file "
           f"has {count}")


def check_blocked_cuda(root):
    doc = read(root, "docs/cuda.md")
    # The kernel table and the dispatch name lists are generated into
    # KernelTable.inc (fsdp-tblgen), which PlanFormat.h and
    # KernelDispatch.h include.
    plan = read(root, "runtime/include/fsdp/runtime/KernelTable.inc")
    dispatch = read(root, "runtime/include/fsdp/runtime/exec/KernelDispatch.h")
    backend = read(root, "runtime/src/cuda/CudaBackend.cpp")
    claims = ("`attention_blocked`" in doc
              and "not yet wired" not in doc.lower())
    code = (all(f'"{k}"' in plan for k in ("attention_blocked",
                                           "attention_backward_blocked"))
            # runCompute's cases, generated from the records' `call`
            and "case plan::Opcode::AttentionBlocked:" in plan
            and "case plan::Opcode::AttentionBackwardBlocked:" in plan
            and "FSDP_KERNEL_CALLS" in dispatch
            and re.search(r"GEMM_KERNELS\(X\)[^#]*X\(blockedAttentionForward\)"
                          r"[^#]*X\(blockedAttentionBackward\)", plan)
            and "FSDP_RUNTIME_GEMM_KERNELS(FSDP_KERNEL)" in backend)
    report(claims and bool(code),
           "blocked-cuda: docs/cuda.md says the plan's attention_blocked "
           "kernels are dispatched on the GPU "
           f"({'it does' if claims else 'it does not'}), and the code "
           f"{'does' if code else 'does not'} dispatch them")


NOT_RUN_GPU = {
    "README.md": r"has not (yet )?run on a GPU",
    "docs/cuda.md": r"never run on a GPU yet",
}
NOT_RUN_CLUSTER = {
    "README.md": r"not (yet )?run on a real cluster",
    "docs/runtime.md": r"not (yet )?run on a real cluster",
}
GPU_RESULTS = re.compile(r"^## Measured on a GPU$", re.M)


def check_not_run(root):
    measured = GPU_RESULTS.search(read(root, "docs/cuda.md")) is not None
    for path, phrase in NOT_RUN_GPU.items():
        says = re.search(phrase, re.sub(r"\s+", " ", read(root, path)),
                         re.I) is not None
        report(says != measured,
               f"not-run: {path} {'says' if says else 'does not say'} "
               f"'{phrase}' and docs/cuda.md "
               f"{'has' if measured else 'has no'} GPU results")
    for path, phrase in NOT_RUN_CLUSTER.items():
        report(re.search(phrase, re.sub(r"\s+", " ", read(root, path)),
                         re.I) is not None,
               f"not-run: {path} says '{phrase}'")


TOP = r"(?:scripts|bench|test|docs|data|runtime|lib|include|tools|\.ci)"
PATH_RE = re.compile(r"(?<![\w./-])((?:\{[\w/,.-]+\}/|" + TOP +
                     r"/)[\w.{},/*-]*)")
# Named as what will exist, not what does: plans and the prebuilt runtime bench/gpu/prepare.sh writes (git-ignored;
# the device tool's carry list names them without the slash), crasher file
# name prefixes.
FUTURE_PATHS = {"bench/gpu/plans/", "test/fuzz/crashers/plan-",
                "test/fuzz/crashers/model-", "test/fuzz/crashers/data-",
                "bench/gpu/plans", "bench/gpu/prebuilt/", "bench/gpu/prebuilt"}


def expand(path):
    m = re.search(r"\{([^}]*)\}", path)
    if not m:
        return [path]
    return [q for alt in m.group(1).split(",")
            for q in expand(path[:m.start()] + alt + path[m.end():])]


def check_paths(root, bindir, docs):
    build = os.path.dirname(os.path.abspath(bindir))
    missing = []
    for doc in docs:
        bases = [root, build] + ([os.path.join(root, "runtime")]
                                 if doc == "docs/runtime.md" else [])
        for number, line in enumerate(read(root, doc).split("\n"), 1):
            for m in PATH_RE.finditer(line):
                path = m.group(1).rstrip(".,);:")
                if path.count("{") != path.count("}"):
                    continue
                for q in expand(path):
                    if q in FUTURE_PATHS or not re.match(TOP + "/", q):
                        continue
                    if not any(glob.glob(os.path.join(b, q)) for b in bases):
                        missing.append(f"{doc}:{number}: {q}")
    report(not missing, "paths: every repository path the docs name exists"
           + "".join("\n  " + m for m in missing))


TOOLS = ("fsdp-run", "fsdp-gen", "fsdp-opt")


def tool_options(bindir):
    """{tool: set of options}; fsdp-opt's also {pass: set of its keys}."""
    options, passes = {}, {}
    for tool in TOOLS:
        out = subprocess.run([os.path.join(bindir, tool), "--help"],
                             capture_output=True, text=True)
        text = out.stdout + out.stderr
        options[tool] = set(re.findall(r"(?<![\w-])(--?[a-z][\w-]*)", text))
        if tool == "fsdp-opt":
            current = None
            for line in text.split("\n"):
                top = re.match(r"^ {6}(--[\w-]+)", line)
                nested = re.match(r"^ {8}--([\w-]+)", line)
                if top:
                    current = passes.setdefault(top.group(1), set())
                elif nested and current is not None:
                    current.add(nested.group(1))
    return options, passes


INLINE_RE = re.compile(r"`((?:build/bin/)?(?:%s) [^`]*)`" % "|".join(TOOLS))


def commands(root, doc):
    """The logical lines of doc's fenced blocks, and the inline code spans
    outside them that start with a tool: [(line number, text)]."""
    text = read(root, doc)
    lines, out, inside, pending, first = text.split("\n"), [], False, "", 0
    outside = []
    for number, line in enumerate(lines, 1):
        if line.lstrip().startswith("```"):
            inside, pending = not inside, ""
            outside.append("")
            continue
        if not inside:
            outside.append(line)
            continue
        outside.append("")
        if not pending:
            first = number
        if line.endswith("\\"):
            pending += line[:-1] + " "
            continue
        out.append((first, pending + line))
        pending = ""
    prose = "\n".join(outside)
    for m in INLINE_RE.finditer(prose):
        out.append((prose.count("\n", 0, m.start()) + 1,
                    m.group(1).replace("\n", " ")))
    return out


def check_options(root, bindir, docs):
    options, passes = tool_options(bindir)
    bad, seen = [], 0
    for doc in docs:
        for number, line in commands(root, doc):
            try:
                lexer = shlex.shlex(line.replace("[", " ").replace("]", " "),
                                    posix=True, punctuation_chars="|;&<>")
                lexer.whitespace_split = True
                tokens = list(lexer)
            except ValueError:
                continue
            tool = None
            for token in tokens:
                if token in ("|", ";", "&&", "||"):
                    tool = None
                elif os.path.basename(token) in TOOLS:
                    tool = os.path.basename(token)
                    seen += 1
                elif tool and token.startswith("-") and not re.match(
                        r"^-\d", token):
                    name, eq, value = token.partition("=")
                    if name not in options[tool]:
                        bad.append(f"{doc}:{number}: {tool} {name}")
                    elif tool == "fsdp-opt" and eq and name in passes \
                            and passes[name]:
                        for pair in value.split():
                            key = pair.split("=")[0]
                            if key != "..." and key not in passes[name]:
                                bad.append(f"{doc}:{number}: fsdp-opt "
                                           f"{name} option {key}")
    report(seen > 0 and not bad,
           f"options: the {seen} commands of fsdp-run, fsdp-gen and "
           "fsdp-opt in the docs use options the tools have"
           + "".join("\n  " + b for b in bad))


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--root", required=True)
    parser.add_argument("--bin", required=True)
    parser.add_argument("--docs", nargs="*",
                        help="files to check for paths and options "
                        "(default: README.md and docs/*.md)")
    args = parser.parse_args()
    root = os.path.abspath(args.root)
    docs = args.docs or ["README.md"] + sorted(
        os.path.relpath(p, root)
        for p in glob.glob(os.path.join(root, "docs", "*.md")))
    check_plan_version(root)
    check_mutant_count(root)
    check_blocked_cuda(root)
    check_not_run(root)
    check_paths(root, args.bin, docs)
    check_options(root, args.bin, docs)
    print(f"docs-in-sync: {len(failures)} failed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
