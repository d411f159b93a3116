#!/usr/bin/env bash
# Set up the local Flink cluster's pieces, idempotently:
#  1. a SEPARATE virtual environment (.venv-flink) with apache-flink==2.3.0, whose pyflink package
#     ships a complete Flink 2.3.0 distribution (FLINK_HOME = site-packages/pyflink); PyFlink stays
#     out of the main .venv because it pins its own pandas/numpy/pyarrow;
#  2. the benchmark job jar, compiled with the machine's javac against the distribution's jars
#     (no Maven: no Maven repository is reachable here) into var/localflink/flinkjob.jar.
# Re-runs are cheap: a stamp skips the install, and the jar is rebuilt only when a source changed.
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=${FLINKTUNE_FLINK_VENV:-.venv-flink}
PY=${PYTHON:-python3}
STATE=${FLINKTUNE_LOCALFLINK_DIR:-var/localflink}
FLINK_VERSION=2.3.0

for tool in java javac jar; do
  if ! command -v "$tool" >/dev/null 2>&1; then
    echo "setup_local_flink: '$tool' is missing; the local Flink cluster needs a JDK 17 (apt-get install openjdk-17-jdk-headless)" >&2
    exit 2
  fi
done

if [ ! -x "$VENV/bin/python" ]; then
  echo "setup_local_flink: creating $VENV"
  "$PY" -m venv "$VENV"
fi
stamp="$VENV/.apache-flink-$FLINK_VERSION"
if [ ! -f "$stamp" ]; then
  start=$(date +%s)
  echo "setup_local_flink: installing apache-flink==$FLINK_VERSION into $VENV (about 40 s from a local mirror)"
  "$VENV/bin/pip" install -q "apache-flink==$FLINK_VERSION"
  touch "$stamp"
  echo "setup_local_flink: installed in $(( $(date +%s) - start )) s"
fi
FLINK_HOME=$("$VENV/bin/python" - <<'PY'
import pathlib, importlib.util
spec = importlib.util.find_spec("pyflink")
print(pathlib.Path(spec.origin).parent)
PY
)
if [ ! -f "$FLINK_HOME/lib/flink-dist-$FLINK_VERSION.jar" ]; then
  echo "setup_local_flink: $FLINK_HOME/lib/flink-dist-$FLINK_VERSION.jar is missing: the pyflink package holds no Flink distribution" >&2
  exit 2
fi

mkdir -p "$STATE"
JAR="$STATE/flinkjob.jar"
SOURCES=$(find flinkjob/src -name '*.java' | sort)
if [ ! -f "$JAR" ] || [ -n "$(find flinkjob/src -name '*.java' -newer "$JAR")" ]; then
  build=$(mktemp -d)
  trap 'rm -rf "$build"' EXIT
  # shellcheck disable=SC2086
  javac -nowarn -encoding UTF-8 --release 17 -d "$build/classes" -cp "$FLINK_HOME/lib/*" $SOURCES
  jar cf "$build/flinkjob.jar" -C "$build/classes" .
  mv "$build/flinkjob.jar" "$JAR"   # rename: never a half-written jar
  echo "setup_local_flink: built $JAR"
fi
echo "FLINK_HOME=$FLINK_HOME"
