#!/usr/bin/env python3
"""Runs the commands of README.md's "Using the tools" block as written.

The block is parsed from README.md (the first fenced block after the
heading "## Using the tools"); lines joined by a trailing backslash are
one command, `#` lines are comments. The commands run in order, with
bash, in an empty work directory that looks like the repository's root:
`build/bin` is the build's tools, `data/` a copy of the repository's,
every other top-level entry of the repository a link to it. A command
that exits non-zero fails the test, and so does one that names a file
(an input operand, or the value of an input option such as --data) that
no earlier line made and the repository does not ship, whether the line
runs here or not: a command added with a file nobody has fails at once.

Lines ending in one of the MARKERS comments are not run where their need
is missing (GPUs, a cluster, matplotlib); their input files are still
checked. SUBSTITUTIONS, each printed when applied, make the run small
enough for CI; everything else runs exactly as README.md writes it. A
substitution that no longer applies to any line is an error (the README
changed under it).

Usage: readme_commands.py --root SRC --bin BUILD/bin --work DIR [--readme F]
"""

import argparse
import importlib.util
import os
import re
import shlex
import shutil
import subprocess
import sys
import time

# A trailing comment that says what the line needs beyond this machine,
# and whether that is here.
MARKERS = {
    "needs GPUs": lambda: False,
    "needs a cluster": lambda: False,
    "needs matplotlib": lambda: importlib.util.find_spec("matplotlib")
    is not None,
}

# (pattern, replacement, why): the only changes made to a command before
# it runs. Explicit, so that what CI runs is visibly README.md's line.
SUBSTITUTIONS = [
    (r"--steps \d\d+", "--steps 5",
     "fewer steps: CI checks that the command runs, not what it trains to"),
]

# Options whose value is a file a command reads, and ones whose value it
# writes (never checked). Other operands are files when they look like
# one (a path with a slash, or a name with one of FILE_SUFFIXES).
INPUT_OPTIONS = {"--data", "--val-data", "--init-from", "--resume",
                 "--config", "--hostfile"}
OUTPUT_OPTIONS = {"-o", "--output", "--export", "--trace", "--report-json",
                  "--checkpoint-dir", "--flight-recorder", ">", ">>"}
FILE_SUFFIXES = ("mlir", "plan", "txt", "json", "bin", "safetensors", "svg",
                 "png", "py", "sh")
FILE_RE = re.compile(r"^[\w./+-]+\.(%s)$" % "|".join(FILE_SUFFIXES))
# Launchers and shell words whose operands are not files of ours.
NOT_FILES = {"|", "||", "&&", ";", "<"}


def block(readme):
    """The "Using the tools" block: [(line number, command)]."""
    lines = open(readme, encoding="utf-8").read().split("\n")
    try:
        at = lines.index("## Using the tools")
        start = next(i for i in range(at, len(lines))
                     if lines[i].startswith("```"))
        end = next(i for i in range(start + 1, len(lines))
                   if lines[i].startswith("```"))
    except (ValueError, StopIteration):
        sys.exit(f"readme-commands: {readme}: no fenced block after "
                 "'## Using the tools'")
    commands, pending, first = [], "", 0
    for number in range(start + 1, end):
        line = lines[number]
        if not pending and (not line.strip() or line.lstrip().startswith("#")):
            continue
        if not pending:
            first = number + 1
        if line.endswith("\\"):
            pending += line[:-1] + " "
            continue
        commands.append((first, pending + line))
        pending = ""
    if pending:
        sys.exit(f"readme-commands: {readme}:{first}: a continued line ends "
                 "the block")
    return commands


def marker(command):
    for name in MARKERS:
        if re.search(r"#\s*" + re.escape(name) + r"\s*$", command):
            return name
    return None


def operands(command):
    """(inputs, outputs): the files a command reads and writes."""
    lexer = shlex.shlex(command, posix=True, punctuation_chars=True)
    lexer.whitespace_split = True
    tokens = list(lexer)
    inputs, outputs = [], []
    i = 0
    while i < len(tokens):
        token = tokens[i]
        name, eq, value = token.partition("=")
        if token in OUTPUT_OPTIONS and i + 1 < len(tokens):
            outputs.append(tokens[i + 1])
            i += 2
            continue
        if token in INPUT_OPTIONS and i + 1 < len(tokens):
            inputs.append(tokens[i + 1])
            i += 2
            continue
        if token.startswith("-") and eq:
            if name in INPUT_OPTIONS:
                inputs.append(value)
            elif name in OUTPUT_OPTIONS:
                outputs.append(value)
        elif (token not in NOT_FILES and not token.startswith("-")
              and "=" not in token
              and ("/" in token or FILE_RE.match(token))):
            inputs.append(token)
        i += 1
    return inputs, outputs


def substitute(command):
    for pattern, replacement, why in SUBSTITUTIONS:
        changed = re.sub(pattern, replacement, command)
        if changed != command:
            print(f"  substituted {pattern!r} -> {replacement!r} ({why})")
            command = changed
    return command


def workdir(root, bindir, work):
    """An empty directory that looks like the repository's root."""
    if os.path.exists(work):
        shutil.rmtree(work)
    os.makedirs(os.path.join(work, "build"))
    os.symlink(os.path.abspath(bindir), os.path.join(work, "build", "bin"))
    lib = os.path.join(os.path.dirname(os.path.abspath(bindir)), "lib")
    if os.path.isdir(lib):  # the CUDA module, where the build has one
        os.symlink(lib, os.path.join(work, "build", "lib"))
    for entry in os.listdir(root):
        if entry.startswith(".") or entry.startswith("build"):
            continue
        if entry == "data":  # a copy: a command cannot touch the source
            shutil.copytree(os.path.join(root, entry),
                            os.path.join(work, entry))
        else:
            os.symlink(os.path.join(root, entry), os.path.join(work, entry))


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--root", required=True)
    parser.add_argument("--bin", required=True)
    parser.add_argument("--work", required=True)
    parser.add_argument("--readme")
    parser.add_argument("--timeout", type=float, default=120)
    args = parser.parse_args()
    root = os.path.abspath(args.root)
    readme = args.readme or os.path.join(root, "README.md")
    workdir(root, args.bin, args.work)
    env = dict(os.environ)
    # README's note under the block: as root Open MPI wants these, and
    # more ranks than cores want oversubscription; one OpenMP thread a
    # rank. Threads that wait passively: fsdp-run's default of a thread a
    # core spins otherwise, 10x slower on a machine busy with other tests.
    env.update({"OMP_WAIT_POLICY": "passive",
                "OMPI_ALLOW_RUN_AS_ROOT": "1",
                "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1",
                "OMPI_MCA_rmaps_base_oversubscribe": "1",
                "OMPI_MCA_hwloc_base_binding_policy": "none",
                "OMP_NUM_THREADS": "1"})
    failures, made_elsewhere = [], set()
    ran = skipped = 0
    start = time.time()
    commands = block(readme)
    for pattern, _, _ in SUBSTITUTIONS:
        if not any(re.search(pattern, c) for _, c in commands):
            failures.append(f"substitution {pattern!r} applies to no line: "
                            "remove it or fix it")
    for number, command in commands:
        where = f"{os.path.basename(readme)}:{number}"
        need = marker(command)
        runs = need is None or MARKERS[need]()
        inputs, outputs = operands(command)
        missing = [f for f in inputs
                   if not os.path.exists(os.path.join(args.work, f))
                   and not (f in made_elsewhere and not runs)]
        if missing:
            failures.append(f"{where}: {', '.join(missing)} neither ships "
                            f"nor is made by an earlier line: {command}")
            print(f"FAIL {where}: missing {', '.join(missing)}")
            continue
        if not runs:
            skipped += 1
            made_elsewhere.update(outputs)
            print(f"skip {where} ({need}): {command}")
            continue
        print(f"run  {where}: {command}")
        sys.stdout.flush()
        to_run = substitute(command)
        t0 = time.time()
        try:
            result = subprocess.run(
                ["bash", "-c", "set -o pipefail\n" + to_run], cwd=args.work,
                env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                text=True, timeout=args.timeout)
            rc, err = result.returncode, result.stderr
        except subprocess.TimeoutExpired as e:
            rc, err = "timeout", (e.stderr or b"").decode(errors="replace")
        ran += 1
        print(f"  exit {rc} in {time.time() - t0:.1f} s")
        if rc != 0:
            failures.append(f"{where}: exit {rc}: {command}\n"
                            + "\n".join(err.splitlines()[-15:]))
    print(f"readme-commands: {ran} run, {skipped} not run here, "
          f"{len(failures)} failed, {time.time() - start:.1f} s")
    for failure in failures:
        print("FAILED " + failure)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
