#!/usr/bin/env bash
# tools/check_latest.sh - run the test suite against other releases of graphroof's dependencies, in a
# throw-away venv, so that drift is caught here and not by users.
#
#   tools/check_latest.sh                      newest release of every dependency (torch: the pinned CPU build)
#   tools/check_latest.sh --lowest             every dependency at the lower bound pyproject.toml declares
#   tools/check_latest.sh transformers==5.23.0 newest releases, except the pins given (any number)
#   tools/check_latest.sh --write-lock         newest releases; if the suite passes, write requirements.lock
#   CHECK_TORCH=latest tools/check_latest.sh   also the newest torch pip may install here (a multi-GB CUDA build)
#   extra pytest arguments after --            tools/check_latest.sh -- -k ssm
#
# It prints the versions it resolved and the suite's result; exit status is the suite's.  The README's
# development section says when to run it; a refreshed lock is justified by a green --write-lock run.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
mode=latest
write_lock=0
pins=()
pytest_args=()
while [ $# -gt 0 ]; do
  case "$1" in
    --lowest) mode=lowest ;;
    --write-lock) write_lock=1 ;;
    --) shift; pytest_args=("$@"); break ;;
    -h|--help) sed -n '2,14p' "$0"; exit 0 ;;
    *==*) pins+=("$1") ;;
    *) echo "check_latest: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
  shift
done
if [ "$write_lock" = 1 ] && { [ "$mode" != latest ] || [ ${#pins[@]} -gt 0 ]; }; then
  echo "check_latest: --write-lock writes the lock from the newest releases only (no --lowest, no pins)" >&2
  exit 2
fi
work=$(mktemp -d "${TMPDIR:-/tmp}/graphroof-check.XXXXXX")
trap 'rm -rf "$work"' EXIT
venv="$work/venv"
say() { echo "check_latest: $*" >&2; }
say "[1/4] throw-away venv in $work ($mode${pins[*]:+, pins: ${pins[*]}})"
"$PY" -m venv "$venv"
pip=("$venv/bin/python" -m pip install --quiet --disable-pip-version-check)
cons="$work/constraints.txt"
: >"$cons"
if [ "$mode" = lowest ]; then
  # pyproject's declared lower bounds, as exact pins (">=X" -> "==X"); torch stays the pinned CPU build
  "$PY" - "$cons" <<'PYCODE'
import re, sys, tomllib
data = tomllib.load(open("pyproject.toml", "rb"))
reqs = list(data["project"]["dependencies"])
for extra in data["project"]["optional-dependencies"].values():
    reqs += [r for r in extra if not r.startswith("graphroof")]
with open(sys.argv[1], "w") as f:
    for r in reqs:
        m = re.match(r"^([A-Za-z0-9_.-]+)\s*>=\s*([0-9][^,;\s]*)", r)
        if m and m.group(1) != "torch":
            f.write(f"{m.group(1)}=={m.group(2)}\n")
PYCODE
fi
for p in "${pins[@]}"; do echo "$p" >>"$cons"; done
say "[2/4] torch"
if [ "${CHECK_TORCH:-pinned}" = latest ]; then
  "${pip[@]}" --upgrade torch
else
  "${pip[@]}" "torch==2.13.0"
fi
say "[3/4] graphroof with every extra, $mode releases"
"${pip[@]}" --upgrade -c "$cons" -e ".[all]"
"$venv/bin/python" - <<'PYCODE' >&2
from importlib.metadata import version
names = ["torch", "transformers", "onnx", "onnxruntime", "onnxscript", "networkx", "numpy", "tabulate", "pyyaml",
         "jinja2", "matplotlib", "pytest", "hypothesis", "ruff", "mypy"]
print("check_latest: resolved " + ", ".join(f"{n} {version(n)}" for n in names))
PYCODE
say "[4/4] the test suite"
set +e
"$venv/bin/python" -m pytest -q -p no:cacheprovider "${pytest_args[@]}"
rc=$?
set -e
if [ "$rc" = 0 ] && [ "$write_lock" = 1 ]; then
  {
    echo "# requirements.lock - the exact releases the test suite was last run green with (pip constraints)."
    echo "# Used by ./run (pip install -c requirements.lock). Refresh: tools/check_latest.sh --write-lock"
    echo "# (newest releases; written only when the suite passes). Made on $(date -u +%Y-%m-%d), Python $("$venv/bin/python" -c 'import platform; print(platform.python_version())'), $(uname -m)."
    "$venv/bin/python" -m pip freeze --exclude-editable --disable-pip-version-check \
      | grep -v -i '^graphroof' | sed -E 's/^torch==([0-9.]+)\+cpu$/torch==\1/'
    "$venv/bin/python" -m pip download --no-deps --quiet -d "$work/bk" hatchling >/dev/null 2>&1 \
      && ls "$work/bk" | sed -nE 's/^hatchling-([0-9.]+)-.*/hatchling==\1/p'
  } >requirements.lock
  say "requirements.lock written"
fi
say "suite exit status $rc"
exit "$rc"
