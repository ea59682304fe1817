"""The virtual lab as an ordinary user: sim up, device ls/check, probe, sim down as a throwaway account.

Issue 2 asks that ``sim up`` work as root (CI) *and* as an ordinary user (user
namespaces, a high port). Root can check that for real: it creates a user,
gives it a Python it can read (a venv of the system python3 holding links to
this interpreter's packages, since the project's own Python may sit in an
unreadable home), runs the CLI as that user, and verifies that ``sim down``
leaves none of the user's processes behind. The user and every process it
ran are removed afterwards, even on failure.
"""

from __future__ import annotations

import importlib.metadata as md
import json
import os
import re
import secrets
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import time
import tomllib
from dataclasses import dataclass
from pathlib import Path

import pytest
from packaging.requirements import Requirement

import edgelab

pytestmark = [pytest.mark.ssh, pytest.mark.adb, pytest.mark.slow]

REPO = Path(edgelab.__file__).resolve().parents[1]
SYSTEM_PYTHON = "/usr/bin/python3"
SSH_NAMES = {"orin-agx", "orin-nano", "thor", "wsl-hx370", "win-hx370-rtx5090", "xelite-pc"}
ADB_NAMES = {"s25", "s24", "rb3g2", "sa8775p"}


# ---------------------------------------------------------------- preconditions


def _world_readable_path(path: Path) -> bool:
    """Every directory from / down to ``path`` lets others in (so another user can import the repo)."""
    for p in [*reversed(path.parents), path]:
        if not os.stat(p).st_mode & stat.S_IXOTH:
            return False
    return bool(os.stat(path / "edgelab" / "__init__.py").st_mode & stat.S_IROTH)


def _userns_enabled() -> bool:
    for knob, off in (
        ("/proc/sys/kernel/unprivileged_userns_clone", "0"),
        ("/proc/sys/user/max_user_namespaces", "0"),
    ):
        try:
            if Path(knob).read_text().strip() == off:
                return False
        except OSError:
            pass
    return True


def _skip_reason() -> str | None:
    if os.geteuid() != 0:
        return "needs root to create a throwaway user"
    for tool in ("useradd", "userdel"):
        if shutil.which(tool) is None:
            return f"{tool} is not installed (package passwd)"
    if not os.access(SYSTEM_PYTHON, os.X_OK):
        return f"{SYSTEM_PYTHON} is missing (package python3)"
    ver = subprocess.run(
        [SYSTEM_PYTHON, "-c", "import sys; print(*sys.version_info[:2])"], capture_output=True, text=True
    ).stdout.split()
    if ver != [str(sys.version_info[0]), str(sys.version_info[1])]:
        return f"{SYSTEM_PYTHON} is {'.'.join(ver)}, not {sys.version_info[0]}.{sys.version_info[1]}: cannot reuse these packages"
    if not _world_readable_path(REPO):
        return f"the checkout {REPO} is not readable by other users"
    if not _userns_enabled():
        return "unprivileged user namespaces are disabled on this host"
    return None


# ---------------------------------------------------------------- a Python the user can read


def _dist_closure(roots: list[str]) -> list[md.Distribution]:
    """Installed distributions ``roots`` need (no extras), found through their metadata."""
    seen: dict[str, md.Distribution] = {}
    todo = list(roots)
    while todo:
        req = Requirement(todo.pop())
        key = re.sub(r"[-_.]+", "-", req.name).lower()
        if key in seen or (req.marker and not req.marker.evaluate({"extra": ""})):
            continue
        try:
            dist = md.distribution(req.name)
        except md.PackageNotFoundError:
            continue  # optional on this platform; the CLI run below shows if it mattered
        seen[key] = dist
        todo += dist.requires or []
    return list(seen.values())


def _link_or_copy(src: Path, dst: Path) -> None:
    if dst.exists():
        return  # a RECORD may list a file twice
    dst.parent.mkdir(parents=True, exist_ok=True)
    try:
        os.link(src, dst)  # cheap; the user cannot write root's files through the link
    except OSError:
        shutil.copy2(src, dst)


def _populate_site(site: Path) -> None:
    """Put this interpreter's copies of the project's dependencies into ``site``; the repo via a .pth."""
    deps = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["dependencies"]
    for dist in _dist_closure(deps):
        base = Path(dist.locate_file("")).resolve()
        for f in dist.files or []:
            src = Path(dist.locate_file(f)).resolve()
            if base not in src.parents or not src.is_file():
                continue  # scripts outside site-packages, or a RECORD line with no file
            _link_or_copy(src, site / src.relative_to(base))
    (site / "edgelab-repo.pth").write_text(f"{REPO}\n")


# ---------------------------------------------------------------- the throwaway user


@dataclass
class LabUser:
    name: str
    uid: int
    gid: int
    home: Path
    venv: Path

    @property
    def env(self) -> dict[str, str]:
        return {
            "HOME": str(self.home),
            # Deliberately not the account's name (as after `docker run -u` or a kept env):
            # the lab must log in the account it runs as, never trust $USER.
            "USER": "someone-else",
            "LOGNAME": "someone-else",
            "PATH": f"{self.venv / 'bin'}:/usr/local/bin:/usr/bin:/bin",
            "LANG": "C.UTF-8",
            "COLUMNS": "200",
            "EDGELAB_HOME": str(self.home / "edgelab lab"),  # a space: config files must quote paths
            "EDGELAB_DB": str(self.home / "edgelab.db"),
            "EDGELAB_DB_CREATE": "1",  # a new database at EDGELAB_DB, as a set-up script makes one
        }

    def run(self, argv: list[str], timeout: float = 120) -> subprocess.CompletedProcess:
        return subprocess.run(
            argv,
            user=self.uid,
            group=self.gid,
            extra_groups=[],
            env=self.env,
            cwd=self.home,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=timeout,
        )

    def edgelab(self, *args: str, timeout: float = 120) -> subprocess.CompletedProcess:
        r = self.run([str(self.venv / "bin" / "edgelab"), *args], timeout=timeout)
        assert r.returncode == 0, (
            f"edgelab {' '.join(args)} as {self.name}: rc {r.returncode}\n{r.stdout}\n{r.stderr}"
        )
        return r


def _status(pid: int) -> dict[str, str]:
    try:
        text = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return {}
    return dict(line.split(":\t", 1) for line in text.splitlines() if ":\t" in line)


def _uid_of(pid: int) -> int | None:
    uid = _status(pid).get("Uid")
    return int(uid.split()[0]) if uid else None


def processes_of(uid: int) -> list[int]:
    """Live processes of ``uid``; a zombie (already dead, waiting for init to reap it) does not count."""
    return [
        int(p)
        for p in os.listdir("/proc")
        if p.isdigit() and _uid_of(int(p)) == uid and not _status(int(p)).get("State", "").startswith("Z")
    ]


def _settled_processes_of(uid: int) -> list[int]:
    """``processes_of`` once processes that are exiting right now had the moment they need."""
    end = time.monotonic() + 5
    while (left := processes_of(uid)) and time.monotonic() < end:
        time.sleep(0.05)
    return left


def _kill_user_processes(uid: int) -> None:
    """SIGKILL every process of the throwaway uid (each one was started by this test), by pid."""
    end = time.monotonic() + 10
    while (pids := processes_of(uid)) and time.monotonic() < end:
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        time.sleep(0.05)


@pytest.fixture(scope="module")
def tester():
    reason = _skip_reason()
    if reason:
        pytest.skip(reason)
    base = Path(tempfile.mkdtemp(prefix="edgelab-nonroot-", dir="/tmp"))
    base.chmod(0o755)
    name = f"edgelab-t{secrets.token_hex(4)}"
    home = base / "home"
    created = subprocess.run(
        ["useradd", "--create-home", "--home-dir", str(home), "--shell", "/bin/sh", "--user-group", name],
        capture_output=True,
        text=True,
    )
    if created.returncode != 0:
        shutil.rmtree(base, ignore_errors=True)
        pytest.skip(f"useradd failed: {created.stderr.strip()}")
    uid, gid = int(os.stat(home).st_uid), int(os.stat(home).st_gid)
    try:
        t = LabUser(name, uid, gid, home, home / "venv")
        made = t.run([SYSTEM_PYTHON, "-m", "venv", "--without-pip", str(t.venv)])
        assert made.returncode == 0, made.stderr
        site = t.venv / "lib" / f"python{sys.version_info[0]}.{sys.version_info[1]}" / "site-packages"
        _populate_site(site)
        script = t.venv / "bin" / "edgelab"
        script.write_text(
            f"#!{t.venv / 'bin' / 'python'}\nimport sys\nfrom edgelab.cli import main\nsys.exit(main())\n"
        )
        script.chmod(0o755)
        yield t
    finally:
        _kill_user_processes(uid)
        subprocess.run(["userdel", "--remove", name], capture_output=True)
        shutil.rmtree(base, ignore_errors=True)
        # _enter.py's per-uid mountpoint (empty; the uid may be reused by a later useradd)
        shutil.rmtree(f"/tmp/.edgelab-persona-root-{uid}", ignore_errors=True)


# ---------------------------------------------------------------- the flow


def test_lab_runs_as_an_ordinary_user(tester: LabUser):
    tester.edgelab("sim", "up")
    try:
        status = json.loads(tester.edgelab("sim", "status", "--json").stdout)
        ssh, adb = status["ssh"], status["adb"]
        # Every lab process runs as the user; sshd listens on an unprivileged port.
        assert ssh["user"] == tester.name and ssh["port"] >= 1024
        for pid in (ssh["pid"], adb["server_pid"], adb["emulator_pid"]):
            assert _uid_of(pid) == tester.uid, f"lab process {pid} is not the user's"
        assert Path(status["state_dir"]).is_relative_to(tester.home)

        listed = json.loads(tester.edgelab("device", "ls", "--json").stdout)
        by_name = {d["name"]: d for d in listed}
        assert SSH_NAMES | ADB_NAMES <= set(by_name)
        for name in SSH_NAMES | ADB_NAMES:
            assert by_name[name]["virtual"] is True and by_name[name]["state"] == "online", by_name[name]

        checked = json.loads(tester.edgelab("device", "check", "--all", "--json").stdout)
        assert {c["name"]: c["state"] for c in checked} == {n: "online" for n in by_name}

        probed = {
            p["name"]: p for p in json.loads(tester.edgelab("probe", "--all", "--json", timeout=180).stdout)
        }
        assert all(p["ok"] for p in probed.values()), {
            n: p["error"] for n, p in probed.items() if not p["ok"]
        }
        # The persona's files, seen through the namespace the user entered.
        assert "L4T 36" in probed["orin-agx"]["summary"]["os"]
        assert probed["s25"]["catalog_entry"] == "galaxy-s25"

        # Plain OpenSSH as the user: the command runs as that uid, inside the persona.
        r = tester.run(
            ["ssh", "-F", ssh["ssh_config"], "orin-nano", "id -u; hostname; head -c 9 /etc/nv_tegra_release"],
            timeout=60,
        )
        assert r.returncode == 0, r.stderr
        assert r.stdout.split("\n")[:3] == [str(tester.uid), "orin-nano", "# R35 (re"]
    finally:
        down = tester.run([str(tester.venv / "bin" / "edgelab"), "sim", "down"], timeout=120)
    assert down.returncode == 0, down.stderr
    left = _settled_processes_of(tester.uid)
    assert left == [], [(_status(p).get("State"), Path(f"/proc/{p}/cmdline").read_bytes()) for p in left]
    with open("/proc/self/mountinfo") as f:
        assert str(tester.home) not in f.read()
    listed = json.loads(tester.edgelab("device", "ls", "--json").stdout)
    assert {d["state"] for d in listed if d["virtual"]} == {"offline"}


def test_planted_persona_mountpoint_is_refused(tester: LabUser):
    """Another account that plants the user's /tmp mountpoint cannot steer its mounts: sim up refuses."""
    mountpoint = Path(f"/tmp/.edgelab-persona-root-{tester.uid}")
    shutil.rmtree(mountpoint, ignore_errors=True)
    mountpoint.mkdir(mode=0o755)  # made by root, not by the user
    try:
        r = tester.run([str(tester.venv / "bin" / "edgelab"), "sim", "up"], timeout=120)
        assert r.returncode != 0
        assert f"{mountpoint} is not a directory owned by uid {tester.uid}" in " ".join(r.stderr.split())
        assert "remove that directory" in " ".join(r.stderr.split())
        assert _settled_processes_of(tester.uid) == []  # refused before any server started
    finally:
        mountpoint.rmdir()
