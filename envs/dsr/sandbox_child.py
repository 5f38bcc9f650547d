"""The process the code probe runs a model's ``solution()`` in (started by ``sandbox.py``).

Run as ``python -I -S sandbox_child.py CPU_S MEMORY_MB FILE_KB OPEN_FILES``, normally inside
the bubblewrap sandbox ``sandbox.py`` builds (the operating-system barrier: no network, a
read-only view of the interpreter only, a private tmpfs as its working directory, an
unprivileged uid, its own pid namespace). Here, before any of the model's bytes are read, it
adds the in-kernel and in-process layers:

1. rlimits on itself: CPU seconds, address space, file size, open files, no new processes and
   no core dumps (set here, not in a ``preexec_fn``, which is unsafe in a threaded parent);
2. a seccomp filter that kills the process on any system call the probe never needs
   (sockets, exec, fork/clone, ptrace, mount and namespace calls, mknod, links, renames,
   chmod/chown, utime, set*id, kernel modules, bpf...). Seccomp filters cannot be removed,
   so this holds even if the code below is subverted. The parent sees the kill (SIGSYS);
3. an import allowlist and an audit hook (which cannot be removed either) that refuse the
   same things from Python, plus the reads that sandbox escapes start with (live frames,
   ``gc``). Every refusal is written to the parent at once, so code that later
   tampers with this process cannot take a recorded violation back; any violation scores 0.

The policy the hook enforces lives in closure cells of one function, not in module globals.
It writes JSON lines to the stdout it started with: ``{"violation": ...}`` as they happen,
then ``{"ok": ..., "value": ..., "error": ...}``. Nothing about the instance's truth is ever
given to this process.
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
resource.setrlimit(resource.RLIMIT_NPROC, (0, 0))

ALLOWED_MODULES = (
    "abc", "array", "bisect", "collections", "copy", "dataclasses", "decimal", "enum", "fractions",
    "functools", "heapq", "itertools", "json", "math", "numbers", "operator", "random", "re",
    "statistics", "string", "typing",
)  # fmt: skip
"""Pure modules with no file, process or network access (the code's whole import world)."""

for _name in ALLOWED_MODULES:
    __import__(_name)

_RESULT_FD = os.dup(1)
_MAX_REPORTED = 20


def _send(record: dict[str, object]) -> None:
    os.write(_RESULT_FD, (json.dumps(record) + "\n").encode())


# ---------------------------------------------------------------------------------------------
# Seccomp: a classic BPF program, built here because the child imports nothing from embodia.

# System calls the probe never needs, by name; numbers per architecture below.
_DENIED = (
    "socket", "socketpair", "connect", "bind", "listen", "accept", "accept4", "sendto", "recvfrom",
    "sendmsg", "recvmsg", "sendmmsg", "recvmmsg", "shutdown", "setsockopt", "getsockopt",
    "clone", "clone3", "fork", "vfork", "execve", "execveat", "ptrace", "process_vm_readv",
    "process_vm_writev", "kill", "tkill", "mount", "umount2", "pivot_root", "chroot", "unshare",
    "setns", "fsopen", "fsconfig", "fsmount", "fspick", "move_mount", "open_tree", "mount_setattr",
    "mknod", "mknodat", "link", "linkat", "symlink", "symlinkat", "rename", "renameat", "renameat2",
    "chmod", "fchmod", "fchmodat", "fchmodat2", "chown", "fchown", "lchown", "fchownat", "utime",
    "utimes", "futimesat", "utimensat", "setuid", "setgid", "setreuid", "setregid", "setresuid",
    "setresgid", "setfsuid", "setfsgid", "setgroups", "personality", "bpf", "perf_event_open",
    "userfaultfd", "io_uring_setup", "io_uring_enter", "io_uring_register", "keyctl", "add_key",
    "request_key", "init_module", "finit_module", "delete_module", "kexec_load", "kexec_file_load",
    "reboot", "swapon", "swapoff", "acct", "quotactl", "sethostname", "setdomainname",
    "settimeofday", "open_by_handle_at", "name_to_handle_at", "iopl", "ioperm", "modify_ldt",
)  # fmt: skip

_X86_64 = {
    "socket": 41, "connect": 42, "accept": 43, "sendto": 44, "recvfrom": 45, "sendmsg": 46,
    "recvmsg": 47, "shutdown": 48, "bind": 49, "listen": 50, "socketpair": 53, "setsockopt": 54,
    "getsockopt": 55, "clone": 56, "fork": 57, "vfork": 58, "execve": 59, "kill": 62,
    "rename": 82, "link": 86, "symlink": 88, "chmod": 90, "fchmod": 91, "chown": 92, "fchown": 93,
    "lchown": 94, "ptrace": 101, "setuid": 105, "setgid": 106, "setreuid": 113, "setregid": 114,
    "setgroups": 116, "setresuid": 117, "setresgid": 119, "setfsuid": 122, "setfsgid": 123,
    "utime": 132, "mknod": 133, "personality": 135, "modify_ldt": 154, "pivot_root": 155,
    "chroot": 161, "acct": 163, "settimeofday": 164, "mount": 165, "umount2": 166, "swapon": 167,
    "swapoff": 168, "reboot": 169, "sethostname": 170, "setdomainname": 171, "iopl": 172,
    "ioperm": 173, "init_module": 175, "delete_module": 176, "quotactl": 179, "tkill": 200,
    "utimes": 235, "kexec_load": 246, "add_key": 248, "request_key": 249, "keyctl": 250,
    "mknodat": 259, "fchownat": 260, "futimesat": 261, "renameat": 264, "linkat": 265,
    "symlinkat": 266, "fchmodat": 268, "unshare": 272, "utimensat": 280, "accept4": 288,
    "perf_event_open": 298, "recvmmsg": 299, "name_to_handle_at": 303, "open_by_handle_at": 304,
    "sendmmsg": 307, "setns": 308, "process_vm_readv": 310, "process_vm_writev": 311,
    "finit_module": 313, "renameat2": 316, "kexec_file_load": 320, "bpf": 321, "execveat": 322,
    "userfaultfd": 323, "io_uring_setup": 425, "io_uring_enter": 426, "io_uring_register": 427,
    "open_tree": 428, "move_mount": 429, "fsopen": 430, "fsconfig": 431, "fsmount": 432,
    "fspick": 433, "clone3": 435, "mount_setattr": 442, "fchmodat2": 452,
}  # fmt: skip
# The generic table (aarch64 and other newer ports): no fork, vfork or path-only legacy calls.
_AARCH64 = {
    "mknodat": 33, "symlinkat": 36, "linkat": 37, "renameat": 38, "umount2": 39, "mount": 40,
    "pivot_root": 41, "chroot": 51, "fchmod": 52, "fchmodat": 53, "fchownat": 54, "fchown": 55,
    "quotactl": 60, "utimensat": 88, "acct": 89, "personality": 92, "unshare": 97,
    "kexec_load": 104, "init_module": 105, "delete_module": 106, "ptrace": 117, "kill": 129,
    "tkill": 130, "reboot": 142, "setregid": 143, "setgid": 144, "setreuid": 145, "setuid": 146,
    "setresuid": 147, "setresgid": 149, "setfsuid": 151, "setfsgid": 152, "setgroups": 159,
    "sethostname": 161, "setdomainname": 162, "settimeofday": 170, "socket": 198,
    "socketpair": 199, "bind": 200, "listen": 201, "accept": 202, "connect": 203, "sendto": 206,
    "recvfrom": 207, "setsockopt": 208, "getsockopt": 209, "shutdown": 210, "sendmsg": 211,
    "recvmsg": 212, "add_key": 217, "request_key": 218, "keyctl": 219, "clone": 220, "execve": 221,
    "swapon": 224, "swapoff": 225, "perf_event_open": 241, "accept4": 242, "recvmmsg": 243,
    "name_to_handle_at": 264, "open_by_handle_at": 265, "setns": 268, "sendmmsg": 269,
    "process_vm_readv": 270, "process_vm_writev": 271, "finit_module": 273, "renameat2": 276,
    "bpf": 280, "execveat": 281, "userfaultfd": 282, "kexec_file_load": 294,
    "io_uring_setup": 425, "io_uring_enter": 426, "io_uring_register": 427, "open_tree": 428,
    "move_mount": 429, "fsopen": 430, "fsconfig": 431, "fsmount": 432, "fspick": 433,
    "clone3": 435, "mount_setattr": 442, "fchmodat2": 452,
}  # fmt: skip
_ARCHES = {"x86_64": (0xC000003E, _X86_64), "aarch64": (0xC00000B7, _AARCH64)}


def _seccomp_program(audit_arch: int, numbers: dict[str, int]) -> list[tuple[int, int, int, int]]:
    """BPF instructions (code, jt, jf, k): a foreign architecture, an x32 call or a denied call
    kills the process; everything else is allowed."""
    load_word, jump_eq, jump_ge, ret = 0x20, 0x15, 0x35, 0x06
    kill, allow = 0x80000000, 0x7FFF0000  # SECCOMP_RET_KILL_PROCESS, SECCOMP_RET_ALLOW
    denied = sorted({numbers[name] for name in _DENIED if name in numbers})
    checks = [(jump_ge, 0, 0, 0x40000000)] + [(jump_eq, 0, 0, nr) for nr in denied]
    program = [(load_word, 0, 0, 4)]  # seccomp_data.arch
    program.append((jump_eq, 1, 0, audit_arch))  # the right architecture skips the kill below
    program.append((ret, 0, 0, kill))
    program.append((load_word, 0, 0, 0))  # seccomp_data.nr
    for index, (code, _, _, k) in enumerate(checks):
        to_kill = len(checks) - index  # past the remaining checks and the allow
        program.append((code, to_kill, 0, k))
    program.append((ret, 0, 0, allow))
    program.append((ret, 0, 0, kill))
    return program


def _install_seccomp() -> str:
    """Install the filter; returns "" or why it could not be (the parent decides what that means)."""
    arch = os.uname().machine
    if arch not in _ARCHES:
        return f"no seccomp table for {arch}"
    import ctypes

    class SockFilter(ctypes.Structure):
        _fields_ = [
            ("code", ctypes.c_ushort),
            ("jt", ctypes.c_ubyte),
            ("jf", ctypes.c_ubyte),
            ("k", ctypes.c_uint),
        ]

    class SockFprog(ctypes.Structure):
        _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.POINTER(SockFilter))]

    audit_arch, numbers = _ARCHES[arch]
    instructions = _seccomp_program(audit_arch, numbers)
    filters = (SockFilter * len(instructions))(*(SockFilter(*i) for i in instructions))
    program = SockFprog(len(instructions), filters)
    libc = ctypes.CDLL(None, use_errno=True)
    pr_set_no_new_privs, pr_set_seccomp, seccomp_mode_filter = 38, 22, 2
    if libc.prctl(pr_set_no_new_privs, 1, 0, 0, 0) != 0:
        return f"prctl(NO_NEW_PRIVS) failed: errno {ctypes.get_errno()}"
    if libc.prctl(pr_set_seccomp, seccomp_mode_filter, ctypes.byref(program), 0, 0) != 0:
        return f"prctl(SECCOMP) failed: errno {ctypes.get_errno()}"
    return ""


_SECCOMP_PROBLEM = _install_seccomp()
for _name in [m for m in sys.modules if m == "ctypes" or m.startswith(("ctypes.", "_ctypes"))]:
    del sys.modules[_name]  # out of the code's reach (the filter stays regardless)


# ---------------------------------------------------------------------------------------------
# The Python layer: import allowlist and audit hook, their policy held in closures.


def _make_guards(workdir: str, violations: list[str]):  # type: ignore[no-untyped-def]
    allowed = frozenset(ALLOWED_MODULES)
    blocked_prefixes = (
        "subprocess.", "socket.", "ctypes.", "os.exec", "os.spawn", "os.posix_spawn", "gc.",
        "sys._current_frames", "cpython.", "code.__new__", "function.__new__",
    )  # fmt: skip
    blocked_events = frozenset({
        "os.system", "os.fork", "os.forkpty", "os.kill", "os.killpg", "os.chdir", "os.chmod",
        "os.chown", "os.symlink", "os.link", "os.utime", "os.mknod", "os.mkfifo", "shutil.rmtree",
        "sys.setrecursionlimit", "sys.settrace", "sys.setprofile", "sys.addaudithook",
        "_posixsubprocess.fork_exec", "pty.spawn", "mmap.__new__", "resource.setrlimit",
        "resource.prlimit", "marshal.loads", "marshal.load",
    })  # fmt: skip
    # Both paths of a rename or link must be inside; stat/readlink leak what exists outside.
    path_events = frozenset({
        "open", "os.remove", "os.rename", "os.rmdir", "os.mkdir", "os.truncate", "os.listdir",
        "os.scandir", "os.stat", "os.readlink", "os.lstat",
    })  # fmt: skip
    two_path_events = frozenset({"os.rename", "os.link", "os.symlink"})
    # Live frames lead to every module's globals; CPython audits reading these (not __globals__).
    escape_attributes = frozenset({"tb_frame", "gi_frame", "cr_frame", "ag_frame"})
    import_allowed = frozenset(ALLOWED_MODULES)  # a cell of its own: the hook's is not reachable
    real_import = builtins.__import__
    send = _send
    limit = _MAX_REPORTED

    def inside(path: object) -> bool:
        if isinstance(path, int):  # an already open descriptor
            return True
        if isinstance(path, bytes):
            path = os.fsdecode(path)
        if not isinstance(path, str):
            return False
        full = os.path.realpath(os.path.join(workdir, path))
        return full == workdir or full.startswith(workdir + os.sep)

    def paths_of(event: str, args: tuple[object, ...]) -> tuple[object, ...]:
        # a rename's or link's target is its second argument; open's second is its mode
        return args[:2] if event in two_path_events else args[:1]

    def refuse(what: str) -> None:
        if len(violations) < limit:
            violations.append(what)
            send({"violation": what})
        raise PermissionError(f"sandbox: {what} is not allowed")

    def audit(event: str, args: tuple[object, ...]) -> None:
        if event in blocked_events or event.startswith(blocked_prefixes):
            refuse(event)
        elif event in path_events and args and not all(inside(a) for a in paths_of(event, args)):
            refuse(f"{event} {args[0]!r} (outside the working directory)")
        elif event == "import" and args and str(args[0]).split(".")[0] not in allowed:
            refuse(f"import of {args[0]!r}")
        elif event == "object.__getattr__" and len(args) > 1 and args[1] in escape_attributes:
            refuse(f"reading {args[1]} (a sandbox escape path)")

    def guarded_import(
        name: str,
        globals: dict[str, object] | None = None,
        locals: dict[str, object] | None = None,
        fromlist: tuple[str, ...] = (),
        level: int = 0,
    ) -> object:
        if level != 0 or name.split(".")[0] not in import_allowed:
            if len(violations) < limit:
                violations.append(f"import of {name!r}")
                send({"violation": f"import of {name!r}"})
            raise ImportError(f"sandbox: import of {name!r} is not allowed")
        return real_import(name, globals, locals, fromlist, level)

    return audit, guarded_import


def _jsonable(value: object) -> object:
    if isinstance(value, set | frozenset):
        return sorted(value, key=repr)
    raise TypeError(f"solution() returned a {type(value).__name__}, which is not JSON-serialisable")


def _finish(result: dict[str, object]) -> None:
    try:
        line = json.dumps(result, default=_jsonable)
    except (TypeError, ValueError) as error:
        line = json.dumps({"ok": False, "error": str(error)})
    os.write(_RESULT_FD, (line + "\n").encode())


def main() -> None:
    if _SECCOMP_PROBLEM:
        _send({"seccomp": _SECCOMP_PROBLEM})
    code = sys.stdin.read()
    sys.stdin = io.StringIO()
    sys.stdout = sys.stderr = io.StringIO()  # the code's prints never reach the result line
    violations: list[str] = []
    audit, guarded_import = _make_guards(os.path.realpath(os.getcwd()), violations)
    safe_builtins = dict(vars(builtins))
    safe_builtins["__import__"] = guarded_import
    for name in ("open", "exec", "eval", "compile", "input", "breakpoint", "help", "exit", "quit"):
        safe_builtins.pop(name, None)
    namespace: dict[str, object] = {"__builtins__": safe_builtins, "__name__": "solution"}
    try:
        compiled = compile(code, "solution.py", "exec")
    except (SyntaxError, ValueError) as error:
        _finish({"ok": False, "error": f"{type(error).__name__}: {error}"[:300]})
        return
    sys.addaudithook(audit)
    del audit
    try:
        exec(compiled, namespace)
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
