"""Runs the lit tests' torch and transformers scripts without paying for
their imports each time: a fork server (test/lit.cfg.py, docs/testing.md).

    python python_server.py serve SOCKET_DIR
        Listens on SOCKET_DIR/socket. On its first request it imports numpy,
        torch, transformers (and the model classes the tests build),
        safetensors and tokenizers, once; for each request it forks a
        process that runs the script as `python SCRIPT ARGS` would, with the
        client's standard input, output and error, working directory,
        environment and arguments, and reports how it ended. Exits when the
        process that started it (lit) is gone.

    python -S python_server.py run SOCKET_DIR PYTHON SCRIPT [ARGS...]
        The client (what %python is): runs SCRIPT through the server when
        SCRIPT names torch, transformers or tokenizers, and ends as the
        script's process ended (its exit status, or its signal). Every other
        case, and whenever the server cannot take the request (not running,
        or started with another environment, umask or resource limits),
        replaces itself with `PYTHON SCRIPT ARGS`: the result never depends
        on the server, only the time does.

Each script runs in a fresh fork of a process that has only imported
modules (no threads started, no random numbers drawn). torch's and numpy's
global generators are re-seeded from the OS in it, as a new interpreter
seeds them, and Python's `random` re-seeds itself after a fork. The
script's own modules are imported fresh in it.
"""
import json
import os
import re
import select
import signal
import socket
import struct
import sys

# Variables that may differ between the client and the server: lit sets the
# temporary directory and the test's name for each test (the child takes
# the client's, and tempfile looks its directory up again).
_ENV_IGNORED = {"PWD", "OLDPWD", "SHLVL", "_", "TMPDIR", "TEMP", "TMP",
                "TEMPDIR", "LIT_CURRENT_TESTCASE"}
_LIMITS = ("RLIMIT_AS", "RLIMIT_CORE", "RLIMIT_CPU", "RLIMIT_DATA",
           "RLIMIT_FSIZE", "RLIMIT_NOFILE", "RLIMIT_NPROC", "RLIMIT_STACK")
_HEAVY = re.compile(rb"\b(torch|transformers|tokenizers)\b")


def _process_state():
    """What a process inherits that the server cannot hand to a child."""
    import resource
    umask = os.umask(0)
    os.umask(umask)
    env = dict(os.environ)
    limits = {name: list(resource.getrlimit(getattr(resource, name)))
              for name in _LIMITS if hasattr(resource, name)}
    return {"env": env, "umask": umask, "limits": limits,
            "python": os.path.abspath(sys.executable)}


# ---------------------------------------------------------------- client


def _send(sock, payload, fds=()):
    data = json.dumps(payload).encode()
    data = struct.pack("!I", len(data)) + data
    if fds:
        socket.send_fds(sock, [data], list(fds))
    else:
        sock.sendall(data)


def _recv_exact(sock, n):
    out = b""
    while len(out) < n:
        chunk = sock.recv(n - len(out))
        if not chunk:
            raise EOFError
        out += chunk
    return out


def _recv(sock, with_fds=False):
    fds = []
    if with_fds:
        data, fds, _, _ = socket.recv_fds(sock, 4, 3)
        if len(data) < 4:
            data += _recv_exact(sock, 4 - len(data))
        head, rest = data[:4], data[4:]
    else:
        head, rest = _recv_exact(sock, 4), b""
    (n,) = struct.unpack("!I", head)
    if len(rest) < n:
        rest += _recv_exact(sock, n - len(rest))
    return json.loads(rest.decode()), fds


def _wants_server(argv):
    if not argv or argv[0].startswith("-") or not argv[0].endswith(".py"):
        return False
    try:
        with open(argv[0], "rb") as f:
            return bool(_HEAVY.search(f.read()))
    except OSError:
        return False


def client(sock_dir, python, argv):
    """Runs `python argv...` through the server, or execs it."""
    def fallback():
        os.execv(python, [python] + argv)

    if os.environ.get("FSDP_TEST_PYTHON_SERVER") == "0" or \
            not _wants_server(argv):
        fallback()
    try:
        for fd in (0, 1, 2):
            os.fstat(fd)
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.connect(os.path.join(sock_dir, "socket"))
        state = _process_state()
        state.update(cwd=os.getcwd(), argv=argv)
        _send(sock, state, fds=(0, 1, 2))
        answer, _ = _recv(sock)
    except (OSError, EOFError, ValueError):
        fallback()
    if answer.get("run") is not True:
        fallback()
    # From here the script runs: its end is ours.
    try:
        result, _ = _recv(sock)
    except (OSError, EOFError, ValueError):
        sys.stderr.write("python_server: lost the server while running %s\n"
                         % argv[0])
        os._exit(125)
    if "signal" in result:
        signal.signal(result["signal"], signal.SIG_DFL)
        os.kill(os.getpid(), result["signal"])
        os._exit(128 + result["signal"])
    os._exit(result["exit"])


# ---------------------------------------------------------------- server


def _preload():
    """Imports what the tests' heavy scripts import; draws no numbers and
    starts no threads."""
    import importlib
    for name in ("numpy", "safetensors", "safetensors.numpy",
                 "safetensors.torch", "tokenizers", "torch",
                 "torch.nn.functional", "transformers"):
        try:
            importlib.import_module(name)
        except Exception:  # a missing package: its tests say UNSUPPORTED
            pass
    transformers = sys.modules.get("transformers")
    for cls in ("AutoConfig", "AutoModelForCausalLM", "GPT2LMHeadModel",
                "LlamaForCausalLM", "MistralForCausalLM", "Qwen2ForCausalLM",
                "Qwen3ForCausalLM", "MixtralForCausalLM",
                "Qwen3MoeForCausalLM"):
        try:
            getattr(transformers, cls)
        except Exception:
            pass
    sys.stdout.flush()
    sys.stderr.flush()


def _exit_code(code):
    """sys.exit's argument as Python's own exit turns it into a status."""
    if code is None:
        return 0
    if isinstance(code, int):
        return code & 0xFF
    sys.stderr.write("%s\n" % (code,))
    return 1


def _run_script(request):
    """In the forked child: become `python SCRIPT ARGS` and never return."""
    import atexit
    import builtins
    import tempfile
    import traceback
    import types
    code = 1
    try:
        os.chdir(request["cwd"])
        os.environ.clear()
        os.environ.update(request["env"])
        tempfile.tempdir = None
        script = os.path.abspath(request["argv"][0])
        sys.argv = list(request["argv"])
        sys.path[0] = os.path.dirname(os.path.realpath(script))
        for stream in (sys.stdout, sys.stderr):
            stream.reconfigure(line_buffering=stream.isatty())
        # A new interpreter seeds both from the OS.
        if "numpy" in sys.modules:
            sys.modules["numpy"].random.seed()
        if "torch" in sys.modules:
            sys.modules["torch"].seed()
        main = types.ModuleType("__main__")
        main.__file__ = script
        main.__builtins__ = builtins
        sys.modules["__main__"] = main
        with open(script, "rb") as f:
            source = f.read()
        try:
            exec(compile(source, script, "exec"), main.__dict__)
            code = 0
        except SystemExit as e:
            code = _exit_code(e.code)
        except BaseException as e:  # as Python prints it: no frame of ours
            traceback.print_exception(type(e), e, e.__traceback__.tb_next)
            code = 1
        try:
            import threading
            threading._shutdown()
        except Exception:
            pass
        atexit._run_exitfuncs()
    finally:
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except Exception:
                code = 120
        os._exit(code)


def _compared(state):
    """What of a process state must match: all but the variables that may
    differ."""
    env = {k: v for k, v in state.get("env", {}).items()
           if k not in _ENV_IGNORED}
    return dict(state, env=env)


def _handle(conn, state):
    """In a forked handler: checks the request, runs it in a grandchild,
    waits for it (killing it if the client goes away), reports its end."""
    for sig in (signal.SIGCHLD, signal.SIGTERM):
        signal.signal(sig, signal.SIG_DFL)
    request, fds = _recv(conn, with_fds=True)
    mine, theirs = _compared(state), _compared(request)
    differ = [k for k in ("env", "umask", "limits", "python")
              if theirs.get(k) != mine.get(k)]
    if len(fds) != 3 or differ:
        _send(conn, {"run": False})
        os._exit(0)
    _send(conn, {"run": True})
    pid = os.fork()
    if pid == 0:
        conn.close()
        for target, fd in enumerate(fds):
            os.dup2(fd, target)
        for fd in fds:
            if fd > 2:
                os.close(fd)
        _run_script(request)
    for fd in fds:
        os.close(fd)
    waitable = [conn]
    if hasattr(os, "pidfd_open"):
        waitable.append(os.pidfd_open(pid))
    while True:
        ready, _, _ = select.select(waitable, [], [], 0.05)
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            break
        if conn in ready and not conn.recv(1):  # the client is gone
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
            os._exit(0)
    if os.WIFSIGNALED(status):
        _send(conn, {"signal": os.WTERMSIG(status)})
    else:
        _send(conn, {"exit": os.WEXITSTATUS(status)})
    os._exit(0)


def serve(sock_dir):
    parent = os.getppid()
    path = os.path.join(sock_dir, "socket")
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(path)
    listener.listen(64)
    listener.settimeout(1.0)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    state = _process_state()
    loaded = False
    try:
        while os.getppid() == parent:
            try:
                conn, _ = listener.accept()
            except socket.timeout:
                conn = None
            while True:  # reap finished handlers
                try:
                    if os.waitpid(-1, os.WNOHANG)[0] == 0:
                        break
                except ChildProcessError:
                    break
            if conn is None:
                continue
            if not loaded:
                _preload()
                loaded = True
            conn.settimeout(None)
            if os.fork() == 0:
                listener.close()
                try:
                    _handle(conn, state)
                finally:
                    os._exit(0)
            conn.close()
    finally:
        try:
            os.unlink(path)
            os.rmdir(sock_dir)
        except OSError:
            pass


def main():
    if len(sys.argv) >= 3 and sys.argv[1] == "serve":
        serve(sys.argv[2])
    elif len(sys.argv) >= 4 and sys.argv[1] == "run":
        client(sys.argv[2], sys.argv[3], sys.argv[4:])
    else:
        sys.stderr.write(__doc__)
        sys.exit(2)


if __name__ == "__main__":
    main()
