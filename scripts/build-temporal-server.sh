#!/usr/bin/env bash
# Builds Temporal's own server (and its SQL schema tool) from the Go module proxy into
# .tools/temporal-server/bin, once: a stamp file records the version, so a second run takes
# seconds. `npm run cluster` and `npm run chaos` need it; `npm test` does not (it uses the CLI dev
# server). v1.30.8 is the newest release the proxy serves that Go 1.26.8 builds (v1.30.9 wants go >= 1.26.10).
#
# Prints, on stdout, the folder holding `temporal-server` and `temporal-sql-tool`; progress goes to
# stderr. The schema files come from the server module's source in the Go module cache
# (`go mod download -json` gives its Dir); shared/infra/temporal-server.ts asks for it the same way.
set -euo pipefail

TEMPORAL_SERVER_VERSION=v1.30.8
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
DIR="$ROOT/.tools/temporal-server"
BIN="$DIR/bin"
STAMP="$DIR/version"

say() { printf 'build-temporal-server: %s\n' "$@" >&2; }

if [[ -f "$STAMP" && "$(cat "$STAMP")" == "$TEMPORAL_SERVER_VERSION" && -x "$BIN/temporal-server" && -x "$BIN/temporal-sql-tool" ]]; then
  printf '%s\n' "$BIN"
  exit 0
fi

command -v go >/dev/null 2>&1 || { say "Go is missing (Debian: apt-get install -y golang, or a go.dev tarball)."; exit 1; }

mkdir -p "$BIN"
say "Building go.temporal.io/server@$TEMPORAL_SERVER_VERSION with $(go version | cut -d' ' -f3) (once; 10-40 minutes on 2 cores with a cold cache)…"
start=$(date +%s)
# GOPATH and GOCACHE stay the machine's own: a CI runner with a warm module cache then skips the
# downloads, and the schema files are found where `go mod download` puts them.
CGO_ENABLED=0 GOBIN="$BIN" GOFLAGS=-buildvcs=false \
  go install "go.temporal.io/server/cmd/server@$TEMPORAL_SERVER_VERSION" \
  "go.temporal.io/server/cmd/tools/sql@$TEMPORAL_SERVER_VERSION"
# go install names binaries after their folder: `server` and `sql` are too generic to keep.
mv -f "$BIN/server" "$BIN/temporal-server"
mv -f "$BIN/sql" "$BIN/temporal-sql-tool"
"$BIN/temporal-server" --version >/dev/null 2>&1 || { say "The built server does not run."; exit 1; }
printf '%s\n' "$TEMPORAL_SERVER_VERSION" >"$STAMP"
say "Built in $(($(date +%s) - start)) s: $BIN/temporal-server, $BIN/temporal-sql-tool"
printf '%s\n' "$BIN"
