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
from edgelab.transport.base import Transport
from edgelab.transport.host import Link, host_of


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
    out: list[Link] = []
    for name, sha in sorted(links.items()):
        path = blob_paths.get(sha)
        if path is None:
            raise TransportError(
                f"{name} ({sha[:12]}) was not pushed to the device store",
                remedy="push the runtime build again (`edgelab push`)",
            )
        out.append(Link(name, path, name in (executable or set())))
    host_of(t).layout(bin_dir, out)


def _dirs(words: list[str], proc: ProcessSpec, workdir: str, sep: str) -> list[str]:
    out = []
    for w in words:
        for name in proc.dirs:
            w = w.replace(DIR % name, f"{workdir}{sep}{name}")
        out.append(w)
    return out


def write_files(t: Transport, workdir: str, files: dict[str, str]) -> None:
    """The plan's generated files (name -> text) into the workdir, before the process starts."""
    if files:
        host_of(t).write_files(workdir, files)


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
