# Shared by scripts/demo and scripts/test: a project virtualenv with edgelab installed.
# Sourced, not run. Creates .venv on first use; re-installs when pyproject.toml changes.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
PY="${PYTHON:-python3}"
if ! "$PY" -c 'import sys; sys.exit(sys.version_info < (3, 11))' 2>/dev/null; then
  echo "error: edgelab needs Python >= 3.11 (found: $("$PY" --version 2>&1))" >&2
  echo "  -> install python3.11 or set PYTHON=/path/to/python3.11" >&2
  exit 1
fi
VENV="$ROOT/.venv"
stamp="$VENV/.edgelab-installed"
want="$(sha256sum pyproject.toml | cut -d' ' -f1)-${EDGELAB_EXTRAS:-dev}"
if [ ! -x "$VENV/bin/python" ]; then
  "$PY" -m venv "$VENV"
fi
if [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$want" ]; then
  echo "==> installing edgelab into .venv" >&2
  "$VENV/bin/python" -m pip install -q --upgrade pip >&2
  "$VENV/bin/python" -m pip install -q -e ".[${EDGELAB_EXTRAS:-dev}]" >&2
  echo "$want" > "$stamp"
fi
# The checkout's bytecode, as pip compiles an installed package's: a shell with PYTHONDONTWRITEBYTECODE=1
# would otherwise make every edgelab command recompile its modules (tens of ms each; ~0.2 s when current).
"$VENV/bin/python" -m compileall -q -j 0 edgelab >/dev/null
export PATH="$VENV/bin:$PATH"
