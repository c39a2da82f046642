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
# The Python that runs the tests' scripts: the project's virtual environment
# (scripts/setup-python.sh: torch, transformers, safetensors, tokenizers,
# numpy), named by FSDP_PYTHON or found at <checkout>/.venv, else the one
# running lit.
def _test_python():
    named = os.environ.get("FSDP_PYTHON")
    if named:
        return named
    venv = os.path.join(config.fsdp_src_root, ".venv", "bin", "python")
    return venv if os.path.exists(venv) else sys.executable


config.fsdp_python = _test_python()


# %python: the scripts that import torch, transformers or tokenizers run in
# forks of a server that imported them once (Inputs/python_server.py,
# started at the end of this file with the tests' environment), every other
# script in a new interpreter as before; FSDP_TEST_PYTHON_SERVER=0 runs all
# in new interpreters. The result never depends on the server; importing
# torch and transformers (3-5 s of CPU) in each of about 70 processes did.
def _python_substitution():
    if os.environ.get("FSDP_TEST_PYTHON_SERVER") == "0":
        return config.fsdp_python, None
    import tempfile
    sock_dir = tempfile.mkdtemp(prefix="fsdp-py-")
    server = os.path.join(config.test_source_root, "Inputs", "python_server.py")
    return ("%s -S %s run %s %s" % (config.fsdp_python, server, sock_dir,
                                    config.fsdp_python), (server, sock_dir))


_python_command, _python_server = _python_substitution()
config.substitutions.append(("%python", _python_command))
if _python_server:
    config.available_features.add("python-server")
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
# forward) run where the tests' Python (config.fsdp_python) has it
# (scripts/setup.sh installs python3-numpy); elsewhere they are reported
# UNSUPPORTED.


def feature_where(feature, present, note):
    """Adds `feature` where `present`; else says what to install."""
    if present:
        config.available_features.add(feature)
    else:
        lit_config.note(note)


def _python_modules(python, candidates):
    """The modules among `candidates` that `python` can import."""
    import subprocess
    probe = ("import importlib.util, sys\n"
             "print(' '.join(m for m in sys.argv[1:] "
             "if importlib.util.find_spec(m)))")
    try:
        out = subprocess.run([python, "-c", probe] + candidates,
                             capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.SubprocessError):
        return set()
    return set(out.stdout.split())


_PY_MODULES = _python_modules(
    config.fsdp_python,
    ["numpy", "safetensors", "transformers", "torch", "tokenizers",
     "matplotlib"])


def have_modules(*modules):
    return all(m in _PY_MODULES for m in modules)


# scripts/test.sh installs the project's environment and sets this: there a
# missing package is an error, not a quiet UNSUPPORTED.
if os.environ.get("FSDP_REQUIRE_PYTHON_PACKAGES"):
    _missing = [m for m in ["numpy", "safetensors", "transformers", "torch",
                            "tokenizers"] if m not in _PY_MODULES]
    if _missing:
        lit_config.fatal("%s lacks %s (scripts/setup-python.sh installs "
                         "them)" % (config.fsdp_python, ", ".join(_missing)))


if have_modules("numpy"):
    config.available_features.add("numpy")
    # The reference libraries (PyPI; scripts/setup-python.sh installs them
    # into the project's environment): safetensors reads what --export
    # writes, transformers (with torch) builds every model family from it,
    # tokenizers makes the tests' tokenizer (Runtime/export-*.test,
    # Models/*.test). Where they are missing those tests are UNSUPPORTED,
    # and this says how to install them.
    feature_where("safetensors-py", have_modules("safetensors"),
                  "the Python package safetensors is not installed: "
                  "its tests are UNSUPPORTED (scripts/setup-python.sh)")
    feature_where("transformers-py", have_modules("transformers", "torch"),
                  "the Python packages transformers and torch are not "
                  "both installed: their tests are UNSUPPORTED "
                  "(scripts/setup-python.sh)")
    feature_where("tokenizers-py", have_modules("tokenizers"),
                  "the Python package tokenizers is not installed: "
                  "scripts/tokenize.py's tests are UNSUPPORTED "
                  "(scripts/setup-python.sh)")

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


# The fork server of %python (above), with the environment the tests get.
# It stops when lit exits (or, should lit be killed, by itself within a
# second).
if _python_server:
    import atexit
    _server = subprocess.Popen(
        [config.fsdp_python, _python_server[0], "serve", _python_server[1]],
        env=dict(config.environment), stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    def _stop_python_server():
        _server.terminate()
        try:
            _server.wait(timeout=10)
        except subprocess.TimeoutExpired:
            _server.kill()
        shutil.rmtree(_python_server[1], ignore_errors=True)

    atexit.register(_stop_python_server)
