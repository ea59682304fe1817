"""The personas run their devices' programs: an aarch64 persona execs aarch64 ELFs under qemu (its
own binfmt_misc, nothing registered on the lab host) and says aarch64; a Windows persona starts
Windows x64 executables through wine, in its own prefix, and refuses what Windows refuses."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from edgelab.runtimes.emulation import QEMU
from edgelab.sim.persona_exec import persona_argv
from edgelab.sim.personas import PERSONAS_DIR, list_personas
from edgelab.sim.winsim.native import NotRunnable, launch_argv, pe_machine

HELLO = '#include <stdio.h>\nint main(int c, char **v) { printf("hello %d\\n", c); return 3; }\n'
READER = (
    '#include <stdio.h>\nint main(int c, char **v) { FILE *f = fopen(v[1], "rb"); char b[32] = {0};\n'
    'if (!f) return 2; fread(b, 1, 31, f); printf("%s|%s\\n", v[0], b); return 3; }\n'
)


def run_in(persona: str, argv: list[str], **kw) -> subprocess.CompletedProcess:
    return subprocess.run(
        persona_argv(PERSONAS_DIR / persona, argv, **kw), capture_output=True, text=True, timeout=120
    )


def _compile(cc: str, src: str, out: Path) -> Path:
    if shutil.which(cc) is None:
        pytest.skip(f"{cc} is not installed (scripts/system-deps.sh installs it)")
    c = out.with_suffix(".c")
    c.write_text(src)
    subprocess.run([cc, "-static", "-O1", str(c), "-o", str(out)], check=True, capture_output=True)
    return out


def test_personas_declare_the_cpu_their_devices_have():
    arch = {p.name: p.arch for p in list_personas()}
    for name in ("orin-agx", "orin-nano", "thor", "s25", "s24", "rb3g2", "sa8775p", "xelite-pc"):
        assert arch[name] == "aarch64"
    assert arch["wsl-hx370"] == arch["win-hx370-rtx5090"] == "x86_64"


@pytest.mark.slow
@pytest.mark.cross
def test_an_aarch64_persona_runs_aarch64_elfs_under_qemu_and_says_aarch64(tmp_path):
    if not os.access(QEMU["aarch64"], os.X_OK):
        pytest.skip("qemu-user-static is not installed")
    exe = _compile("aarch64-linux-gnu-gcc", HELLO, tmp_path / "hello")
    for persona in ("orin-agx", "s25"):
        r = run_in(persona, ["sh", "-c", f"uname -m; {exe} a b; echo rc=$?"])
        assert r.stdout.splitlines() == ["aarch64", "hello 3", "rc=3"], (persona, r.stdout, r.stderr)
    # the lab host, and a persona of its own architecture, have no such emulator registered
    assert not Path("/proc/sys/fs/binfmt_misc/edgelab-qemu-aarch64").exists()
    with pytest.raises(OSError, match="Exec format error"):
        subprocess.run([str(exe)], capture_output=True)
    wsl = run_in("wsl-hx370", ["sh", "-c", f"{exe}; echo rc=$?"])
    assert wsl.stdout.strip().endswith(("rc=126", "rc=2")) and "hello" not in wsl.stdout


def test_a_file_on_drive_c_that_is_no_windows_image_fails_as_on_windows(tmp_path):
    elf = tmp_path / "tool"
    elf.write_bytes(Path("/bin/true").read_bytes())
    assert pe_machine(str(elf)) is None
    with pytest.raises(NotRunnable, match="not a valid Win32 application") as err:
        launch_argv("/C:/Users/edgelab/tool", [])
    assert err.value.code == 193
    arm = tmp_path / "arm.exe"
    arm.write_bytes(
        b"MZ" + bytes(58) + (64).to_bytes(4, "little") + b"PE\0\0" + (0xAA64).to_bytes(2, "little")
    )
    assert pe_machine(str(arm)) == "arm64"
    with pytest.raises(NotRunnable, match="runs x64 and x86 images only"):
        launch_argv(str(arm), [])
    assert launch_argv("/usr/bin/python3", ["-V"]) == (["/usr/bin/python3", "-V"], None)  # the lab's own


@pytest.mark.slow
@pytest.mark.cross
def test_a_windows_persona_runs_an_exe_through_wine_with_its_own_paths(tmp_path):
    from edgelab.sim.winsim.native import WINE

    if not os.access(WINE, os.X_OK):
        pytest.skip("wine64 is not installed")
    drive = tmp_path / "drive"
    store = drive / "Users" / "edgelab" / "AppData" / "Local" / "edgelab" / "store"
    store.mkdir(parents=True)
    _compile("x86_64-w64-mingw32-gcc-posix", READER, store / "reader.exe")
    (store / "reader.exe").chmod(0o644)  # as pushed over SFTP: Windows has no execute bit
    (store / "data.txt").write_text("from the store")
    (drive / "Users" / "edgelab" / "elf").write_bytes(Path("/bin/true").read_bytes())
    (drive / "Users" / "edgelab" / "elf").chmod(0o755)
    from edgelab.runtimes.cache import cache_root

    env = {
        **os.environ,
        "EDGELAB_WINEPREFIX": str(tmp_path / "prefix"),
        "EDGELAB_WINE_TEMPLATE": str(cache_root() / "wine" / "template"),
    }
    script = (
        r"& C:\Users\edgelab\AppData\Local\edgelab\store\reader.exe "
        r"C:\Users\edgelab\AppData\Local\edgelab\store\data.txt; "
        r'"exit=$LASTEXITCODE"; '
        r"$p = Start-Process -FilePath C:\Users\edgelab\AppData\Local\edgelab\store\reader "
        r"-ArgumentList C:\Users\edgelab\AppData\Local\edgelab\store\data.txt -NoNewWindow -PassThru -Wait; "
        r'"started=$($p.ExitCode)"; '
        r"& C:\Users\edgelab\elf"
    )
    r = subprocess.run(
        persona_argv(
            PERSONAS_DIR / "win-hx370-rtx5090", ["powershell", "-NoLogo", "-Command", script], drive=drive
        ),
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
    )
    lines = r.stdout.splitlines()
    assert lines[0] == r"C:\Users\edgelab\AppData\Local\edgelab\store\reader.exe|from the store", r.stderr
    assert "exit=3" in lines and "started=3" in lines
    assert "is not a valid Win32 application" in r.stderr
    assert (tmp_path / "prefix" / "system.reg").is_file()
