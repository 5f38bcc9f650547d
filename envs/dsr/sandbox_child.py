"""The process the code probe runs a model's ``solution()`` in (started by ``sandbox.py``).

Run as ``python -I -S sandbox_child.py CPU_S MEMORY_MB FILE_KB OPEN_FILES`` in an empty
temporary directory. It sets those limits on itself first (not in a ``preexec_fn``, which is
unsafe in a threaded parent such as a concurrent evaluation), then reads the model's code on stdin,
then, before running it:

- imports the pure standard-library modules the code may use, and gives the code an
  ``__import__`` that allows only those (no ``os``, ``sys``, ``subprocess``, ``socket``...);
- installs an audit hook (which cannot be removed) that refuses to open files outside the
  working directory, start processes, fork, open sockets, load C code via ctypes, or change
  the file system outside the working directory. Every refusal is recorded, and any refusal
  scores the answer 0 even if the code catches the error.

It writes one JSON line to the stdout it started with: ``{"ok": ..., "value": ..., "error": ...,
"violations": [...]}``. Nothing about the instance's truth is ever given to this process.
"""

import builtins
import io
import json
import os
import resource
import sys

# Limits first, before any of the model's bytes are read: CPU s, address space MB, file KB, fds.
_cpu, _memory_mb, _file_kb, _files = (int(a) for a in sys.argv[1:5])
resource.setrlimit(resource.RLIMIT_CPU, (_cpu, _cpu + 1))
resource.setrlimit(resource.RLIMIT_AS, (_memory_mb << 20, _memory_mb << 20))
resource.setrlimit(resource.RLIMIT_FSIZE, (_file_kb << 10, _file_kb << 10))
resource.setrlimit(resource.RLIMIT_NOFILE, (_files, _files))
resource.setrlimit(resource.RLIMIT_CORE, (0, 0))

ALLOWED_MODULES = (
    "abc", "array", "bisect", "collections", "copy", "dataclasses", "decimal", "enum", "fractions",
    "functools", "heapq", "itertools", "json", "math", "numbers", "operator", "random", "re",
    "statistics", "string", "typing",
)  # fmt: skip
"""Pure modules with no file, process or network access (the code's whole import world)."""

for _name in ALLOWED_MODULES:
    __import__(_name)

_WORKDIR = os.path.realpath(os.getcwd())
_RESULT_FD = os.dup(1)
_VIOLATIONS: list[str] = []
_BLOCKED_PREFIXES = ("subprocess.", "socket.", "ctypes.", "os.exec", "os.spawn", "os.posix_spawn")
_BLOCKED_EVENTS = {
    "os.system",
    "os.fork",
    "os.forkpty",
    "os.kill",
    "os.killpg",
    "os.chdir",
    "os.chmod",
    "os.chown",
    "os.symlink",
    "os.link",
    "shutil.rmtree",
    "sys.setrecursionlimit",
    "sys.settrace",
    "sys.setprofile",
    "_posixsubprocess.fork_exec",
    "pty.spawn",
    "mmap.__new__",
    "resource.setrlimit",
}
_PATH_EVENTS = {
    "open",
    "os.remove",
    "os.rename",
    "os.rmdir",
    "os.mkdir",
    "os.truncate",
    "os.listdir",
    "os.scandir",
}


def _inside(path: object) -> bool:
    if isinstance(path, int):  # an already open descriptor (e.g. the result fd)
        return True
    if isinstance(path, bytes):
        path = os.fsdecode(path)
    if not isinstance(path, str):
        return False
    full = os.path.realpath(os.path.join(_WORKDIR, path))
    return full == _WORKDIR or full.startswith(_WORKDIR + os.sep)


def _refuse(what: str) -> None:
    _VIOLATIONS.append(what)
    raise PermissionError(f"sandbox: {what} is not allowed")


def _audit(event: str, args: tuple[object, ...]) -> None:
    if event in _BLOCKED_EVENTS or event.startswith(_BLOCKED_PREFIXES):
        _refuse(event)
    elif event in _PATH_EVENTS and args and not _inside(args[0]):
        _refuse(f"{event} {args[0]!r} (outside the working directory)")
    elif event == "import" and args and str(args[0]).split(".")[0] not in ALLOWED_MODULES:
        _refuse(f"import of {args[0]!r}")


def _guarded_import(name: str, globals=None, locals=None, fromlist=(), level=0):  # type: ignore[no-untyped-def]
    if level != 0 or name.split(".")[0] not in ALLOWED_MODULES:
        _VIOLATIONS.append(f"import of {name!r}")
        raise ImportError(f"sandbox: import of {name!r} is not allowed")
    return builtins.__import__(name, globals, locals, fromlist, level)


def _jsonable(value: object) -> object:
    if isinstance(value, set | frozenset):
        return sorted(value, key=repr)
    raise TypeError(f"solution() returned a {type(value).__name__}, which is not JSON-serialisable")


def _finish(result: dict[str, object]) -> None:
    result["violations"] = _VIOLATIONS[:20]
    try:
        line = json.dumps(result, default=_jsonable)
    except (TypeError, ValueError) as error:
        line = json.dumps({"ok": False, "error": str(error), "violations": _VIOLATIONS[:20]})
    os.write(_RESULT_FD, (line + "\n").encode())


def main() -> None:
    code = sys.stdin.read()
    sys.stdin = io.StringIO()
    sys.stdout = sys.stderr = io.StringIO()  # the code's prints never reach the result line
    safe_builtins = dict(vars(builtins))
    safe_builtins["__import__"] = _guarded_import
    for name in ("open", "exec", "eval", "compile", "input", "breakpoint", "help", "exit", "quit"):
        safe_builtins.pop(name, None)
    namespace: dict[str, object] = {"__builtins__": safe_builtins, "__name__": "solution"}
    sys.addaudithook(_audit)
    try:
        exec(compile(code, "solution.py", "exec"), namespace)
        solution = namespace.get("solution")
        if not callable(solution):
            _finish({"ok": False, "error": "the code defines no solution() function"})
            return
        value = solution()
    except MemoryError:
        _finish({"ok": False, "error": "memory limit exceeded"})
    except RecursionError:
        _finish({"ok": False, "error": "recursion too deep"})
    except BaseException as error:  # the model's code may raise anything, SystemExit included
        _finish({"ok": False, "error": f"{type(error).__name__}: {error}"[:300]})
    else:
        _finish({"ok": True, "value": value})


main()
