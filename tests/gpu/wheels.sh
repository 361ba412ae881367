#!/usr/bin/env bash
# The wheels tests/gpu/check.sh installs on a GPU machine that has no package registry:
# Astraeus's own wheel and its runtime dependencies (pyproject.toml), built for that
# machine's Python (3.12, x86_64 Linux by default), into tests/gpu/wheels/ (git-ignored).
# Run it here, where a registry is reachable; carry tests/gpu/wheels/ with the checkout.
#
#   bash tests/gpu/wheels.sh [--python-version 3.12] [--dest DIR]
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/../.." && pwd)
version=3.12
dest=$here/wheels
pip=${PIP:-python3 -m pip}

while [ $# -gt 0 ]; do
    case $1 in
        --python-version) version=$2; shift 2 ;;
        --dest) dest=$2; shift 2 ;;
        -h|--help) sed -n '2,7p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; exit 0 ;;
        *) echo "wheels.sh: unknown argument $1 (see --help)" >&2; exit 2 ;;
    esac
done

# The runtime dependencies, read from pyproject.toml (never the dev tools: the checks
# need none of them).
mapfile -t requirements < <(python3 - "$root/pyproject.toml" <<'PY'
import sys
import tomllib

with open(sys.argv[1], "rb") as f:
    project = tomllib.load(f)["project"]
print("\n".join(project["dependencies"]))
PY
)

rm -rf "$dest"
mkdir -p "$dest"
$pip download --quiet --only-binary=:all: --python-version "$version" \
    --implementation cp --platform manylinux2014_x86_64 --platform manylinux_2_17_x86_64 \
    --platform manylinux_2_28_x86_64 --platform linux_x86_64 --platform any \
    -d "$dest" "${requirements[@]}"
build=$(mktemp -d)
trap 'rm -rf "$build"' EXIT
cp -r "$root/pyproject.toml" "$root/README.md" "$root/runner" "$root/astraeus_tui" "$build/"
$pip wheel --quiet --no-deps -w "$dest" "$build"
count=$(find "$dest" -name '*.whl' | wc -l)
size=$(du -sm "$dest" | cut -f1)
echo "wheels: $count in $dest, $size MiB"
if [ "$size" -ge 60 ]; then
    echo "wheels: over 60 MiB: too much to carry" >&2
    exit 1
fi
