#!/usr/bin/env bash
# Build the collection as it would be published, install it into an empty collections path and run
# `ansible-test sanity` on the installed copy (ansible-test needs the ansible_collections/NS/NAME layout).
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

ansible-galaxy collection build "$repo" --output-path "$work/dist" >/dev/null
ansible-galaxy collection install --force --no-deps "$work"/dist/continuity-artemis-*.tar.gz -p "$work/collections" >/dev/null 2>&1
cd "$work/collections/ansible_collections/continuity/artemis"
# ansible-test wants a git repository (or none) to list files: give it a fresh one of exactly what was built.
git init -q && git add -A && git -c user.name=ci -c user.email=ci@localhost commit -qm built
# ansible-test bootstraps pip in its venvs with a script it downloads from a host this machine cannot reach.
# Stand in for that script: the same job done with Python's own ensurepip and pip from the package index.
pip_version=$(python - <<'PY'
import re
import ansible_test._internal.python_requirements as requirements
print(re.search(r"pip='([0-9.]+)'", open(requirements.__file__).read()).group(1))
PY
)
shim=~/.ansible/test/cache/get_pip_${pip_version//./_}.py
if [ ! -f "$shim" ]; then
  mkdir -p "$(dirname "$shim")"
  cat > "$shim" <<'PY'
import subprocess
import sys

subprocess.check_call([sys.executable, "-m", "ensurepip", "--default-pip"])
args = [arg for arg in sys.argv[1:] if arg not in ("--no-setuptools", "--no-wheel")]
subprocess.check_call([sys.executable, "-m", "pip", "install", *args])
PY
fi
python_version=$(python -c 'import sys; print("%d.%d" % sys.version_info[:2])')
ansible-test sanity --python "$python_version" --color no "$@"
