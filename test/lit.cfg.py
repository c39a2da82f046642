# -*- Python -*-
import os
import sys

import lit.formats
from lit.llvm import llvm_config
from lit.llvm.subst import ToolSubst

config.name = "FSDP"
config.test_format = lit.formats.ShTest(not llvm_config.use_lit_shell)
config.suffixes = [".mlir", ".test"]
config.test_source_root = os.path.dirname(__file__)
config.test_exec_root = os.path.join(config.fsdp_obj_root, "test")
config.excludes = ["CMakeLists.txt", "lit.cfg.py", "lit.site.cfg.py", "Inputs",
                   "crashers"]

config.substitutions.append(("%PATH%", config.environment["PATH"]))
config.substitutions.append(("%fsdp_src_root", config.fsdp_src_root))
# MLIR's ODS, for fsdp-tblgen tests that read the dialect's .td files.
config.substitutions.append(("%mlir_include", config.mlir_include_dir))
config.substitutions.append(("%python", sys.executable))
config.substitutions.append(("%fsdp_tools_dir", config.fsdp_tools_dir))
# The small English text that token models train on in the tests.
config.substitutions.append(
    ("%corpus", os.path.join(config.fsdp_src_root, "data", "corpus.txt")))

# The sanitizer build (scripts/build-sanitize.sh) runs this suite with its
# own tools and options.
llvm_config.with_system_environment(["HOME", "INCLUDE", "LIB", "TMP", "TEMP",
                                     "ASAN_OPTIONS", "UBSAN_OPTIONS"])
llvm_config.use_default_substitutions()

tool_dirs = [config.fsdp_tools_dir, config.llvm_tools_dir]
llvm_config.add_tool_substitutions(
    [ToolSubst(tool, unresolved="fatal")
     for tool in ("fsdp-opt", "fsdp-gen", "fsdp-translate", "fsdp-run",
                  "fsdp-gradcheck", "fsdp-step-check",
                  "fsdp-collectives-test", "fsdp-tblgen")],
    tool_dirs)
llvm_config.with_environment("PATH", config.llvm_tools_dir, append_path=True)
llvm_config.with_environment("PATH", config.fsdp_tools_dir, append_path=True)

# Memory-safety checks of error paths run under valgrind where it is
# installed (`%if valgrind %{ ... %}`); elsewhere only the message is checked.
import shutil
# Not for the sanitizer build's tools: valgrind cannot run an ASan binary
# (and ASan checks the same there).
import subprocess
def _sanitized(tool):
    try:
        libs = subprocess.run(["ldd", tool], capture_output=True, text=True,
                              timeout=30).stdout
    except (OSError, subprocess.SubprocessError):
        return False
    return "libasan" in libs
if shutil.which("valgrind") and not _sanitized(
        os.path.join(config.fsdp_tools_dir, "fsdp-opt")):
    config.available_features.add("valgrind")
# The sanitizer build's tools: tests too slow under ASan for the time they
# add (the emulated GPU's training, checkpoints, watchdog: seconds a step
# there) say UNSUPPORTED: asan.
if _sanitized(os.path.join(config.fsdp_tools_dir, "fsdp-run")):
    config.available_features.add("asan")
# fsdp-run counts its heap (HeapCounter.cpp) except under ASan, which
# replaces malloc itself.
if not _sanitized(os.path.join(config.fsdp_tools_dir, "fsdp-run")):
    config.available_features.add("heap-counter")

# The tests that compute a reference in numpy (an independent GPT-2
# forward) run where the interpreter that runs lit has it
# (scripts/setup.sh installs python3-numpy); elsewhere they are reported
# UNSUPPORTED.
import importlib.util


def feature_where(feature, present, note):
    """Adds `feature` where `present`; else says what to install."""
    if present:
        config.available_features.add(feature)
    else:
        lit_config.note(note)


def have_modules(*modules):
    return all(importlib.util.find_spec(m) is not None for m in modules)


if have_modules("numpy"):
    config.available_features.add("numpy")
    # The reference safetensors library (PyPI), where installed, reads
    # what --export writes; transformers (with torch) builds GPT-2 and
    # Llama from it (Runtime/export-*.test). Where they are missing those
    # tests are UNSUPPORTED, and this says what to install.
    feature_where("safetensors-py", have_modules("safetensors"),
                  "the Python package safetensors is not installed: "
                  "Runtime/export-safetensors.test is UNSUPPORTED "
                  "(pip install safetensors)")
    feature_where("transformers-py", have_modules("transformers", "torch"),
                  "the Python packages transformers and torch are not "
                  "both installed: Runtime/export-transformers.test is "
                  "UNSUPPORTED (pip install torch transformers)")

# The memory picture's rendering test needs rsvg-convert (Debian's
# librsvg2-bin, which scripts/setup.sh installs); the plot script's test
# needs matplotlib (optional: python3-matplotlib or pip's matplotlib).
feature_where("rsvg-convert", shutil.which("rsvg-convert"),
              "rsvg-convert not found: the memory picture's rendering "
              "test is UNSUPPORTED; install Debian's librsvg2-bin "
              "(scripts/setup.sh does)")
feature_where("matplotlib", have_modules("matplotlib"),
              "matplotlib not found: the plot script's test is "
              "UNSUPPORTED; install python3-matplotlib (apt) or "
              "matplotlib (pip) to run it")

# A build with CUDA has the backend as a module that fsdp-run loads.
if config.fsdp_have_cuda_module:
    config.available_features.add("cuda-module")
# The CUDA backend built against the CPU emulator of the device
# (FSDP_CUDA_EMULATOR=1 loads it): its host code, streams, cuBLAS and NCCL.
if getattr(config, "fsdp_have_cuda_emulator", False):
    config.available_features.add("cuda-emulator")

# Multi-rank tests run the ranks as processes on this machine under mpirun:
# more ranks than cores (--oversubscribe), as root where CI runs, one
# OpenMP thread per rank.
if config.fsdp_have_mpi and shutil.which("mpirun"):
    config.available_features.add("mpi")
    config.environment["OMPI_ALLOW_RUN_AS_ROOT"] = "1"
    config.environment["OMPI_ALLOW_RUN_AS_ROOT_CONFIRM"] = "1"
    config.environment["OMP_NUM_THREADS"] = "1"
    config.substitutions.append(
        ("%mpirun", "mpirun --oversubscribe --bind-to none -np"))

# OpenMP threads waiting for work sleep instead of spinning: the tests share
# two cores (lit's workers, CTest's other entries), and a spinning thread
# takes a core from a rank that has work. Results do not depend on it.
config.environment["OMP_WAIT_POLICY"] = "passive"
