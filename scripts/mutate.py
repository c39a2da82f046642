#!/usr/bin/env python3
"""Mutation testing of fsdp-mlir: does the test suite catch realistic bugs?

    scripts/mutate.py [--mutants FILE] [--work DIR] [--only ID,ID,...]
                      [--list] [--timeout SECONDS] [--keep-going]

Each mutant (test/mutation/mutants.txt) is one exact text replacement in
one source file, with the tests that should catch it (a lit --filter
regex, a ctest -R regex and/or a shell command run in the build
directory) and the reason it is a realistic bug. The
tool copies the working tree (tracked and untracked, not ignored files) to
a scratch directory (DIR/src, default $TMPDIR/fsdp-mutate), configures its
own build directory there once (DIR/src/build, no CUDA toolkit: the CUDA
kernels run through the CPU emulation test) and then, per mutant:

  1. applies the replacement to the scratch copy (the pattern must occur
     exactly once: "pattern not found" or "pattern ambiguous" is reported,
     never silently skipped),
  2. rebuilds the test tools incrementally with ninja,
  3. runs the mutant's tests,
  4. restores the file,

and prints KILLED (a selected test failed, or timed out), SURVIVED (all
passed), BUILD-FAILED (the mutant does not compile: fix the mutant) or
NOT-FOUND / AMBIGUOUS, with the time taken. Before any mutant it builds
the unmutated copy and runs every selection once (a failing baseline
would make every mutant look killed). The score is killed / (killed +
survived). Exit status: 0, or 1 when the baseline fails, or 2 when a
mutant could not be tried (not found, ambiguous, does not compile), so
that a stale mutant list is noticed.

The working tree itself is never modified.
"""
import argparse
import filecmp
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
LLVM = "/usr/lib/llvm-22"
# What the selected tests run: the tools lit substitutes and the CTest
# executables (not the CUDA backend, not the benchmarks).
TARGETS = ["fsdp-test-tools", "fsdp-shard-layout-test",
           "fsdp-cpu-kernels-test", "fsdp-data-test",
           "fsdp-cuda-emulation-test"]
FIELDS = {"file", "find", "replace", "lit", "ctest", "cmd", "build", "why"}


class Mutant:
    def __init__(self, ident, line):
        self.id, self.line = ident, line
        self.fields = {}

    def __getattr__(self, name):
        if name in FIELDS:
            return self.fields.get(name, "")
        raise AttributeError(name)


def unescape(text):
    """\\n is a newline, \\t a tab, \\\\ a backslash; nothing else changes."""
    out, i = [], 0
    while i < len(text):
        if text[i] == "\\" and i + 1 < len(text) and text[i + 1] in "nt\\":
            out.append({"n": "\n", "t": "\t", "\\": "\\"}[text[i + 1]])
            i += 2
        else:
            out.append(text[i])
            i += 1
    return "".join(out)


def parse(path):
    mutants, current = [], None
    for number, raw in enumerate(open(path), 1):
        line = raw.rstrip("\n")
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        m = re.fullmatch(r"\[([A-Za-z0-9_.-]+)\]", line.strip())
        if m:
            current = Mutant(m.group(1), number)
            mutants.append(current)
            continue
        m = re.fullmatch(r"([a-z]+): ?(.*)", line)
        if not m or current is None or m.group(1) not in FIELDS:
            sys.exit(f"mutate: {path}:{number}: expected '[id]' or one of "
                     f"{sorted(FIELDS)} followed by ':'")
        key, value = m.group(1), m.group(2)
        if key in current.fields:
            sys.exit(f"mutate: {path}:{number}: {key} given twice for "
                     f"{current.id}")
        current.fields[key] = unescape(value) if key in ("find", "replace") \
            else value.strip()
    seen = set()
    for m in mutants:
        if m.id in seen:
            sys.exit(f"mutate: {path}:{m.line}: mutant {m.id} defined twice")
        seen.add(m.id)
        for key in ("file", "find", "why"):
            if not m.fields.get(key):
                sys.exit(f"mutate: {path}:{m.line}: {m.id} has no {key}")
        if "replace" not in m.fields:
            sys.exit(f"mutate: {path}:{m.line}: {m.id} has no replace")
        if m.find == m.replace:
            sys.exit(f"mutate: {path}:{m.line}: {m.id} replaces its pattern "
                     f"by itself")
        if not m.lit and not m.ctest and not m.cmd and not m.build:
            sys.exit(f"mutate: {path}:{m.line}: {m.id} selects no test "
                     f"(lit:, ctest:, cmd: or build:)")
    return mutants


def sync(src):
    """Copies the working tree's tracked and untracked (not ignored) files
    into src, only those whose content differs (so ninja rebuilds only
    what changed since the last run)."""
    files = subprocess.run(
        ["git", "ls-files", "-z", "-co", "--exclude-standard"], cwd=ROOT,
        check=True, capture_output=True).stdout.decode().split("\0")
    copied = 0
    for rel in filter(None, files):
        a, b = os.path.join(ROOT, rel), os.path.join(src, rel)
        if not os.path.isfile(a) or os.path.islink(a):
            continue
        if os.path.exists(b) and filecmp.cmp(a, b, shallow=False):
            continue
        os.makedirs(os.path.dirname(b), exist_ok=True)
        # A fresh mtime, not the source's: ninja must see the copy as newer
        # than objects built from another version (another checkout's run).
        shutil.copyfile(a, b)
        shutil.copymode(a, b)
        copied += 1
    # Files the tree no longer has (a deleted test would still run).
    kept = set(filter(None, files))
    for dirpath, dirnames, filenames in os.walk(src):
        if os.path.relpath(dirpath, src) == ".":
            dirnames[:] = [d for d in dirnames if d != "build"]
        for name in filenames:
            rel = os.path.relpath(os.path.join(dirpath, name), src)
            if rel not in kept:
                os.unlink(os.path.join(src, rel))
                copied += 1
    return copied


def run(cmd, timeout, env=None, cwd=None):
    """Runs cmd in its own process group; returns (rc, output, seconds),
    rc None on timeout (the whole group is killed)."""
    start = time.time()
    proc = subprocess.Popen(cmd, cwd=cwd, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, start_new_session=True)
    try:
        out, _ = proc.communicate(timeout=timeout)
        return proc.returncode, out.decode(errors="replace"), \
            time.time() - start
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, _ = proc.communicate()
        return None, out.decode(errors="replace"), time.time() - start


def test_env():
    env = dict(os.environ)
    env.setdefault("OMPI_ALLOW_RUN_AS_ROOT", "1")
    env.setdefault("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")
    env.setdefault("OMP_NUM_THREADS", "1")
    return env


def run_tests(build, m, timeout):
    """(passed, detail): runs m's lit and ctest selections."""
    deadline = time.time() + timeout
    if m.lit:
        rc, out, _ = run([f"{LLVM}/bin/lit", "-q", "--filter", m.lit,
                          os.path.join(build, "test")],
                         max(1, deadline - time.time()), env=test_env())
        if rc is None:
            return False, "lit timed out"
        if "did not match any tests" in out:
            return None, f"lit filter '{m.lit}' matches no test"
        if rc != 0:
            failed = re.findall(r"^  (FSDP :: \S+)", out, re.M)
            return False, "lit: " + (", ".join(failed[:3]) or out[-200:])
    if m.ctest:
        rc, out, _ = run(["ctest", "--test-dir", build, "-R", m.ctest,
                          "-E", "^lit$"],
                         max(1, deadline - time.time()), env=test_env())
        if rc is None:
            return False, "ctest timed out"
        if "No tests were found" in out:
            return None, f"ctest -R '{m.ctest}' matches no test"
        if rc != 0:
            failed = re.findall(r"\d+ - (\S+) \(", out)
            return False, "ctest: " + (", ".join(failed[:3]) or out[-200:])
    if m.cmd:
        rc, out, _ = run(["bash", "-c", m.cmd], max(1, deadline - time.time()),
                         env=test_env(), cwd=build)
        if rc is None:
            return False, "cmd timed out"
        if rc == 127:
            return None, f"cmd '{m.cmd}' not found"
        if rc != 0:
            lines = [l for l in out.splitlines() if l.strip()]
            return False, "cmd: " + (lines[-1][:160] if lines else f"rc {rc}")
    return True, ""


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--mutants",
                    default=os.path.join(ROOT, "test/mutation/mutants.txt"))
    ap.add_argument("--work", default=os.path.join(tempfile.gettempdir(),
                                                   "fsdp-mutate"))
    ap.add_argument("--only", default="", help="comma-separated mutant ids")
    ap.add_argument("--list", action="store_true",
                    help="print the mutants and whether each pattern is "
                         "found, build nothing")
    ap.add_argument("--timeout", type=float, default=600,
                    help="seconds for one mutant's tests (a hang is killed)")
    ap.add_argument("--skip-baseline", action="store_true")
    args = ap.parse_args()

    mutants = parse(args.mutants)
    if args.only:
        wanted = set(args.only.split(","))
        unknown = wanted - {m.id for m in mutants}
        if unknown:
            sys.exit(f"mutate: unknown mutant(s): {', '.join(sorted(unknown))}")
        mutants = [m for m in mutants if m.id in wanted]

    # Patterns are checked against the working tree first: a stale mutant
    # is reported before anything is built.
    status = {}
    for m in mutants:
        path = os.path.join(ROOT, m.file)
        if not os.path.isfile(path):
            status[m.id] = ("NOT-FOUND", f"no file {m.file}")
            continue
        count = open(path).read().count(m.find)
        if count == 0:
            status[m.id] = ("NOT-FOUND", f"pattern not found in {m.file}")
        elif count > 1:
            status[m.id] = ("AMBIGUOUS", f"pattern found {count} times in "
                                         f"{m.file}")
    if args.list:
        for m in mutants:
            state = status.get(m.id, ("ok", ""))
            print(f"{m.id:34} {m.file:48} {state[0]} {state[1]}")
        bad = sum(1 for s in status.values())
        print(f"mutate: {len(mutants)} mutants, {bad} not applicable")
        return 2 if bad else 0

    # The build directory sits inside the copy as build/ does in a checkout,
    # and ccache's base directory is the scratch directory: compile lines
    # then read as they do in a checkout's build, and ccache serves the
    # unmutated objects from a checkout's earlier builds.
    src = os.path.join(args.work, "src")
    build = os.path.join(src, "build")
    os.environ.setdefault("CCACHE_BASEDIR", os.path.abspath(args.work))
    os.makedirs(src, exist_ok=True)
    print(f"mutate: scratch copy {src}: {sync(src)} files updated",
          flush=True)
    if not os.path.exists(os.path.join(build, "build.ninja")):
        rc, out, _ = run(["cmake", "-G", "Ninja", "-S", src, "-B", build,
                          "-DCMAKE_BUILD_TYPE=Release",
                          f"-DMLIR_DIR={LLVM}/lib/cmake/mlir",
                          f"-DLLVM_EXTERNAL_LIT={LLVM}/bin/lit",
                          "-DFSDP_ENABLE_CUDA=OFF"], 1800)
        if rc != 0:
            print(out[-3000:])
            sys.exit("mutate: cannot configure the scratch build")

    def ninja(timeout=3600):
        return run(["ninja", "-C", build] + TARGETS, timeout)

    t0 = time.time()
    rc, out, secs = ninja()
    if rc != 0:
        print(out[-3000:])
        sys.exit("mutate: the unmutated scratch copy does not build")
    print(f"mutate: scratch build up to date ({secs:.0f} s)", flush=True)

    todo = [m for m in mutants if m.id not in status]
    if not args.skip_baseline:
        selections = {}
        for m in todo:
            selections.setdefault((m.lit, m.ctest, m.cmd), m)
        for (lit, ctest, cmd), m in selections.items():
            ok, detail = run_tests(build, m, args.timeout)
            if ok is None:
                print(f"mutate: {detail} (selected by {m.id})")
                return 2
            if not ok:
                print(f"mutate: baseline fails for lit '{lit}' ctest "
                      f"'{ctest}' cmd '{cmd}' (as selected by {m.id}): "
                      f"{detail or 'failed'}")
                return 1
        print(f"mutate: baseline: {len(selections)} test selections pass "
              f"({time.time() - t0:.0f} s)", flush=True)

    results = []
    for m in mutants:
        if m.id in status:
            state, detail = status[m.id]
            print(f"{state:12} {m.id:34} {detail}", flush=True)
            results.append((m, state, 0.0, detail))
            continue
        path = os.path.join(src, m.file)
        original = open(path).read()
        if original.count(m.find) != 1:  # the scratch copy is the tree's
            state = "NOT-FOUND" if m.find not in original else "AMBIGUOUS"
            print(f"{state:12} {m.id:34} in the scratch copy", flush=True)
            results.append((m, state, 0.0, "scratch copy"))
            continue
        start = time.time()
        try:
            with open(path, "w") as f:
                f.write(original.replace(m.find, m.replace, 1))
            if m.build:  # the mutant must break this target's build
                rc, out, _ = run(["ninja", "-C", build, m.build],
                                 args.timeout)
                state = "KILLED" if rc != 0 else "SURVIVED"
                detail = f"ninja {m.build}: " + ("failed" if rc else "built")
            elif (built := ninja())[0] != 0:
                state = "BUILD-FAILED"
                errors = [l for l in built[1].splitlines() if "error" in l]
                detail = (errors[0] if errors else built[1][-300:]).strip()
            else:
                ok, detail = run_tests(build, m, args.timeout)
                state = "SURVIVED" if ok else \
                    "NO-TESTS" if ok is None else "KILLED"
        finally:
            with open(path, "w") as f:
                f.write(original)
        secs = time.time() - start
        print(f"{state:12} {m.id:34} {secs:6.1f} s  {detail}", flush=True)
        results.append((m, state, secs, detail))
    # The last restored file is rebuilt now, so that the scratch build is
    # the unmutated tree again.
    ninja()

    killed = sum(1 for r in results if r[1] == "KILLED")
    survived = [r for r in results if r[1] == "SURVIVED"]
    broken = [r for r in results if r[1] not in ("KILLED", "SURVIVED")]
    tried = killed + len(survived)
    print()
    print(f"mutate: {len(results)} mutants: {killed} killed, "
          f"{len(survived)} survived, {len(broken)} not tried; score "
          f"{killed}/{tried} = {100.0 * killed / max(tried, 1):.1f}% "
          f"({time.time() - t0:.0f} s)")
    for m, _, _, _ in survived:
        print(f"  survived: {m.id} ({m.file}): {m.why}")
    for m, state, _, detail in broken:
        print(f"  {state.lower()}: {m.id} ({m.file}): {detail}")
    return 2 if broken else 0


if __name__ == "__main__":
    sys.exit(main())
