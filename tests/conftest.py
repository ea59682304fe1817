"""Shared test fixtures. Virtual devices are real server processes (sshd, the adb server)."""

import os
import sys
import types

import pytest

# Tests pass fresh ``--db`` paths everywhere; the CLI creates them as scripts do (the refusal of a
# missing --db path without --create is tested with this unset).
os.environ.setdefault("EDGELAB_DB_CREATE", "1")

from edgelab.store import db as dbmod
from edgelab.transport.local import LocalTransport

pytest_plugins = [
    "fixtures.ssh_lab",
    "fixtures.adb_lab",
    "fixtures.faults",
    "fixtures.llama_build",
    "fixtures.postgres",
]


# ---------------------------------------------------------------- test lanes
# A test's lanes follow from what it starts, so no file has to remember to mark itself: a test that
# uses one of these fixtures (directly or through any fixture that depends on it: deploy_lab,
# ssh_transport, ...) gets its marks at collection. ``-m "not ssh and not adb and not slow"`` is
# then the unit lane (README, "Test lanes").
LAB_FIXTURES: dict[str, tuple[str, ...]] = {
    "ssh_lab": ("ssh",),  # every SSH persona on a real sshd (tests/fixtures/ssh_lab.py)
    "adb_lab": ("adb",),  # the real adb server in front of the ADB emulator (tests/fixtures/adb_lab.py)
    "llama_build": ("slow",),  # the lab host's llama.cpp build, minutes when the cache is cold
    # the device targets' cross builds (tests/fixtures/llama_build.py), run under qemu or wine
    "llama_build_aarch64": ("slow", "cross"),
    "llama_build_android": ("slow", "cross"),
    "llama_build_windows": ("slow", "cross"),
    "pg_server": ("postgres",),  # a real PostgreSQL server (tests/fixtures/postgres.py)
}
# Names that start lab processes without those fixtures: a test, or any fixture it uses, whose code
# names one of them (a throwaway sshd, a lab started by hand) is marked alike.
LAB_STARTERS: dict[str, tuple[str, ...]] = {
    "TmpSshd": ("ssh",),  # tests/transport/test_ssh_hostkeys.py's throwaway sshd
    "start_ssh_lab": ("ssh",),
    "start_adb_lab": ("adb",),
    "lab_up": ("ssh", "adb"),
    "start_pg": ("postgres",),
}


def _names(code: types.CodeType) -> set[str]:
    """Global and attribute names a function's code uses, nested functions and lambdas included."""
    names = set(code.co_names)
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            names |= _names(const)
    return names


def lab_marks(item: pytest.Item) -> set[str]:
    """The lane marks ``item`` needs, from its fixture closure and the code of it and its fixtures."""
    marks: set[str] = set()
    info = getattr(item, "_fixtureinfo", None)  # pytest's resolved fixtures of the item (no public API)
    closure = list(getattr(item, "fixturenames", ()))
    funcs = [getattr(item, "function", None)]
    for name in closure:
        marks.update(LAB_FIXTURES.get(name, ()))
        for fixturedef in info.name2fixturedefs.get(name, ()) if info else ():
            funcs.append(fixturedef.func)
    for func in funcs:
        code = getattr(func, "__code__", None)
        if code is not None:
            for name in _names(code) & LAB_STARTERS.keys():
                marks.update(LAB_STARTERS[name])
    return marks


COLLECTED_MARKS = pytest.StashKey[frozenset]()


def pytest_collection_modifyitems(config, items):
    for item in items:
        have = {m.name for m in item.iter_markers()}
        for mark in sorted(lab_marks(item) - have):
            item.add_marker(mark)
        item.stash[COLLECTED_MARKS] = frozenset(have | lab_marks(item))


@pytest.fixture(autouse=True)
def _lanes_are_declared(request):
    """A lab fixture reached only at run time (``request.getfixturevalue``) cannot be seen at
    collection: such a test must carry the mark itself (``pytest.param(..., marks=...)``). This
    fails the test that does not, so the unit lane can never start a lab process unawares. Marks
    count as collection saw them: one applied at run time (``request.applymarker``) is too late
    for ``-m``."""
    yield
    have = request.node.stash.get(COLLECTED_MARKS, frozenset())
    missing = sorted({m for name in request.fixturenames for m in LAB_FIXTURES.get(name, ())} - have)
    if missing:
        pytest.fail(
            f"{request.node.nodeid} uses a lab fixture at run time but is not marked "
            f"{', '.join(missing)}: mark it (or the fixture param that requests it)",
            pytrace=False,
        )


@pytest.fixture(scope="session", autouse=True)
def _openssh_clients_closed():
    """The uploaders a worker's pushes left in ``bulk``'s registry are closed when its session ends:
    an xdist worker leaves without running exit handlers, which would leave their private files."""
    yield
    bulk = sys.modules.get("edgelab.transport.ssh.openssh.bulk")
    if bulk is not None:
        bulk.close_all()


@pytest.fixture(scope="session", autouse=True)
def _edgelab_home(tmp_path_factory):
    """The tests never write into the operator's edgelab home (a detached follower's log file, the
    models cache, the lab's known_hosts): the session has its own, whatever EDGELAB_HOME said.
    A test that needs a fresh one per test takes ``dbpath``."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("EDGELAB_HOME", str(tmp_path_factory.mktemp("edgelab-home")))
        yield


@pytest.fixture(autouse=True)
def _output_width(monkeypatch):
    """Tests read whole lines: the width of the terminal that started pytest (COLUMNS=40, say) is not
    theirs. A test that checks narrow output sets COLUMNS itself."""
    monkeypatch.delenv("COLUMNS", raising=False)
    monkeypatch.delenv("LINES", raising=False)


@pytest.fixture(scope="session")
def local_transport() -> LocalTransport:
    return LocalTransport("lab-host")


@pytest.fixture
def dbpath(tmp_path, monkeypatch):
    """A fresh SQLite path for one test, with edgelab's home and engine cache isolated."""
    monkeypatch.setenv("EDGELAB_HOME", str(tmp_path / "home"))
    monkeypatch.delenv("EDGELAB_DB", raising=False)
    dbmod.dispose_engines()
    yield tmp_path / "lab.db"
    dbmod.dispose_engines()
