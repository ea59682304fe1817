"""Start one planned process on the device: lay out its ``{bin}``, bind store paths, launch detached.

Binaries live in the device's content store under their SHA-256; a program expects its own name
(and a shared library its soname). So each process gets ``<workdir>/bin/`` with one link per file
of its runtime build, named as the build produced it, pointing at the verified blob; ``{bin}`` in
the argv, environment and library path becomes that directory, ``{blob:SHA}`` a blob's path.
An artifact laid out as a folder (a Hugging Face checkpoint) gets ``<workdir>/NAME/`` with a link
per file at its path inside the artifact (``{dir:NAME}``); a plan's generated files (vLLM-Omni's
deploy config) are written into the workdir before the launch.
Used by deploy and bench alike, so both run exactly the command the plan shows.
"""

from __future__ import annotations

from dataclasses import dataclass

from edgelab.deploy import remote
from edgelab.deploy.artifacts import DIR, fill, fill_words
from edgelab.deploy.plan import ProcessSpec, programs
from edgelab.errors import TransportError
from edgelab.transport import winscripts
from edgelab.transport.base import Transport
from edgelab.transport.quoting import Shell

# $1 bin dir, then triples NAME BLOB X: link each blob into the dir, replacing stale links; X=1 marks
# a program the argv runs, made executable once (a chmod moves the blob's change time, so data
# files are left alone and stay trusted by the next push without a re-hash).
_LAYOUT = r"""
d=$1; shift
mkdir -p "$d" || exit 97
while [ $# -ge 3 ]; do
  [ -f "$2" ] || { echo "missing blob $2" >&2; exit 98; }
  case "$1" in */*) mkdir -p "$d/${1%/*}" || exit 97 ;; esac
  if [ "$3" = 1 ] && [ ! -x "$2" ]; then chmod 755 "$2" || exit 99; fi
  ln -sf "$2" "$d/$1" || exit 96
  shift 3
done
"""


@dataclass
class Started:
    pid: int
    argv: list[str]  # the command as it ran (store paths bound)
    env: dict[str, str]
    bin_dir: str | None


def bound(
    proc: ProcessSpec, workdir: str, blob_paths: dict[str, str]
) -> tuple[list[str], dict[str, str], str]:
    """The argv and environment with ``{bin}`` and blob paths filled in for this workdir."""
    sep = "\\" if "\\" in workdir else "/"
    bin_dir = f"{workdir}{sep}bin"
    argv = _dirs(fill_words(list(proc.argv), blob_paths, bin_dir), proc, workdir, sep)
    env = dict(
        zip(
            proc.env,
            _dirs(list(fill(dict(proc.env), blob_paths, bin_dir).values()), proc, workdir, sep),
            strict=True,
        )
    )
    if proc.library_path:
        libs = fill_words(list(proc.library_path), blob_paths, bin_dir)
        env["LD_LIBRARY_PATH"] = ":".join(libs)
    return argv, env, bin_dir


def layout(
    t: Transport,
    bin_dir: str,
    links: dict[str, str],
    blob_paths: dict[str, str],
    executable: set[str] | None = None,
) -> None:
    """Make ``bin_dir`` hold one link per runtime file (name -> store blob)."""
    if not links:
        return
    if t.shell is Shell.POWERSHELL:
        _layout_windows(t, bin_dir, links, blob_paths)
        return
    pairs: list[str] = []
    for name, sha in sorted(links.items()):
        path = blob_paths.get(sha)
        if path is None:
            raise TransportError(
                f"{name} ({sha[:12]}) was not pushed to the device store",
                remedy="push the runtime build again (`edgelab push`)",
            )
        pairs += [name, path, "1" if name in (executable or set()) else "0"]
    res = t.run(["sh", "-c", _LAYOUT, "edgelab-layout", bin_dir, *pairs], timeout=60)
    if not res.ok:
        raise TransportError(
            f"could not lay out {bin_dir} (exit {res.exit_code}): {res.stderr.strip()[:200]}",
            remedy="check the device's disk space and the store's permissions",
        )


def _layout_windows(t: Transport, bin_dir: str, links: dict[str, str], blob_paths: dict[str, str]) -> None:
    """Windows: hard links into the store (``winscripts.layout``); no execute bit to set there."""
    pairs = []
    for name, sha in sorted(links.items()):
        if sha not in blob_paths:
            raise TransportError(
                f"{name} ({sha[:12]}) was not pushed to the device store",
                remedy="push the runtime build again (`edgelab push`)",
            )
        pairs.append((name, blob_paths[sha]))
    res = t.run_ps(winscripts.layout(bin_dir, pairs), timeout=60)
    if not res.ok:
        raise TransportError(
            f"could not lay out {bin_dir} (exit {res.exit_code}): {(res.stderr or res.stdout).strip()[:200]}",
            remedy="check the device's disk space and the store's permissions",
        )


def _dirs(words: list[str], proc: ProcessSpec, workdir: str, sep: str) -> list[str]:
    out = []
    for w in words:
        for name in proc.dirs:
            w = w.replace(DIR % name, f"{workdir}{sep}{name}")
        out.append(w)
    return out


_WRITE = 'd=$1; shift; mkdir -p "$d" || exit 97; while [ $# -ge 2 ]; do printf %s "$2" > "$d/$1" || exit 96; shift 2; done'


def write_files(t: Transport, workdir: str, files: dict[str, str]) -> None:
    """The plan's generated files (name -> text) into the workdir, before the process starts."""
    if not files:
        return
    if t.shell is Shell.POWERSHELL:
        raise TransportError(
            "writing generated files into a Windows run directory is not supported",
            remedy="run this strategy on a Linux device",
        )
    pairs = [x for name, text in sorted(files.items()) for x in (name, text)]
    res = t.run(["sh", "-c", _WRITE, "edgelab-files", workdir, *pairs], timeout=60)
    if not res.ok:
        raise TransportError(
            f"could not write {', '.join(files)} into {workdir} (exit {res.exit_code}): {res.stderr.strip()[:200]}",
            remedy="check the device's disk space",
        )


def start(
    t: Transport,
    proc: ProcessSpec,
    workdir: str,
    blob_paths: dict[str, str],
    secret_env: dict[str, str] | None = None,
) -> Started:
    """Lay out ``{bin}`` (and the plan's directories and files) and launch; ``secret_env`` (an
    endpoint's password) goes into the process's environment over stdin, never into
    ``argv``/``env``, which are stored and shown."""
    argv, env, bin_dir = bound(proc, workdir, blob_paths)
    layout(t, bin_dir, proc.links, blob_paths, programs(proc))
    sep = "\\" if "\\" in workdir else "/"
    for name, tree in proc.dirs.items():
        layout(t, f"{workdir}{sep}{name}", tree, blob_paths)
    write_files(t, workdir, proc.files)
    pid = remote.launch(t, workdir, argv, env, secret_env=secret_env)
    return Started(pid, argv, env, bin_dir if proc.links else None)
