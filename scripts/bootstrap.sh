#!/usr/bin/env bash
# Create or reuse the project's virtual environment and install what is missing.
# torch 2.13.0 (CPU) goes in first: anything that needs torch would otherwise pull CUDA builds.
# Re-runs are cheap: a stamp of pyproject.toml's hash skips the install when nothing changed.
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=${FLINKTUNE_VENV:-.venv}
PY=${PYTHON:-python3}

if ! "$PY" -c 'import sys; sys.exit(0 if sys.version_info[:2] == (3, 11) else 1)'; then
  echo "bootstrap: flinktune needs Python 3.11 (found $("$PY" --version 2>&1)); set PYTHON=/path/to/python3.11" >&2
  exit 2
fi
if ! command -v java >/dev/null 2>&1; then
  echo "bootstrap: Java (JDK 17) is missing; Spark needs it (apt-get install openjdk-17-jdk-headless)" >&2
  exit 2
fi

if [ ! -x "$VENV/bin/python" ]; then
  echo "bootstrap: creating virtual environment $VENV"
  "$PY" -m venv "$VENV"
  "$VENV/bin/pip" install -q --upgrade pip wheel setuptools
fi

# Debian packages that real-engine tests use: Chromium (the HTML report opened in a headless browser)
# and Prometheus (a real scrape of Flink's reporter; the production rehearsal). Installed where missing
# and possible (root with apt-get), without starting the package's own service (it would listen on
# every interface); otherwise the tests that need one skip and say why.
debian_package() {  # $1: package, $2: the binary it provides, $3: what needs it
  if [ -x "$2" ] || command -v "$(basename "$2")" >/dev/null 2>&1; then
    return 0
  fi
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    echo "bootstrap: installing $1 (Debian package) for $3"
    local made_policy=""
    if [ ! -e /usr/sbin/policy-rc.d ]; then
      printf '#!/bin/sh\nexit 101\n' > /usr/sbin/policy-rc.d && chmod +x /usr/sbin/policy-rc.d && made_policy=1
    fi
    { [ -n "${BOOTSTRAP_APT_UPDATED:-}" ] || apt-get update -qq; } && BOOTSTRAP_APT_UPDATED=1 \
      && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "$1" >/dev/null \
      || echo "bootstrap: could not install $1; $3 will be skipped" >&2
    [ -z "$made_policy" ] || rm -f /usr/sbin/policy-rc.d
  else
    echo "bootstrap: $2 is missing (apt-get install $1 as root); $3 will be skipped" >&2
  fi
}
debian_package chromium /usr/bin/chromium "the HTML report's browser test"
debian_package prometheus /usr/bin/prometheus "the real-Prometheus tests and the rehearsal"

stamp="$VENV/.flinktune-install-stamp"
want=$(cat pyproject.toml | sha256sum | cut -d' ' -f1)
if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ] && "$VENV/bin/python" -c 'import flinktune, torch' 2>/dev/null; then
  exit 0
fi

start=$(date +%s)
if ! "$VENV/bin/python" -c 'import torch, sys; sys.exit(0 if torch.__version__.startswith("2.13.0") else 1)' 2>/dev/null; then
  echo "bootstrap: installing torch 2.13.0 (CPU build)"
  "$VENV/bin/pip" install -q "torch==2.13.0"
fi
echo "bootstrap: installing flinktune and its pinned dependencies (first time: about 2 minutes)"
"$VENV/bin/pip" install -q -e ".[test]"
echo "$want" > "$stamp"
echo "bootstrap: environment ready in $(( $(date +%s) - start )) s"
