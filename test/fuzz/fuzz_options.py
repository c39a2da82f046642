#!/usr/bin/env python3
"""A bounded fuzzer of command lines and input files (docs/testing.md).

Each case is one of:

* options: fsdp-run on a tiny GPT-2 with one to four of its options set
  to an extreme value: empty, huge (10^20, 2^63 - 1, 10^12 steps),
  negative, NaN, infinite, 1e308, denormal, garbage, or a valid one;
* special: a special file in one input position (the plan, --data,
  --val-data, --init-from, the manifest or the rank file of the
  checkpoint --resume reads, fsdp-gen --config): a directory, a FIFO,
  /dev/null, /dev/zero, a symbolic link to a FIFO or to a directory, a
  dangling link, a unix socket; half of the time with extreme options
  too.

Every case must end cleanly within the timeout (fuzzlib.py: success, or
exit 1 or 2 with an `error` line; a long valid run gets SIGTERM after
--stop-after seconds and must stop with 75, or 143 during setup): no
signal, no sanitizer report, no hang. And nothing half-written: no
`*.tmp` left in the case's directory, no --export or --report-json file
after a run that did not succeed, a report that parses after one that
did. A special file in an input position must be refused with an error
line naming it ("not a regular file" or a checkpoint skipped for it).

Failures are saved under test/fuzz/crashers/ as options-<hash>.json (the
case's description); replay rebuilds and runs each.

    fuzz_options.py --bin build-asan/bin [--seed 1] [--cases 300]
                    [--time-budget 40] [--replay]
"""

import json
import os
import random
import shutil
import socket
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fuzzlib  # noqa: E402

ROOT = fuzzlib.ROOT
CORPUS = fuzzlib.CORPUS
GEN = fuzzlib.TINY_GPT2
RANK_FILE = "rank-0-of-1.safetensors"
# A valid run longer than this gets SIGTERM (it must stop cleanly).
STOP_AFTER = 6.0

# Extreme values for any option, then the valid ones of each option.
EXTREME = ["", "0", "-1", "-0", "1", "2", "nan", "-nan", "inf", "-inf",
           "1e308", "-1e308", "1e-320", "4.9e-324", "0x10", "1e3", " 1",
           "abc", "99999999999999999999", "9223372036854775807",
           "-9223372036854775808", "1000000000000", "1000000000000000",
           "1000000000000001", "4294967296", "2147483648", "65536",
           "1:inf", "0:1e300:2", "0:0:99999999999999999999", "x:1"]
OPTIONS = {
    "--steps": ["1", "2", "3", "10000000000", "1000000000000"],
    "--seed": ["0", "7", "18446744073709551615"],
    "--lr": ["0", "0.001", "10", "10.000001"],
    "--lr-schedule": ["constant", "cosine", "linear"],
    "--warmup-steps": ["0", "1", "1000000000000"],
    "--min-lr": ["0", "1e-5"],
    "--log-every": ["1", "1000000000000000"],
    "--threads": ["1", "4096", "4097"],
    "--data-format": ["auto", "bytes", "tokens"],
    "--val-data": ["%corpus"],
    "--val-every": ["1", "2", "1000000000000"],
    "--val-steps": ["1", "2", "1000000"],
    "--peak-tflops": ["0", "1", "100000", "100001"],
    "--collective-timeout": ["0", "1", "1e6", "1000001"],
    "--checkpoint-every": ["1", "1000000000000000"],
    "--keep-last": ["1", "2", "1000000", "1000001"],
    "--export-names": ["hf", "ours"],
    "--blas": ["auto", "openblas"],
    "--collective-threads": ["auto", "on", "off"],
    "--device": ["0", "65535"],
    "--debug-stall": ["0:0", "0:0.5:1"],
}
# Options that name a file the case writes: placed in the case directory.
OUTPUTS = ["--export", "--report-json", "--trace", "--checkpoint-dir"]
FLAGS = ["--profile", "--describe", "--skip-collectives",
         "--sync-collectives", "--heap-breakdown", "--print-ranks"]

POSITIONS = ["plan", "--data", "--val-data", "--init-from", "manifest",
             "rank-file", "config"]
SPECIALS = ["dir", "fifo", "dev-null", "dev-zero", "link-fifo", "link-dir",
            "dangling", "socket"]


def make_special(path, kind):
    """Makes `path` a special file of `kind` (its parent exists)."""
    if os.path.lexists(path):
        if os.path.isdir(path) and not os.path.islink(path):
            shutil.rmtree(path)
        else:
            os.unlink(path)
    if kind == "dir":
        os.mkdir(path)
    elif kind == "fifo":
        os.mkfifo(path)
    elif kind in ("dev-null", "dev-zero"):
        os.symlink("/dev/null" if kind == "dev-null" else "/dev/zero", path)
    elif kind == "link-fifo":
        os.mkfifo(path + ".target")
        os.symlink(os.path.basename(path) + ".target", path)
    elif kind == "link-dir":
        os.mkdir(path + ".target")
        os.symlink(os.path.basename(path) + ".target", path)
    elif kind == "dangling":
        os.symlink(os.path.basename(path) + ".nowhere", path)
    elif kind == "socket":
        s = socket.socket(socket.AF_UNIX)
        try:
            s.bind(path)
        except OSError:  # a path too long for a socket: a FIFO instead
            os.mkfifo(path)
        finally:
            s.close()


def option_args(rng, work, extreme):
    """One to four options with valid values, and with `extreme` one of
    them (any option) set to an extreme value instead."""
    args = []
    count = rng.randint(1, 4)
    bad = rng.randrange(count) if extreme else -1
    for i in range(count):
        what = rng.random()
        if what < 0.1 and i != bad:
            args.append(rng.choice(FLAGS))
            continue
        if what < 0.25:
            flag = rng.choice(OUTPUTS)
            value = "" if i == bad else os.path.join(work, "out" + flag)
        else:
            flag = rng.choice(sorted(OPTIONS))
            value = rng.choice(EXTREME if i == bad else OPTIONS[flag])
        args += [flag, value]
    if rng.random() < 0.8:
        args += needed(args, work)
    return args


# What an option needs of another (else the run stops at that error
# before it reaches the value): added to most cases.
NEEDS = {"--val-every": ["--val-data", "%corpus"],
         "--val-steps": ["--val-data", "%corpus"],
         "--checkpoint-every": ["--checkpoint-dir", "@/ck-out"],
         "--keep-last": ["--checkpoint-dir", "@/ck-out"],
         "--min-lr": ["--lr-schedule", "cosine"],
         "--export-names": ["--export", "@/out--export"]}


def needed(args, work):
    extra = []
    for flag, more in NEEDS.items():
        if flag in args and more[0] not in args and more[0] not in extra:
            extra += [a.replace("@", work) for a in more]
    return extra


def make_case(rng):
    """A case's description (JSON-able): "@" in it stands for the case's
    directory, "%corpus" for data/corpus.txt."""
    if rng.random() < 0.45:
        return {"kind": "options",
                "args": option_args(rng, "@", rng.random() < 0.5)}
    return {"kind": "special", "position": rng.choice(POSITIONS),
            "special": rng.choice(SPECIALS),
            "args": option_args(rng, "@", False) if rng.random() < 0.5
            else []}


def command(seeds, desc, work, bin_dir):
    """The case's command line, its special file made under `work`."""
    run = [os.path.join(bin_dir, "fsdp-run")]
    args = [a.replace("@", work).replace("%corpus", CORPUS)
            for a in desc.get("args", [])]
    plan, data = seeds["plan"], CORPUS
    base = ["--threads", "1"]
    position = desc.get("position")
    special = os.path.join(work, "special")
    if position is None:
        return run + [plan, "--data", data, "--steps", "2"] + base + args
    if position == "config":
        make_special(special, desc["special"])
        return [os.path.join(bin_dir, "fsdp-gen"), "--config", special]
    if position in ("manifest", "rank-file"):
        ck = os.path.join(work, "ck")
        shutil.copytree(seeds["ck"], ck)
        name = "manifest.json" if position == "manifest" else RANK_FILE
        make_special(os.path.join(ck, "step-2", name), desc["special"])
        return run + [plan, "--data", data, "--steps", "3", "--resume",
                      ck] + base + args
    make_special(special, desc["special"])
    if position == "plan":
        return run + [special, "--data", data] + base + args
    if position == "--init-from":
        return run + [plan, "--data", data, "--steps", "2", "--init-from",
                      special] + base + args
    return run + [plan, "--data", data, "--steps", "2", position,
                  special] + base + args


def leftovers(work, argv, code):
    """What a run left half-written in `work`, "" when nothing."""
    for top, dirs, files in os.walk(work):
        for f in files:
            if f.endswith(".tmp") or ".tmp." in f:
                return "left %s behind" % os.path.join(top, f)
    for flag in ("--export", "--report-json"):
        if flag not in argv:
            continue
        path = argv[argv.index(flag) + 1]
        if not path.startswith(work) or not os.path.lexists(path):
            continue
        if code != 0 and os.path.isfile(path):
            return "%s %s written by a run that exited %d" % (flag, path, code)
        if code == 0 and flag == "--report-json":
            try:
                json.load(open(path))
            except (ValueError, OSError) as e:
                return "--report-json %s does not parse: %s" % (path, e)
    return ""


def refused(desc, work, out):
    """Why a special file's case did not end as it must, or None: refused
    with an error line naming the file (or its checkpoint), unless an
    option of the case ended the run before the file was read."""
    if desc["position"] in desc["args"]:
        return None  # the option given again names a regular file
    if "summary:" in out:
        return "a %s as %s was not refused" % (desc["special"],
                                               desc["position"])
    if not desc["args"] and not any(
            "error:" in line and work in line for line in out.splitlines()):
        return "a %s as %s: no error line naming it" % (desc["special"],
                                                        desc["position"])
    return None


def accepted(args):
    """The value no option may accept, where a run that trained did."""
    for flag, value in zip(args, args[1:]):
        if flag.startswith("--") and value in ("", "nan", "-nan", "inf",
                                               "-inf"):
            return "%s '%s' was accepted" % (flag, value)
    return None


def check(bin_dir, seeds, work, desc, timeout, env):
    os.makedirs(work)
    try:
        argv = command(seeds, desc, work, bin_dir)
        # A special file is refused at setup: a run that needs stopping
        # hangs on it (unless an option names a regular file instead).
        stop = desc["kind"] == "options" or desc["position"] in desc["args"]
        verdict, out = fuzzlib.run_tool(argv, timeout, env,
                                        stop_after=STOP_AFTER if stop
                                        else None)
        if verdict is None:
            # Clean: exit 0, 1 or 2 with an error line, or stopped.
            code = 1 if "error:" in out else 0
            verdict = leftovers(work, argv, code) or None
        if verdict is None and desc["kind"] == "special":
            verdict = refused(desc, work, out)
        if verdict is None and "summary:" in out:
            verdict = accepted(desc["args"])
        return verdict, "$ %s\n%s" % (" ".join(argv), out)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def make_seeds(bin_dir, work):
    plan = fuzzlib.compile_plan(bin_dir, work, "gpt2", GEN)
    ck = os.path.join(work, "seed-ck")
    subprocess.run([os.path.join(bin_dir, "fsdp-run"), plan, "--data", CORPUS,
                    "--steps", "2", "--threads", "1", "--checkpoint-dir", ck],
                   check=True, stdout=subprocess.DEVNULL,
                   env=fuzzlib.environment())
    return {"plan": plan, "ck": ck}


def main():
    args = fuzzlib.arguments(__doc__, 300)
    env = fuzzlib.environment()
    work = args.work or tempfile.mkdtemp(prefix="fuzz-options-")
    os.makedirs(work, exist_ok=True)
    seeds = make_seeds(args.bin, work)
    if args.replay:
        def replay_one(path):
            return check(args.bin, seeds, os.path.join(work, "replay"),
                         json.load(open(path)), args.timeout, env)
        return fuzzlib.replay(args, "options", ".json", replay_one)
    campaign = fuzzlib.Campaign(args, "options")

    def case(i):
        rng = random.Random(args.seed * 1000003 + i)
        desc = make_case(rng)
        verdict, out = check(args.bin, seeds,
                             os.path.join(work, "case-%d" % i), desc,
                             args.timeout, env)
        data = json.dumps(desc, sort_keys=True).encode()
        return verdict, out, data, ".json", "options case %d (seed %d)" % (
            i, args.seed)

    code = campaign.run(case, args.cases)
    if not args.work:
        shutil.rmtree(work, ignore_errors=True)
    return code


if __name__ == "__main__":
    sys.exit(main())
