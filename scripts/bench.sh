#!/usr/bin/env bash
# `npm run bench`: the benchmarks on the Node line the service is deployed on (deploy/Dockerfile and
# the README's "Which Node": the LTS pinned in scripts/ensure-node.sh), so each figure is the
# service as it runs in production. On the same two cores the API and worker spend about a tenth
# less CPU per query on Node 24 than on the machine's Node 20 (bench/results/2026-12-03-issue-11-
# session43.md). BENCH_NODE=machine measures on the `node` first on PATH instead (an A/B of the two).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
bash scripts/ensure-tools.sh
case "${BENCH_NODE:-lts}" in
  lts)
    if bin=$(bash scripts/ensure-node.sh); then
      PATH="$bin:$PATH"
    else
      echo "bench: the pinned Node LTS cannot be installed here (above); measuring on the machine's $(node --version)" >&2
    fi
    ;;
  machine) ;;
  *)
    echo "bench: BENCH_NODE is 'lts' (default) or 'machine', not '$BENCH_NODE'" >&2
    exit 2
    ;;
esac
exec node --import tsx bench/main.ts "$@"
