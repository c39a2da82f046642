"""What fuzz_plans.py, fuzz_models.py and fuzz_data.py share: running one
case under a timeout, judging its outcome, saving crashers, replaying them.

A case passes when the tool succeeds (exit 0) or rejects its input cleanly
(exit 1 or 2 with an `error` line on stderr). Anything else fails it: a
signal, a sanitizer report (ASan and UBSan print "Sanitizer" / "runtime
error:"), another exit code, or running past the timeout.

A failing input is saved under test/fuzz/crashers/ (named by its content's
hash) with a .log of what happened, unless its output matches a pattern in
crashers/known.txt (a known bug that another change fixes: counted, not
fatal). Replay (--replay) runs every saved input again; a known one that
now passes is an XPASS, to be removed from known.txt with its file.
"""

import argparse
import concurrent.futures
import hashlib
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
CRASHERS = os.path.join(HERE, "crashers")
ROOT = os.path.join(HERE, "..", "..")
# The text most fuzzers train on, and the tiny GPT-2 several start from.
CORPUS = os.path.join(ROOT, "data", "corpus.txt")
TINY_GPT2 = ["gpt2", "--layers", "1", "--dim", "8", "--heads", "2", "--vocab",
             "256", "--seq", "4", "--batch", "2"]


def arguments(description, default_cases):
    p = argparse.ArgumentParser(description=description)
    p.add_argument("--bin", required=True, help="directory of the tools")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--cases", type=int, default=default_cases)
    p.add_argument("--time-budget", type=float, default=300.0,
                   help="stop starting cases after this many seconds")
    p.add_argument("--timeout", type=float, default=30.0,
                   help="seconds one tool run may take")
    p.add_argument("--jobs", type=int, default=6,
                   help="cases at a time (they mostly wait on MPI's start)")
    p.add_argument("--replay", action="store_true",
                   help="run the saved crashers instead of fresh cases")
    p.add_argument("--crashers", default=CRASHERS)
    p.add_argument("--work", default=None, help="scratch directory")
    p.add_argument("--valgrind", action="store_true",
                   help="run our tools under valgrind's memcheck (for a "
                   "build without sanitizers): a report fails the case")
    args = p.parse_args()
    if args.valgrind:
        use_valgrind(args.bin)
        args.timeout = max(args.timeout, VALGRIND_TIMEOUT)
    return args


# Errors that only show without ASan (its allocator and its
# allow_user_poisoning=0 change what a heap corruption touches) are caught by
# memcheck on the normal build: scripts/valgrind-check.sh, docs/testing.md.
VALGRIND = ["valgrind", "-q", "--error-exitcode=97",
            "--exit-on-first-error=yes", "--leak-check=no",
            "--suppressions=" + os.path.join(HERE, "valgrind.supp")]
VALGRIND_TIMEOUT = 300.0
_wrapped_bin = None


def use_valgrind(bin_dir):
    """From now on run_tool starts every tool of `bin_dir` (also one that
    mpirun starts) under valgrind."""
    global _wrapped_bin
    _wrapped_bin = os.path.realpath(bin_dir)


def wrap(argv):
    if _wrapped_bin is None:
        return argv
    out = []
    for a in argv:
        if os.path.dirname(os.path.realpath(a)) == _wrapped_bin and \
                os.path.basename(a).startswith("fsdp-"):
            out += VALGRIND
        out.append(a)
    return out


def known_patterns(crashers):
    path = os.path.join(crashers, "known.txt")
    patterns = []
    if os.path.exists(path):
        for line in open(path):
            line = line.rstrip("\n")
            if line and not line.startswith("#"):
                patterns.append(line.split("\t")[0])
    return patterns


def run_tool(argv, timeout, env=None, stop_after=None):
    """(verdict, output): verdict None when clean, else why it failed.

    Each run gets an Open MPI session directory of its own: concurrent MPI
    singletons share one under /tmp by default, and one that ends can
    remove it under another's start (orte_session_dir failed), a failure
    of the harness, not of the tool.

    stop_after: a run still going after that many seconds (a long but
    valid one) gets SIGTERM; stopping then with exit code 75 (fsdp-run's
    stop after a step) or 143 (during setup) is clean too."""
    session = tempfile.mkdtemp(prefix="fuzz-ompi-")
    env = dict(env if env is not None else os.environ,
               OMPI_MCA_orte_tmpdir_base=session)
    stopped = False
    try:
        with subprocess.Popen(wrap(argv), stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, env=env) as proc:
            try:
                if stop_after is not None:
                    try:
                        proc.wait(timeout=min(stop_after, timeout))
                    except subprocess.TimeoutExpired:
                        proc.send_signal(signal.SIGTERM)
                        stopped = True
                stdout, stderr = proc.communicate(timeout=timeout)
            except subprocess.TimeoutExpired:
                proc.kill()
                stdout, stderr = proc.communicate()
                out = (stdout or b"") + (stderr or b"")
                return "timeout after %gs" % timeout, out.decode(
                    "utf-8", "replace")
            p = subprocess.CompletedProcess(argv, proc.returncode, stdout,
                                            stderr)
    finally:
        shutil.rmtree(session, ignore_errors=True)
    err = p.stderr.decode("utf-8", "replace")
    out = p.stdout.decode("utf-8", "replace") + err
    # Stopped by our SIGTERM: after a step (75), or during setup
    # (128 + SIGTERM, temporaries removed).
    if stopped and p.returncode in (75, 128 + signal.SIGTERM) and \
            "Sanitizer" not in err and "runtime error:" not in err:
        return None, out
    if "Sanitizer" in err or "runtime error:" in err:
        return "sanitizer report (exit %d)" % p.returncode, out
    if _wrapped_bin is not None and p.returncode == 97:
        return "valgrind report", out
    if p.returncode < 0:
        return "killed by signal %d" % -p.returncode, out
    if p.returncode == 0:
        return None, out
    if p.returncode in (1, 2):
        if "error" in err:
            return None, out
        return "exit %d without an error line" % p.returncode, out
    return "exit %d" % p.returncode, out


def clip(output, keep=3000):
    """The head (a sanitizer's report and stack) and tail of an output."""
    if len(output) <= 2 * keep:
        return output
    return output[:keep] + "\n[...]\n" + output[-keep:]


def environment():
    env = dict(os.environ)
    # allow_user_poisoning=0: see scripts/build-sanitize.sh (LLVM's
    # allocator, instrumented here and not in libMLIR).
    env.setdefault("ASAN_OPTIONS",
                   "detect_leaks=0:halt_on_error=1:exitcode=99:"
                   "allow_user_poisoning=0")
    env.setdefault("UBSAN_OPTIONS",
                   "halt_on_error=1:print_stacktrace=1:exitcode=98")
    env.setdefault("OMP_NUM_THREADS", "1")
    # fsdp-run starts MPI even alone (a singleton): keep that local and
    # quick (it mostly waits, which is why cases run several at a time).
    for key, value in [("OMPI_MCA_ess_singleton_isolated", "1"),
                       ("OMPI_MCA_pml", "ob1"), ("OMPI_MCA_btl", "self"),
                       ("OMPI_MCA_mtl", "^ofi"), ("OMPI_MCA_osc", "^ucx"),
                       ("OMPI_ALLOW_RUN_AS_ROOT", "1"),
                       ("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")]:
        env.setdefault(key, value)
    return env


class Campaign:
    """Runs cases (callables returning (verdict, output, input bytes,
    suffix)) on a few threads and keeps the books."""

    def __init__(self, args, name):
        self.args, self.name = args, name
        self.known = known_patterns(args.crashers)
        self.passed = self.failed = self.known_hits = 0
        self.saved = []
        self.by_verdict = {}

    def record(self, verdict, output, data, suffix, label):
        if verdict is None:
            self.passed += 1
            return
        if any(p in output for p in self.known):
            self.known_hits += 1
            return
        self.failed += 1
        self.by_verdict[verdict] = self.by_verdict.get(verdict, 0) + 1
        digest = hashlib.sha1(data).hexdigest()[:12]
        base = os.path.join(self.args.crashers,
                            "%s-%s%s" % (self.name, digest, suffix))
        if not os.path.exists(base):
            os.makedirs(self.args.crashers, exist_ok=True)
            with open(base, "wb") as f:
                f.write(data)
            with open(base + ".log", "w") as f:
                f.write("%s: %s\n%s\n" % (label, verdict, clip(output)))
            self.saved.append(base)
        sys.stderr.write("FAIL %s: %s -> %s\n" % (label, verdict, base))

    def run(self, make_case, count):
        start = time.time()
        done = 0
        with concurrent.futures.ThreadPoolExecutor(self.args.jobs) as pool:
            pending = set()
            i = 0
            while i < count or pending:
                while (i < count and len(pending) < 2 * self.args.jobs and
                       time.time() - start < self.args.time_budget):
                    pending.add(pool.submit(make_case, i))
                    i += 1
                if not pending:
                    break
                finished, pending = concurrent.futures.wait(
                    pending, return_when=concurrent.futures.FIRST_COMPLETED)
                for f in finished:
                    self.record(*f.result())
                    done += 1
                if time.time() - start >= self.args.time_budget:
                    count = i  # start no more
        elapsed = time.time() - start
        print("%s: %d cases in %.0fs (%.1f/s): %d clean, %d failed, %d known "
              "(crashers/known.txt)%s" % (
                  self.name, done, elapsed, done / max(elapsed, 1e-9),
                  self.passed, self.failed, self.known_hits,
                  "" if not self.by_verdict else " " + repr(self.by_verdict)))
        for path in self.saved:
            print("  saved %s" % os.path.relpath(path))
        return 1 if self.failed else 0


def replay(args, name, suffix, run_input):
    """Runs every saved crasher `NAME-*SUFFIX` through run_input(path)."""
    known = known_patterns(args.crashers)
    files = sorted(f for f in os.listdir(args.crashers)
                   if f.startswith(name + "-") and f.endswith(suffix)) \
        if os.path.isdir(args.crashers) else []
    bad = 0
    for f in files:
        path = os.path.join(args.crashers, f)
        verdict, output = run_input(path)
        log = open(path + ".log").read() if os.path.exists(path + ".log") \
            else ""
        is_known = any(p in output or p in log for p in known)
        if verdict is None and is_known:
            print("XPASS %s: fixed; drop its known.txt line" % f)
            bad += 1
        elif verdict is None:
            print("PASS %s" % f)
        elif is_known:
            print("XFAIL %s: %s (known)" % (f, verdict))
        else:
            print("FAIL %s: %s\n%s" % (f, verdict, output[-2000:]))
            bad += 1
    print("%s replay: %d crashers, %d failing" % (name, len(files), bad))
    return 1 if bad else 0

def compile_plan(bin_dir, work, name, gen, pipeline="--fsdp-train-pipeline"):
    """Generates a model with fsdp-gen `gen` and compiles it with
    `pipeline` into WORK/seed-NAME.plan; returns the path."""
    path = os.path.join(work, "seed-%s.plan" % name)
    model = subprocess.run([os.path.join(bin_dir, "fsdp-gen")] + gen,
                           check=True, stdout=subprocess.PIPE).stdout
    subprocess.run([os.path.join(bin_dir, "fsdp-opt"), "-", pipeline, "-o",
                    path], input=model, check=True)
    return path
