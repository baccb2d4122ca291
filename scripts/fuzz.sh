#!/usr/bin/env bash
# Fuzzes the HTTP contract with schemathesis: starts `npm start` on a temporary DATA_DIR and a free
# port, grants its dev organization credits, runs every check over its /openapi.json, prints the
# distinct failures, and stops the instance whatever happens. Any failure exits non-zero.
#
#   npm run fuzz                                   # the CI settings
#   FUZZ_SEED=7 FUZZ_MAX_EXAMPLES=500 npm run fuzz # another seed, more examples per operation
#
# Settings (environment): FUZZ_SEED (fixed, so a run can be repeated), FUZZ_MAX_EXAMPLES (per
# operation and phase), FUZZ_MAX_TIME (seconds; schemathesis is interrupted after that, and the run
# fails), FUZZ_WORKERS, FUZZ_REPORT_DIR. Not schemathesis' own --max-time: that one keeps fuzzing
# until the time is spent, so the number of examples would depend on the machine's speed.
# Reports (JUnit, JSON, the full log, the service log) stay in FUZZ_REPORT_DIR, .tools/fuzz-report
# by default. The curls in the summary show the key as [Filtered]: put in the key of the instance
# you reproduce them against (its $DATA_DIR/dev-api-key).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

SCHEMATHESIS_VERSION=4.32.5
FUZZ_SEED=${FUZZ_SEED:-8}
FUZZ_MAX_EXAMPLES=${FUZZ_MAX_EXAMPLES:-200}
FUZZ_MAX_TIME=${FUZZ_MAX_TIME:-420}
# One worker: with threads, Python 3.11 (Debian 12's) sometimes fails inside hypothesis with
# "AST constructor recursion depth mismatch", an error of the fuzzer and not of the service.
FUZZ_WORKERS=${FUZZ_WORKERS:-1}
FUZZ_REPORT_DIR=${FUZZ_REPORT_DIR:-.tools/fuzz-report}
VENV=.tools/fuzz-venv
START_TIMEOUT=240

say() {
  printf 'fuzz: %s\n' "$@" >&2
}
die() {
  say "$@"
  exit 1
}
for n in FUZZ_SEED FUZZ_MAX_EXAMPLES FUZZ_MAX_TIME FUZZ_WORKERS; do
  [[ ${!n} =~ ^[0-9]+$ ]] || die "$n must be a whole number (got '${!n}')."
done

# schemathesis in its own virtual environment (an ignored folder), pinned, installed once.
ensure_schemathesis() {
  local have
  have=$("$VENV/bin/schemathesis" --version 2>/dev/null || true)
  [[ $have == *" $SCHEMATHESIS_VERSION" ]] && return 0
  command -v python3 >/dev/null 2>&1 || die "python3 is missing. Install it (Debian, as root): apt-get install -y python3 python3-venv"
  if ! python3 -c 'import ensurepip, venv' >/dev/null 2>&1; then
    die "python3 cannot create virtual environments. Install (Debian, as root): apt-get install -y python3-venv"
  fi
  say "Installing schemathesis==$SCHEMATHESIS_VERSION into $VENV… (once)"
  rm -rf "$VENV"
  python3 -m venv "$VENV" || die "python3 -m venv $VENV failed. On Debian: apt-get install -y python3-venv"
  local out
  out=$("$VENV/bin/python" -m pip install --quiet --disable-pip-version-check --no-input "schemathesis==$SCHEMATHESIS_VERSION" 2>&1) ||
    die "pip failed to install schemathesis==$SCHEMATHESIS_VERSION:" "$out"
}

ensure_schemathesis
bash scripts/ensure-tools.sh

work=$(mktemp -d "${TMPDIR:-/tmp}/wqs-fuzz-XXXXXX")
mkdir -p "$FUZZ_REPORT_DIR"
report_dir=$(cd "$FUZZ_REPORT_DIR" && pwd)
rm -f "$report_dir"/*.xml "$report_dir"/*.json "$report_dir"/*.log
data_dir="$work/data"
service_log="$report_dir/service.log"
service_pid=
started=$SECONDS

# The instance runs in its own process group (setsid): SIGTERM to npm lets it drain and stop its
# children in order; only if that hangs is the whole group killed.
stop_service() {
  [[ -n $service_pid ]] || return 0
  local pid=$service_pid
  service_pid=
  if kill -0 "$pid" 2>/dev/null; then
    kill -TERM "$pid" 2>/dev/null || true
    for _ in $(seq 1 60); do
      kill -0 "$pid" 2>/dev/null || break
      sleep 1
    done
    if kill -0 "$pid" 2>/dev/null; then
      say "the service did not stop in 60 s; killing its process group"
      kill -KILL -- "-$pid" 2>/dev/null || true
    fi
  fi
  wait "$pid" 2>/dev/null || true
}
fuzz_pid=
cleanup() {
  local code=$?
  trap - EXIT INT TERM
  if [[ -n $fuzz_pid ]]; then
    kill -TERM "$fuzz_pid" 2>/dev/null || true
    wait "$fuzz_pid" 2>/dev/null || true
  fi
  stop_service
  rm -rf "$work"
  exit "$code"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

port=$("$VENV/bin/python" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
say "starting npm start (DATA_DIR=$data_dir, PORT=$port)"
# Health checks off: they would run queries of their own in the middle of the fuzzing. High
# per-minute and per-organization request limits: the fuzzer sends thousands of requests with one
# key, and 429s would only hide the rest; likewise failed key checks from its one address (its
# requests without a valid key would otherwise, 30 in, hold back the first use of its own key).
DATA_DIR=$data_dir PORT=$port LOG_LEVEL=warn HEALTH_CHECKS_ENABLED=false TEMPORAL_UI_ENABLED=false \
  PLAN_REQUESTS_PER_MINUTE=1000000 ORG_REQUESTS_PER_SECOND=1000000 ORG_REQUEST_BURST=1000000 \
  AUTH_FAILURES_PER_ADDRESS_BURST=1000000 \
  setsid npm start --silent >"$service_log" 2>&1 </dev/null &
service_pid=$!

until [[ -s $data_dir/runtime.json ]]; do
  if ! kill -0 "$service_pid" 2>/dev/null; then
    tail -n 40 "$service_log" >&2
    die "npm start exited before it was ready (log above, full log in $service_log)."
  fi
  ((SECONDS - started < START_TIMEOUT)) || {
    tail -n 40 "$service_log" >&2
    die "npm start was not ready after ${START_TIMEOUT} s."
  }
  sleep 1
done
read -r base_url org_id < <("$VENV/bin/python" -c 'import json, sys; r = json.load(open(sys.argv[1])); print(r["base_url"], r["org_id"])' "$data_dir/runtime.json")
api_key=$(<"$data_dir/dev-api-key")
say "service ready at $base_url after $((SECONDS - started)) s"

# Valid queries are charged: enough credits that 402 insufficient_credits never hides a path.
DATA_DIR=$data_dir npm run --silent admin -- credits grant --org "$org_id" --credits 1000000 >/dev/null ||
  die "npm run admin -- credits grant failed for $org_id (message above)."

say "schemathesis $SCHEMATHESIS_VERSION: --checks all, seed $FUZZ_SEED, at most $FUZZ_MAX_EXAMPLES examples per operation and phase, at most ${FUZZ_MAX_TIME} s"
st_log="$report_dir/schemathesis.log"
st_code=0
# The service's rules JSON Schema cannot state, and no crash cache (scripts/fuzz.toml says why).
cp scripts/fuzz.toml "$work/schemathesis.toml"
# /mcp is excluded: JSON-RPC over Streamable HTTP cannot be described as one request schema (the
# OpenAPI says only "an object"), so every check on it would test the fuzzer; test/mcp.test.ts covers it.
# Run from $work: hypothesis keeps a .hypothesis folder in the current directory. In the
# background + wait, so a signal to this script reaches its trap at once (timeout passes it on).
(cd "$work" && exec timeout --signal=INT --kill-after=30 "$FUZZ_MAX_TIME" "$OLDPWD/$VENV/bin/schemathesis" \
  --config-file "$work/schemathesis.toml" \
  run "$base_url/openapi.json" \
  --checks all \
  --seed "$FUZZ_SEED" \
  --max-examples "$FUZZ_MAX_EXAMPLES" \
  --continue-on-failure \
  --workers "$FUZZ_WORKERS" \
  --exclude-path-regex '^/mcp' \
  -H "Authorization: Bearer $api_key" \
  --request-timeout 60 \
  --generation-database none \
  --no-color \
  --report junit,json \
  --report-dir "$report_dir" \
  --report-junit-path "$report_dir/junit.xml" \
  --report-json-path "$report_dir/report.json" \
  >"$st_log" 2>&1) &
fuzz_pid=$!
wait "$fuzz_pid" || st_code=$?
fuzz_pid=

stop_service
# schemathesis' own closing sections (warnings, failures per check, phases), then one line per
# distinct failure with its curl; the per-example details stay in the log. Its last line is framed
# like pytest's ("=== 2 warnings in 35.77s ==="), and CI's reader of test output took that for a
# pytest run that executed no test (stops 14-17 landed as "ran no test"): printed here unframed.
awk '/^=+ (WARNINGS|SUMMARY) =+$/ { on = 1 }
  on && /^=+ .* in [0-9.]+s =+$/ { gsub(/^=+ | =+$/, ""); print "schemathesis: " $0; next }
  on' "$st_log" >&2
"$VENV/bin/python" scripts/fuzz-summary.py "$report_dir" "$st_code" "$FUZZ_SEED" >&2 || summary_code=$?
say "full output: $st_log; service log: $service_log; took $((SECONDS - started)) s"
exit "${summary_code:-0}"
