#!/usr/bin/env bash
# Builds the packages benchmarks/gpu_check.py needs beyond jax, flax, optax, chex, orbax,
# numpy, matplotlib and rich, for an x86_64 Linux GPU node with no package index:
# EnvPool (Atari and classic control only), gymnax, pgx, ml-collections, tensorboardX and
# their pure-Python needs, unpacked into one folder and packed as one archive.
#
#   bash benchmarks/offline_bundle.sh DEST [PYTHON_VERSION]      e.g.  ... .offline 3.12
#
# DEST gets site/ (about 20 MB) and site.tar.xz (about 7 MB). On the GPU node:
#   tar -xJf DEST/site.tar.xz -C /tmp && export PYTHONPATH=/tmp/site:$PWD
set -euo pipefail
dest=${1:?usage: offline_bundle.sh DEST [PYTHON_VERSION]}
pyver=${2:-3.12}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# Pinned to the versions this project tests with (pyproject.toml's lower bounds).
python3 -m pip download -q --no-deps --only-binary=:all: --python-version "$pyver" \
  --implementation cp --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 \
  --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 -d "$work/whl" \
  envpool==1.2.5 envpool-assets==0.3.0 gymnasium==1.3.0 farama-notifications dm-env optree \
  gymnax==1.0.1 pgx==2.6.0 svgwrite ml-collections==1.1.0 tensorboardX==2.6.5 filelock==4.3.1 \
  2>&1 | grep -v '^WARNING' || true
[ "${PIPESTATUS[0]}" -eq 0 ] || { echo "error: pip download failed (see above)" >&2; exit 1; }
rm -rf "$dest/site" && mkdir -p "$dest/site"
for w in "$work"/whl/*.whl; do python3 -m zipfile -e "$w" "$dest/site"; done
rm -rf "$dest/site/tests"  # a wheel ships its tests at the top level
# Keep only the EnvPool families the configs use: the rest is most of its size.
(cd "$dest/site/envpool" && for d in */; do
  case "$d" in atari/ | classic_control/ | python/ | __pycache__/) ;; *) rm -rf "$d" ;; esac
done)
(cd "$dest/site/envpool_assets" && for d in */; do
  case "$d" in atari/) ;; *) rm -rf "$d" ;; esac
done)
# EnvPool's registry imports every family on import: drop the lines of the families removed.
python3 - "$dest/site/envpool/entry.py" <<'PY'
import pathlib, re, sys
entry = pathlib.Path(sys.argv[1])
lines = entry.read_text().splitlines()
kept = [l for l in lines if not re.match(r"\s*import envpool\.(?!atari|classic_control)", l)]
entry.write_text("\n".join(kept) + "\n")
PY
tar -C "$dest" -cJf "$dest/site.tar.xz" site
du -sh "$dest/site" "$dest/site.tar.xz"
