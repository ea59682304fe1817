# Debian packages the virtual lab and the tests need. Sourced by scripts/demo and scripts/test.
# As root, installs what is missing; otherwise prints the exact command and stops.
need_pkgs=()
command -v /usr/sbin/sshd >/dev/null 2>&1 || need_pkgs+=(openssh-server)
[ -x /usr/lib/openssh/sftp-server ] || need_pkgs+=(openssh-sftp-server)
command -v ssh >/dev/null 2>&1 || need_pkgs+=(openssh-client)
command -v ssh-keygen >/dev/null 2>&1 || need_pkgs+=(openssh-client)
command -v adb >/dev/null 2>&1 || need_pkgs+=(adb)
command -v mksh >/dev/null 2>&1 || need_pkgs+=(mksh)
command -v unshare >/dev/null 2>&1 || need_pkgs+=(util-linux)
command -v rsync >/dev/null 2>&1 || need_pkgs+=(rsync)
# the second lab host's network namespace (tests/sim/test_labhost2.py); only root can make one, so only root needs it
[ "$(id -u)" = 0 ] && ! command -v ip >/dev/null 2>&1 && need_pkgs+=(iproute2)
# the llama.cpp build (edgelab runtime build llama.cpp --target linux-x86_64; tests/fixtures/llama_build.py)
command -v cmake >/dev/null 2>&1 || need_pkgs+=(cmake)
command -v ninja >/dev/null 2>&1 || need_pkgs+=(ninja-build)
command -v g++ >/dev/null 2>&1 || need_pkgs+=(g++)
command -v ccache >/dev/null 2>&1 || need_pkgs+=(ccache)
command -v patch >/dev/null 2>&1 || need_pkgs+=(patch)  # runtimes/patches/ (edgelab/runtimes/patches.py)
# the cross builds (linux-aarch64, android-arm64, windows-x64: runtimes/llama.cpp.yaml) and the virtual
# devices that run them: aarch64 personas under qemu user mode, Windows personas' .exe under wine
command -v aarch64-linux-gnu-g++ >/dev/null 2>&1 || need_pkgs+=(g++-aarch64-linux-gnu)
command -v x86_64-w64-mingw32-g++-posix >/dev/null 2>&1 || need_pkgs+=(g++-mingw-w64-x86-64-posix)
[ -x /usr/bin/qemu-aarch64-static ] || need_pkgs+=(qemu-user-static)
[ -x /usr/lib/wine/wine64 ] || need_pkgs+=(wine64)
# PostgreSQL server binaries: the tests start their own server (initdb into a temp dir, unix socket)
compgen -G '/usr/lib/postgresql/*/bin/initdb' >/dev/null || command -v initdb >/dev/null 2>&1 || need_pkgs+=(postgresql)
"${PYTHON:-python3}" -c 'import ensurepip, venv' >/dev/null 2>&1 || need_pkgs+=(python3-venv)  # _env.sh: .venv
if [ ${#need_pkgs[@]} -gt 0 ]; then
  mapfile -t need_pkgs < <(printf '%s\n' "${need_pkgs[@]}" | sort -u)
  if [ "$(id -u)" = 0 ]; then
    echo "==> installing Debian packages: ${need_pkgs[*]}" >&2
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq >&2
    apt-get install -y -qq --no-install-recommends "${need_pkgs[@]}" >&2
  else
    echo "error: missing system packages: ${need_pkgs[*]}" >&2
    echo "  -> run: sudo apt-get install -y ${need_pkgs[*]}" >&2
    exit 1
  fi
fi
