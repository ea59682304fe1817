"""Enter a persona: private mount (and UTS) namespace, persona files overlaid, then exec.

Run as a script with ``python3 -I -S`` for every remote command on a virtual
device, so it imports only the standard library and stays cheap. It never
mounts anything before the new mount namespace exists and has been made
private, so no mount can leak to the host; every mount dies with the
namespace when the command's last process exits.

Layout built inside the namespace (under a tmpfs used as the new root):
- every top-level entry of the host's ``/`` is bind-mounted (recursively) at
  its place, symlinks are copied;
- for each top-level entry of the persona's ``root/``: absent on the host ->
  the persona dir is bind-mounted read-only; present -> merged: files of the
  persona are bind-mounted over the host's, directories the host lacks are
  made by turning that level into a tmpfs with binds of the host's entries;
- ``/data`` and ``/sdcard`` come from ``--device-root`` when given (writable);
- ``bin/`` of the persona is first on PATH, the hostname is the persona's;
- ``--drive DIR`` (Windows personas) is bound writable at ``/C:``: drive C as the PowerShell shim
  and OpenSSH for Windows' SFTP server both name it (``C:\\Users\\edgelab`` = ``/C:/Users/edgelab``);
- ``--home DIR`` (the SSH lab gives each persona one) becomes ``$HOME`` and an ssh session's
  working directory, so ``~/.edgelab/store`` on a virtual device is that device's own, not the
  lab host's real home (which stays mounted: the lab's Python may live under it).
- a Linux or Android persona whose ``persona.yaml`` says ``arch: aarch64`` on an x86-64 lab host gets its own user
  namespace and, in it, its own ``binfmt_misc`` (Linux 6.7+ gives each user namespace one) with
  ``qemu-aarch64-static`` registered for aarch64 ELFs: the device's own build starts as on the
  device (``exec`` of the file, whatever starts it), under user-mode emulation, and nothing is
  registered on the lab host. Without qemu or that kernel feature nothing is registered and such
  an exec fails with "Exec format error", as on a machine without the emulator.

Usage: _enter.py --persona DIR [--device-root DIR] [--hostname NAME] [--home DIR] [--drive DIR]
                 [--wineprefix DIR --wine-template DIR] [--ssh posix|powershell|cmd] -- ARGV...
With ``--ssh`` the command comes from ``SSH_ORIGINAL_COMMAND`` as sshd's
ForceCommand gives it (sftp mapped to the real sftp-server).
"""

from __future__ import annotations

import ctypes
import os
import pwd
import signal
import stat
import sys

CLONE_NEWNS = 0x00020000
CLONE_NEWUTS = 0x04000000
CLONE_NEWUSER = 0x10000000
MS_RDONLY = 1
MS_NOSUID = 2
MS_REMOUNT = 32
MS_BIND = 4096
MS_REC = 16384
MS_UNBINDABLE = 1 << 17
MS_PRIVATE = 1 << 18

SFTP_SERVERS = (
    "/usr/lib/openssh/sftp-server",
    "/usr/libexec/openssh/sftp-server",
    "/usr/libexec/sftp-server",
)
NEWROOT = f"/tmp/.edgelab-persona-root-{os.getuid()}"
DEVICE_DIRS = ("data", "sdcard")

_libc = ctypes.CDLL(None, use_errno=True)
_libc.mount.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_ulong, ctypes.c_char_p]


DIE_WITH_PARENT = "EDGELAB_DIE_WITH_PARENT"  # "1": the command gets SIGHUP when its parent dies
PR_SET_PDEATHSIG = 1


def _die_with_parent() -> None:
    """SIGHUP this process (kept across exec) when the one that started it dies: the ADB emulator's
    commands end with it, as a device's shell commands end when adbd goes. A command that detaches
    (``setsid ... &``) forks first, and a fork does not keep the request: deployments run on."""
    ppid = os.getppid()
    _libc.prctl(PR_SET_PDEATHSIG, signal.SIGHUP, 0, 0, 0)
    if os.getppid() != ppid:  # it died before the request was in place
        os.kill(os.getpid(), signal.SIGHUP)


def die(msg: str, code: int = 125) -> None:
    sys.stderr.write(f"edgelab-persona: {msg}\n")
    sys.exit(code)


def _check(rc: int, what: str) -> None:
    if rc != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"{what}: {os.strerror(err)}")


def mount(src: str | None, target: str, fstype: str | None, flags: int, data: str | None = None) -> None:
    def enc(s):
        return s.encode() if s is not None else None

    _check(_libc.mount(enc(src), enc(target), enc(fstype), flags, enc(data)), f"mount {src} on {target}")


def bind(src: str, target: str, *, recursive: bool = True, readonly: bool = False) -> None:
    mount(src, target, None, MS_BIND | (MS_REC if recursive else 0))
    if readonly:
        mount(None, target, None, MS_REMOUNT | MS_BIND | MS_RDONLY | (MS_REC if recursive else 0))


def make_mountpoint(like: str, target: str) -> bool:
    """Create at ``target`` what a bind of ``like`` needs; copy symlinks. False: nothing to mount."""
    st = os.lstat(like)
    if stat.S_ISLNK(st.st_mode):
        os.symlink(os.readlink(like), target)
        return False
    if stat.S_ISDIR(st.st_mode):
        os.mkdir(target, stat.S_IMODE(st.st_mode))
    else:
        with open(target, "w"):
            pass
    return True


def populate_from_host(host_dir: str, target: str, skip: set[str]) -> None:
    """Bind every entry of ``host_dir`` into the (tmpfs) ``target``, except ``skip``."""
    for name in os.listdir(host_dir):
        if name in skip:
            continue
        src, dst = os.path.join(host_dir, name), os.path.join(target, name)
        try:
            if make_mountpoint(src, dst):
                bind(src, dst)
        except OSError:
            continue  # an entry that cannot be bound (vanished, special) stays empty


def merge(target: str, host_dir: str, persona_dir: str) -> None:
    """Make ``target`` (already showing ``host_dir``) also show the persona's entries."""
    entries = os.listdir(persona_dir)
    # Names the host lacks, and host symlinks a persona file replaces, need a new level.
    missing = [
        e
        for e in entries
        if not os.path.lexists(os.path.join(host_dir, e))
        or (os.path.islink(os.path.join(host_dir, e)) and not os.path.islink(os.path.join(persona_dir, e)))
    ]
    if missing:
        # This level needs new names: rebuild it as a tmpfs of binds.
        mode = stat.S_IMODE(os.stat(host_dir).st_mode)
        mount("tmpfs", target, "tmpfs", MS_NOSUID, f"mode={mode:o}")
        populate_from_host(host_dir, target, skip=set(missing))
    for name in entries:
        p, h, t = (os.path.join(d, name) for d in (persona_dir, host_dir, target))
        if name in missing:
            make_mountpoint(p, t) and bind(p, t, readonly=True)
        elif os.path.isdir(p) and not os.path.islink(p):
            if os.path.isdir(h):
                merge(t, h, p)
            else:
                bind(p, t, readonly=True)
        elif os.path.islink(p):
            continue  # a symlink cannot be mounted over an existing name
        else:
            if os.path.isdir(t):
                continue
            bind(p, t, recursive=False, readonly=True)


# aarch64 ELF (64-bit, little-endian, ET_EXEC or ET_DYN, EM_AARCH64), as qemu's own binfmt
# registration (scripts/qemu-binfmt-conf.sh in qemu) matches it
_AARCH64_MAGIC = b"\\x7fELF\\x02\\x01\\x01\\x00\\x00\\x00\\x00\\x00\\x00\\x00\\x00\\x00\\x02\\x00\\xb7\\x00"
_AARCH64_MASK = (
    b"\\xff\\xff\\xff\\xff\\xff\\xff\\xff\\x00\\xff\\xff\\xff\\xff\\xff\\xff\\xff\\xff\\xfe\\xff\\xff\\xff"
)
QEMU = {"aarch64": ("/usr/bin/qemu-aarch64-static", "/usr/libexec/qemu-binfmt/aarch64-binfmt-P")}
_HOST_ARCH = {"x86_64": "x86_64", "amd64": "x86_64", "aarch64": "aarch64", "arm64": "aarch64"}


def persona_arch(persona: str) -> str | None:
    """The ``arch:`` line of the persona's persona.yaml (stdlib only: a line scan, not YAML)."""
    try:
        with open(os.path.join(persona, "persona.yaml")) as f:
            for line in f:
                if line.startswith("arch:"):
                    return line.split(":", 1)[1].split("#")[0].strip().strip("'\"") or None
    except OSError:
        return None
    return None


def emulator_for(arch: str | None) -> str | None:
    """qemu's user-mode emulator for a persona whose CPU is not the lab host's, if installed."""
    if not arch or _HOST_ARCH.get(os.uname().machine.lower()) == arch:
        return None
    exe = QEMU.get(arch, (None,))[0]
    return exe if exe and os.access(exe, os.X_OK) else None


def _map_root_from_outside() -> None:
    """Map every uid/gid to itself in the user namespace this process is about to make.

    Only a process outside the new namespace (with CAP_SETUID there) may write a map wider than
    one id; a forked helper waits for the unshare and writes this process's maps.
    """
    parent = os.getpid()
    r, w = os.pipe()
    helper = os.fork()
    if helper == 0:  # the helper: still in the lab host's user namespace
        os.close(w)
        code = 1
        try:
            if os.read(r, 1) == b"u":
                for name in ("uid_map", "gid_map"):
                    with open(f"/proc/{parent}/{name}", "w") as f:
                        f.write("0 0 4294967295")
                code = 0
        except OSError as e:
            sys.stderr.write(f"edgelab-persona: cannot map ids: {e}\n")
        os._exit(code)
    os.close(r)
    try:
        _check(_libc.unshare(CLONE_NEWUSER), "unshare(user)")
        os.write(w, b"u")
    finally:
        os.close(w)
        _, status = os.waitpid(helper, 0)
    if os.waitstatus_to_exitcode(status) != 0:
        raise OSError(1, "the id-map helper failed")


def register_emulator(root: str, arch: str, qemu: str) -> bool:
    """Mount this user namespace's own binfmt_misc under ``root`` and register ``qemu`` for
    ``arch`` ELFs ('F': the emulator is opened now, so it works inside the chroot too)."""
    mnt = os.path.join(root, "proc/sys/fs/binfmt_misc")
    try:
        mount("binfmt_misc", mnt, "binfmt_misc", MS_NOSUID)
        with open(os.path.join(mnt, "register"), "wb") as f:
            f.write(b":edgelab-qemu-" + arch.encode() + b":M::" + _AARCH64_MAGIC + b":" + _AARCH64_MASK)
            f.write(b":" + qemu.encode() + b":F")
    except OSError as e:
        sys.stderr.write(f"edgelab-persona: no {arch} emulation ({e})\n")
        return False
    return True


def enter_namespace(hostname: str | None, own_user_ns: bool = False) -> None:
    uid, gid = os.getuid(), os.getgid()
    flags = CLONE_NEWNS | (CLONE_NEWUTS if hostname else 0)
    if uid == 0 and own_user_ns:
        _map_root_from_outside()  # root stays root (every id maps to itself), in a namespace of its own
    elif uid != 0:
        flags |= CLONE_NEWUSER
    _check(_libc.unshare(flags), "unshare")
    if uid != 0:
        # An ordinary user keeps its own uid inside (mapped to itself).
        with open("/proc/self/setgroups", "w") as f:
            f.write("deny")
        with open("/proc/self/uid_map", "w") as f:
            f.write(f"{uid} {uid} 1")
        with open("/proc/self/gid_map", "w") as f:
            f.write(f"{gid} {gid} 1")
    # Nothing from here on may propagate to the host.
    mount(None, "/", None, MS_REC | MS_PRIVATE)
    if hostname:
        name = hostname.encode()
        _check(_libc.sethostname(name, len(name)), "sethostname")


def own_mountpoint(path: str) -> None:
    """Make (or accept) ``path`` only as a real directory of ours, mode 0700.

    It lives in the shared /tmp under a predictable name, so another user could
    plant it first (a symlink, or a directory they own) to steer our mounts.
    """
    try:
        os.mkdir(path, 0o700)
    except FileExistsError:
        pass
    st = os.lstat(path)
    if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.getuid() or stat.S_IMODE(st.st_mode) & 0o022:
        raise OSError(f"{path} is not a directory owned by uid {os.getuid()} and writable only by it")


def build_root(persona: str, device_root: str | None, drive: str | None = None) -> str:
    own_mountpoint(NEWROOT)
    mount("tmpfs", NEWROOT, "tmpfs", MS_NOSUID, "mode=755")
    mount(None, NEWROOT, None, MS_UNBINDABLE)  # recursive binds below must not copy the new root
    proot = os.path.join(persona, "root")
    pentries = set(os.listdir(proot)) if os.path.isdir(proot) else set()
    device_entries = set(DEVICE_DIRS) if device_root else set()
    for name in os.listdir("/"):
        src, dst = "/" + name, os.path.join(NEWROOT, name)
        if name in device_entries:
            continue
        try:
            if make_mountpoint(src, dst):
                bind(src, dst)
        except OSError:
            continue
    for name in sorted(pentries - device_entries):
        p, h, t = os.path.join(proot, name), "/" + name, os.path.join(NEWROOT, name)
        if not os.path.lexists(h):
            make_mountpoint(p, t) and bind(p, t, readonly=True)
        elif os.path.isdir(p) and os.path.isdir(h):
            merge(t, h, p)
    for name in sorted(device_entries):
        src = os.path.join(device_root, name)
        os.makedirs(src, exist_ok=True)
        dst = os.path.join(NEWROOT, name)
        if not os.path.lexists(dst):
            os.mkdir(dst)
        bind(src, dst)
    if drive:
        dst = os.path.join(NEWROOT, "C:")
        if not os.path.lexists(dst):
            os.mkdir(dst)
        bind(drive, dst)
    return NEWROOT


def ssh_argv(shell_kind: str) -> list[str]:
    """What sshd would have run for this session, inside the persona."""
    cmd = os.environ.get("SSH_ORIGINAL_COMMAND")
    login = pwd.getpwuid(os.getuid()).pw_shell or "/bin/sh"
    if (
        cmd is not None
        and cmd.strip() in ("internal-sftp", *SFTP_SERVERS)
        or (cmd or "").endswith("/sftp-server")
    ):
        for server in SFTP_SERVERS:
            if os.access(server, os.X_OK):
                return [server]
        die("no sftp-server binary on the lab host")
    if shell_kind == "powershell":  # DefaultShell = powershell.exe: sshd runs `powershell -c <command>`
        if cmd is None:
            return ["powershell", "-NoLogo"]
        # powershell.exe reads that as a Win32 command line (CommandLineToArgvW: double quotes are eaten,
        # runs of spaces collapse when -Command joins the words back), so the shim gets those words.
        sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
        from winsim.native import split_command_line

        return ["powershell", "-NoLogo", "-Command", *split_command_line(cmd)]
    if shell_kind == "cmd":  # OpenSSH for Windows' default: `cmd.exe /c <command>`
        return ["cmd"] + (["/c", cmd] if cmd is not None else [])
    if cmd is None:
        return [login, "-l"]
    return [login, "-c", cmd]


def main(args: list[str]) -> None:
    persona = device_root = hostname = ssh_shell = home = drive = wineprefix = wine_template = None
    while args and args[0] != "--":
        opt = args.pop(0)
        if not args:
            die(f"missing value for {opt}", 2)
        val = args.pop(0)
        if opt == "--persona":
            persona = os.path.abspath(val)
        elif opt == "--device-root":
            device_root = os.path.abspath(val)
        elif opt == "--hostname":
            hostname = val
        elif opt == "--home":
            home = os.path.abspath(val)
        elif opt == "--drive":
            drive = os.path.abspath(val)
        elif opt == "--ssh":
            ssh_shell = val
        elif opt == "--wineprefix":
            wineprefix = os.path.abspath(val)
        elif opt == "--wine-template":
            wine_template = os.path.abspath(val)
        else:
            die(f"unknown option {opt}", 2)
    argv = args[1:]
    if not persona or not os.path.isdir(persona):
        die(f"persona directory {persona!r} not found", 2)
    if ssh_shell:
        argv = ssh_argv(ssh_shell)
    if not argv:
        die("no command", 2)
    cwd = os.getcwd()
    arch = persona_arch(persona)
    # a Windows persona (it has a drive C) starts .exe files through wine, never an ELF: no emulator,
    # and no user namespace of its own (its taskkill reads other commands' /proc/PID/environ, which a
    # sibling user namespace may not)
    qemu = emulator_for(arch) if drive is None else None
    try:
        enter_namespace(hostname, own_user_ns=qemu is not None)
        root = build_root(persona, device_root, drive)
        if qemu is not None and arch is not None:
            register_emulator(root, arch, qemu)
        os.chroot(root)
    except OSError as e:
        die(f"cannot enter persona {os.path.basename(persona)}: {e}")
    env = dict(os.environ)
    if home:
        env["HOME"] = home
    try:
        os.chdir(home if home and ssh_shell else cwd)  # sshd starts a session in the home
    except OSError:
        os.chdir(env.get("HOME", "/"))
    path = [os.path.join(persona, "bin")]
    if device_root or os.path.isdir(os.path.join(persona, "root", "system", "bin")):
        path += ["/system/bin", "/system/xbin"]
    if ssh_shell == "posix":
        # bash sources ~/.bashrc for every command sshd hands it: the LAB HOST's start-up file,
        # which a device would not run (a pyenv init there costs ~0.2 s CPU per command, more
        # than half a probe). SHLVL=1 makes bash skip it; the lab's Python stays on PATH as
        # that init would have put it (playbooks run ``python3 -m edgelab.reference``).
        env["SHLVL"] = "1"
        path.append(os.path.dirname(sys.executable))
    env["PATH"] = ":".join(path + [env.get("PATH") or "/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin"])
    env["EDGELAB_PERSONA"] = os.path.basename(persona)
    env["EDGELAB_PERSONA_DIR"] = persona
    env["EDGELAB_SIM_LIB"] = os.path.dirname(os.path.abspath(__file__))  # the winsim package's parent
    if wineprefix and wine_template:  # where this Windows persona's .exe files run (winsim.native)
        env["EDGELAB_WINEPREFIX"], env["EDGELAB_WINE_TEMPLATE"] = wineprefix, wine_template
    if ssh_shell in ("powershell", "cmd") and argv[0] in ("powershell", "cmd"):
        # OpenSSH for Windows runs a session in a job object that dies with its first process
        # (JOB_OBJECT_LIMIT_KILL_ON_JOB_CLOSE); that process is this one after exec.
        env["EDGELAB_WIN_JOB"] = str(os.getpid())
    # Python starts with SIGPIPE (and SIGXFSZ) ignored, and an ignored signal survives exec: the
    # command would never see its reader go (a sampler loop echoing into a dead pipe forever).
    # A device's commands start with the default dispositions, as adbd's and sshd's children do.
    for name in ("SIGPIPE", "SIGXFSZ"):
        if hasattr(signal, name):
            signal.signal(getattr(signal, name), signal.SIG_DFL)
    if env.pop(DIE_WITH_PARENT, None) == "1":
        _die_with_parent()
    try:
        os.execvpe(argv[0], argv, env)
    except FileNotFoundError:
        die(f"{argv[0]}: command not found", 127)
    except PermissionError:
        die(f"{argv[0]}: permission denied", 126)


if __name__ == "__main__":
    main(sys.argv[1:])
