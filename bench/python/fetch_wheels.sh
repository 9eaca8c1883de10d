#!/usr/bin/env bash
# Downloads, for the GPU machine (Python 3.12, x86-64, no network), diffusers and the dependencies of it that the
# GPU image lacks, as wheels into DEST. The image already holds torch, numpy, filelock, huggingface-hub (>= 1.32),
# safetensors (>= 0.8), regex, requests, Pillow and zipp (the device tool's KINDS.md lists it); diffusers declares
# importlib_metadata too (it imports it only on Python < 3.8), fetched so that its declared requirements hold.
# Install there with:
#   python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site DEST/*.whl && export PYTHONPATH=/tmp/site
set -euo pipefail
dest=${1:?usage: fetch_wheels.sh DEST (a folder, created if missing)}
pins=(diffusers==0.42.1 importlib_metadata==8.7.0)
mkdir -p "$dest"
python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
  --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
  -d "$dest" "${pins[@]}"
ls -l "$dest"
size=$(du -sb "$dest" | cut -f1)
(( size < 20 * 1024 * 1024 )) || { echo "fetch_wheels: $dest holds $size bytes, more than 20 MiB" >&2; exit 1; }
