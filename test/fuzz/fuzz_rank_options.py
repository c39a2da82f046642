#!/usr/bin/env python3
"""A bounded fuzzer of per-rank option mixes (docs/testing.md).

Each case launches 2 ranks of a small GPT-2 under mpirun (MPMD: `-np 1
A : -np 1 B`), each rank with its own options drawn from: --steps, --data
(the corpus, a copy of it at another path, another text), --seed, --lr,
--resume (a checkpoint, a copy of it, a copy with rank 1's shard
corrupted, another run's checkpoint, a missing directory),
--checkpoint-dir (a directory, another one, a symbolic link to the
first), --export (one path, or one per rank), --report-json and
--resume-changed-hyperparameters. Rank 1's options are rank 0's with zero
to three of them drawn again, so that most cases differ in little.

What a case must do: end within --timeout (no hang) without a sanitizer
report; and either succeed, which it may only where the two ranks' options
mean the same run (the same data bytes, the same checkpoint to resume,
the same directory to write, ...; paths may differ), with a complete
checkpoint where one was asked for; or fail cleanly (exit 1 or 2) with an
`error:` line from every rank. Either way no temporary (*.tmp) and no
directory lock (fsdp-run.lock) may be left in the case's directory.
Failures are saved under test/fuzz/crashers/ as rank-options-<hash>.json
(the two ranks' choices); replay runs each again.

    fuzz_rank_options.py --bin build-asan/bin [--seed 1] [--cases 40]
                         [--time-budget 30] [--jobs 2] [--replay]
"""

import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import zlib

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fuzzlib  # noqa: E402

ROOT = fuzzlib.ROOT
CORPUS = fuzzlib.CORPUS
GEN = fuzzlib.TINY_GPT2
CHOICES = {
    "steps": ["3", "4"],
    "data": ["corpus", "copy", "other"],
    "seed": ["1", "2"],
    "lr": [None, "0.001"],
    "resume": [None, "ck", "ck-copy", "ck-bad", "ck-other", "missing"],
    "checkpoint_dir": [None, "A", "B", "A-link"],
    "export": [None, "same", "own"],
    "report": [None, "same"],
    "changed": [False, True],
}
# What each choice means for the run: choices that name the same bytes or
# the same directory under other paths mean the same.
MEANING = {
    "data": {"corpus": "corpus", "copy": "corpus", "other": "other"},
    "resume": {None: None, "ck": "ck", "ck-copy": "ck", "ck-bad": "ck-bad",
               "ck-other": "ck-other", "missing": "missing"},
    "checkpoint_dir": {None: None, "A": "A", "A-link": "A", "B": "B"},
    "export": {None: False, "same": True, "own": True},
    # Only rank 0 writes the report: another rank's is not read.
    "report": {None: None, "same": None},
}


def meaning(choice):
    meant = {k: MEANING[k][v] if k in MEANING else v
             for k, v in choice.items()}
    # The flag is given only with --resume.
    meant["changed"] = choice["changed"] and bool(choice["resume"])
    return meant


def make_seeds(bin_dir, work, env):
    """The plan, the data files and the checkpoints the cases share."""
    plan = fuzzlib.compile_plan(bin_dir, work, "gpt2", GEN,
                                '--fsdp-train-pipeline=world-size=2')
    shutil.copy(CORPUS, os.path.join(work, "corpus-copy.txt"))
    text = bytearray(open(CORPUS, "rb").read())
    text[len(text) // 2] ^= 0x20
    open(os.path.join(work, "other.txt"), "wb").write(text)
    for name, extra in [("ck", []), ("ck-other", ["--seed", "5"])]:
        subprocess.run(mpirun_two(
            run_args(bin_dir, plan, CORPUS, ["--steps", "2"] + extra +
                     ["--checkpoint-dir", os.path.join(work, name)])),
            check=True, stdout=subprocess.DEVNULL, env=env, timeout=120)
    shutil.copytree(os.path.join(work, "ck"), os.path.join(work, "ck-copy"))
    shutil.copytree(os.path.join(work, "ck"), os.path.join(work, "ck-bad"))
    bad = os.path.join(work, "ck-bad", "step-2", "rank-1-of-2.safetensors")
    with open(bad, "r+b") as f:
        f.seek(-100, os.SEEK_END)
        byte = f.read(1)
        f.seek(-100, os.SEEK_END)
        f.write(bytes([byte[0] ^ 0xFF]))
    return plan


def run_args(bin_dir, plan, data, options):
    return [os.path.join(bin_dir, "fsdp-run"), plan, "--data", data,
            "--threads", "1", "--collective-timeout", "20"] + options


def mpirun_two(first, second=None):
    launch = ["mpirun", "--oversubscribe", "--bind-to", "none"]
    if second is None:
        return launch + ["-np", "2"] + first
    return launch + ["-np", "1"] + first + [":", "-np", "1"] + second


def rank_command(bin_dir, plan, work, case_dir, choice, rank):
    data = {"corpus": CORPUS, "copy": os.path.join(work, "corpus-copy.txt"),
            "other": os.path.join(work, "other.txt")}[choice["data"]]
    options = ["--steps", choice["steps"], "--seed", choice["seed"]]
    if choice["lr"]:
        options += ["--lr", choice["lr"]]
    if choice["resume"]:
        options += ["--resume", os.path.join(work, choice["resume"])]
    if choice["changed"] and choice["resume"]:
        options += ["--resume-changed-hyperparameters"]
    if choice["checkpoint_dir"]:
        options += ["--checkpoint-dir",
                    os.path.join(case_dir, choice["checkpoint_dir"])]
    if choice["export"]:
        name = "w.st" if choice["export"] == "same" else "w.%d.st" % rank
        options += ["--export", os.path.join(case_dir, name)]
    if choice["report"]:
        options += ["--report-json", os.path.join(case_dir, "r.json")]
    return run_args(bin_dir, plan, data, options)


def leftovers(case_dir):
    found = []
    for base, _, files in os.walk(case_dir):
        for f in files:
            if f.endswith(".tmp") or f == "fsdp-run.lock":
                found.append(os.path.relpath(os.path.join(base, f), case_dir))
    return found


def complete_checkpoint(step_dir):
    """Why the checkpoint in step_dir is not complete ("" when it is)."""
    try:
        manifest = json.load(open(os.path.join(step_dir, "manifest.json")))
        for f in manifest["files"]:
            data = open(os.path.join(step_dir, f["name"]), "rb").read()
            if len(data) != f["bytes"] or \
                    "%08x" % zlib.crc32(data) != f["crc32"]:
                return "%s does not match its manifest" % f["name"]
        if len(manifest["files"]) != 2:
            return "the manifest lists %d files" % len(manifest["files"])
    except (OSError, ValueError, KeyError, TypeError) as e:
        return "no complete checkpoint: %s" % e
    return ""


def judge(choices, verdict, out, case_dir):
    """The case's verdict given fuzzlib's (None: clean so far)."""
    if verdict is not None:
        return verdict
    if "watchdog" in out or "collective timeout" in out.lower():
        return "a collective timed out (a hang the watchdog ended)"
    left = leftovers(case_dir)
    if left:
        return "left behind: %s" % ", ".join(sorted(left))
    same = meaning(choices[0]) == meaning(choices[1])
    if "summary:" in out:
        if not same:
            return "trained although the ranks' options differ: %s" % \
                ", ".join(k for k in choices[0]
                          if meaning(choices[0])[k] != meaning(choices[1])[k])
        if choices[0]["checkpoint_dir"]:
            step = os.path.join(case_dir, choices[0]["checkpoint_dir"],
                                "step-" + choices[0]["steps"])
            why = complete_checkpoint(step)
            if why:
                return "checkpoint %s: %s" % (step, why)
        return None
    # An error before the ranks connect (an option's) has no rank in it.
    unranked = out.count("fsdp-run: error:")
    for rank in (0, 1):
        if "rank %d: error:" % rank not in out:
            if not unranked:
                return "failed without an error line from rank %d" % rank
            unranked -= 1
    return None


def check(bin_dir, plan, work, case_dir, data, timeout, env):
    choices = json.loads(data)
    os.makedirs(case_dir)
    # The directories the choices name: A exists (so that its link does).
    os.makedirs(os.path.join(case_dir, "A"))
    os.symlink(os.path.join(case_dir, "A"), os.path.join(case_dir, "A-link"))
    commands = [rank_command(bin_dir, plan, work, case_dir, c, r)
                for r, c in enumerate(choices)]
    verdict, out = fuzzlib.run_tool(mpirun_two(*commands), timeout, env)
    verdict = judge(choices, verdict, out, case_dir)
    shutil.rmtree(case_dir)
    return verdict, out


def draw(rng):
    first = {k: rng.choice(v) for k, v in CHOICES.items()}
    if rng.random() < 0.7:
        # Mostly a first rank whose run would succeed alone, so that the
        # second's differences are what decides.
        first["resume"] = rng.choice([None, None, "ck", "ck-copy"])
        if first["resume"]:
            first["seed"] = "1"
    second = dict(first)
    for key in rng.sample(sorted(CHOICES), rng.choice([0, 1, 1, 2, 3])):
        second[key] = rng.choice(CHOICES[key])
    return [first, second]


def environment():
    """fuzzlib's, less its settings for MPI singletons: these cases run
    2 ranks under mpirun, which must talk to each other."""
    env = fuzzlib.environment()
    for key in ("OMPI_MCA_ess_singleton_isolated", "OMPI_MCA_btl",
                "OMPI_MCA_pml"):
        env.pop(key, None)
    return env


def main():
    args = fuzzlib.arguments(__doc__, 40)
    if shutil.which("mpirun") is None:
        print("rank-options: no mpirun: nothing to run")
        return 0
    saved = os.path.isdir(args.crashers) and any(
        f.startswith("rank-options-") and f.endswith(".json")
        for f in os.listdir(args.crashers))
    if args.replay and not saved:
        print("rank-options replay: 0 crashers, 0 failing")
        return 0
    env = environment()
    work = args.work or tempfile.mkdtemp(prefix="fuzz-rank-options-")
    os.makedirs(work, exist_ok=True)
    plan = make_seeds(args.bin, work, env)
    if args.replay:
        def replay_one(path):
            return check(args.bin, plan, work, os.path.join(work, "replay"),
                         open(path, "rb").read(), args.timeout, env)
        return fuzzlib.replay(args, "rank-options", ".json", replay_one)
    campaign = fuzzlib.Campaign(args, "rank-options")

    def case(i):
        rng = random.Random(args.seed * 1000003 + i)
        data = json.dumps(draw(rng), sort_keys=True).encode()
        verdict, out = check(args.bin, plan, work,
                             os.path.join(work, "case-%d" % i), data,
                             args.timeout, env)
        return verdict, out, data, ".json", "rank-options case %d (seed %d)" \
            % (i, args.seed)

    return campaign.run(case, args.cases)


if __name__ == "__main__":
    sys.exit(main())
