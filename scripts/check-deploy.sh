#!/usr/bin/env bash
# Validates the deploy files offline: docker-compose.yml with the compose-spec loader, the Helm chart
# with `helm lint` and `helm template`, and the rendered manifests with kubernetes-validate (JSON
# schemas shipped in the package) plus scripts/deploy-policy.py (pinned images, resources,
# non-root, read-only root filesystem, secrets only by reference, the API's probes), and Temporal's
# dynamic config (deploy/temporal/dynamic-config.yaml) with the server's own validator. Any error fails.
#
#   bash scripts/check-deploy.sh
#
# Tools are built or installed once into .tools/ (ignored) and reused: the compose-spec loader and
# Helm from the Go module proxy (needs Go >= 1.24; CGO_ENABLED=0), kubernetes-validate from PyPI in a
# venv. Only that step uses the network; where `unshare -n` works (root) the checks run in a network
# namespace with no interfaces, which proves they are offline.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

COMPOSE_GO_VERSION=v2.16.2
HELM_VERSION=v3.22.0
KUBERNETES_VALIDATE_VERSION=1.37.0
# The Kubernetes version manifests are rendered for and validated against (the chart needs >= 1.27).
KUBE_VERSION=1.33.0
TOOLS=$PWD/.tools
GOBIN_DIR=$TOOLS/go-bin
VENV=$TOOLS/kv-venv
OUT=$TOOLS/check-deploy
CHART=deploy/helm/workflow-query-service

say() { printf 'check-deploy: %s\n' "$@" >&2; }
die() {
  say "$@"
  exit 1
}

# Build one Go tool into .tools/go-bin unless the same version is already there.
go_tool() {
  local bin=$1 pkg=$2 version=$3
  [[ -x $GOBIN_DIR/$bin && $(cat "$GOBIN_DIR/$bin.version" 2>/dev/null) == "$pkg@$version" ]] && return 0
  command -v go >/dev/null 2>&1 || die "go is missing: Go >= 1.24 builds $pkg@$version (the Go module proxy has it)."
  say "building $pkg@$version (once)…"
  mkdir -p "$GOBIN_DIR"
  GOBIN=$GOBIN_DIR CGO_ENABLED=0 GOFLAGS=-buildvcs=false go install "$pkg@$version" || die "go install $pkg@$version failed."
  echo "$pkg@$version" >"$GOBIN_DIR/$bin.version"
}

ensure_kubernetes_validate() {
  [[ $("$VENV/bin/kubernetes-validate" --version 2>/dev/null || true) == *"$KUBERNETES_VALIDATE_VERSION"* ]] && return 0
  python3 -c 'import ensurepip, venv' >/dev/null 2>&1 || die "python3 cannot create virtual environments. Install (Debian, as root): apt-get install -y python3-venv"
  say "installing kubernetes-validate==$KUBERNETES_VALIDATE_VERSION into $VENV (once)…"
  rm -rf "$VENV"
  python3 -m venv "$VENV"
  "$VENV/bin/python" -m pip install --quiet --disable-pip-version-check --no-input "kubernetes-validate==$KUBERNETES_VALIDATE_VERSION" ||
    die "pip failed to install kubernetes-validate==$KUBERNETES_VALIDATE_VERSION."
}

t0=$SECONDS
go_tool cmd github.com/compose-spec/compose-go/v2/cmd "$COMPOSE_GO_VERSION"
go_tool helm helm.sh/helm/v3/cmd/helm "$HELM_VERSION"
ensure_kubernetes_validate
# Temporal's server, whose `validate-dynamic-config` command checks keys and value types (the same
# binary `npm run cluster` runs; built once by its own script).
TEMPORAL_BIN=$(bash scripts/build-temporal-server.sh) || die "scripts/build-temporal-server.sh failed (above)."
say "tools ready ($((SECONDS - t0))s)"

# From here on nothing may use the network.
offline=()
if unshare -n true 2>/dev/null; then
  offline=(unshare -n --)
else
  say "unshare -n is not available (not root?): checks run with the network reachable, but need none"
fi
run() { "${offline[@]}" "$@"; }
COMPOSE=$GOBIN_DIR/cmd
HELM=$GOBIN_DIR/helm
# Helm keeps no state in $HOME: its cache, config and data live under .tools.
export HELM_CACHE_HOME=$TOOLS/helm/cache HELM_CONFIG_HOME=$TOOLS/helm/config HELM_DATA_HOME=$TOOLS/helm/data
rm -rf "$OUT"
mkdir -p "$OUT"

# --- docker-compose.yml ---------------------------------------------------------------------------
# The loader's `cmd` (flags: -no-interpolation -no-path-resolution -no-normalization
# -no-consistency -format yaml|json) loads with LoadModel, which in v2.16.2 does not hand the
# environment to interpolation: every ${VAR} resolves as unset. So three passes:
# 1. the file as written, schema-checked without interpolation;
say "compose: schema of docker-compose.yml (no interpolation)"
run "$COMPOSE" -no-interpolation docker-compose.yml >/dev/null || die "docker-compose.yml does not load (above)."
# 2. required variables (${VAR:?msg}) given a placeholder, then fully loaded: interpolated,
#    normalized, consistency-checked; the JSON model goes through the policy checks;
sed -E 's/\$\{([A-Z_][A-Z0-9_]*):\?[^}]*\}/${\1:-check-deploy-placeholder}/g' docker-compose.yml >"$OUT/compose-filled.yml"
say "compose: interpolated and normalized model"
run "$COMPOSE" -format json "$OUT/compose-filled.yml" >"$OUT/compose-model.json" || die "docker-compose.yml (variables filled) does not load (above)."
run "$VENV/bin/python" scripts/deploy-policy.py compose "$OUT/compose-model.json" || die "docker-compose.yml breaks a deploy rule (above)."
# 3. without them the load must fail, naming only the required secrets.
if errors=$(run env -u POSTGRES_PASSWORD -u CONNECTIONS_ENCRYPTION_KEY -u PAYLOAD_ENCRYPTION_KEY "$COMPOSE" docker-compose.yml 2>&1 >/dev/null); then
  die "docker-compose.yml loads without POSTGRES_PASSWORD, CONNECTIONS_ENCRYPTION_KEY and PAYLOAD_ENCRYPTION_KEY: they must be required."
fi
unexpected=$(grep -o 'required variable [A-Z_]* is missing' <<<"$errors" | sort -u | grep -v -e POSTGRES_PASSWORD -e CONNECTIONS_ENCRYPTION_KEY -e PAYLOAD_ENCRYPTION_KEY || true)
grep -q 'required variable POSTGRES_PASSWORD is missing' <<<"$errors" &&
  grep -q 'required variable CONNECTIONS_ENCRYPTION_KEY is missing' <<<"$errors" &&
  grep -q 'required variable PAYLOAD_ENCRYPTION_KEY is missing' <<<"$errors" && [[ -z $unexpected ]] ||
  die "docker-compose.yml without its secrets failed in an unexpected way:" "$errors"

# The image the compose file builds and the chart runs: its base pinned to a version too.
while read -r _ image _; do
  [[ $image =~ :[0-9][^:/]*$ && $image != *:latest ]] || die "deploy/Dockerfile: FROM $image is not pinned to a version."
done < <(grep -iE '^FROM ' deploy/Dockerfile)

# --- Temporal dynamic config ---------------------------------------------------------------------
# The server's validator (dynamicconfig.LoadYamlFile) reports decode errors as errors but an unknown
# key or a value of the wrong type only as a warning, with exit 0: both fail here, since the server
# would silently ignore such a setting.
DYNAMIC_CONFIG=deploy/temporal/dynamic-config.yaml
validate_dynamic_config() {
  local out
  out=$(run "$TEMPORAL_BIN/temporal-server" validate-dynamic-config "$1" 2>&1) || { printf '%s\n' "$out"; return 1; }
  if grep -qE '^\s*(error|warning):' <<<"$out"; then
    printf '%s\n' "$out"
    return 1
  fi
}
say "temporal: $DYNAMIC_CONFIG with the server's validate-dynamic-config"
validate_dynamic_config "$DYNAMIC_CONFIG" >&2 || die "$DYNAMIC_CONFIG does not validate (above)."
# The check itself must catch a misspelt key and a value of the wrong type.
printf 'limit.blobSize.eror:\n  - value: 1\nsystem.namespaceCacheRefreshInterval:\n  - value: soon\n' >"$OUT/dynamic-config-bad.yaml"
validate_dynamic_config "$OUT/dynamic-config-bad.yaml" >/dev/null && die "the dynamic config check accepted a misspelt key and a bad duration."
grep -q "$DYNAMIC_CONFIG" "$OUT/compose-model.json" || die "docker-compose.yml does not mount $DYNAMIC_CONFIG into the Temporal server."

# --- Helm chart -----------------------------------------------------------------------------------
values=("$CHART"/ci/*-values.yaml)
((${#values[@]})) || die "no representative values in $CHART/ci/"
for v in "${values[@]}"; do
  name=$(basename "$v" .yaml)
  say "helm: lint and template with $v"
  run "$HELM" lint --strict --quiet --kube-version "$KUBE_VERSION" "$CHART" -f "$v" || die "helm lint failed with $v (above)."
  run "$HELM" template wqs "$CHART" --namespace wqs --kube-version "$KUBE_VERSION" -f "$v" >"$OUT/$name.yaml" ||
    die "helm template failed with $v (above)."
  say "kubernetes-validate: $name ($(grep -c '^kind:' "$OUT/$name.yaml") objects, Kubernetes $KUBE_VERSION, strict)"
  run "$VENV/bin/kubernetes-validate" --strict --quiet -k "$KUBE_VERSION" "$OUT/$name.yaml" ||
    die "the manifests rendered with $v do not validate (above)."
  run "$VENV/bin/python" scripts/deploy-policy.py k8s "$OUT/$name.yaml" || die "the manifests rendered with $v break a deploy rule (above)."
done

# The chart's guard rails: these renders must fail, each with its own message.
refuse() {
  local want=$1
  shift
  local got
  if got=$(run "$HELM" template wqs "$CHART" --kube-version "$KUBE_VERSION" -f "${values[0]}" "$@" 2>&1); then
    die "helm template accepted $*: it must fail with \"$want\"."
  fi
  grep -qF "$want" <<<"$got" || die "helm template $* failed, but not with \"$want\":" "$got"
}
say "helm: the chart refuses unpinned images, missing Secrets, a missing Temporal address, unknown values"
refuse "must be a pinned version" --set image.tag=latest
refuse "must be a pinned version" --set image.tag=
refuse "secrets.database.name" --set secrets.database.name=
refuse "secrets.connections.name" --set secrets.connections.name=
refuse "secrets.payload.name" --set secrets.payload.name=
refuse "temporal.address" --set temporal.address=
# values.schema.json: a misspelt key, or a secret passed as a plain setting, fails instead of being ignored.
refuse "additional properties 'enable' not allowed" --set api.hpa.enable=false
refuse "invalid propertyName 'DB_PASSWORD'" --set extraEnv.DB_PASSWORD=x

say "ok: compose, Temporal dynamic config, chart (${#values[@]} value sets), manifests valid ($((SECONDS - t0))s)"
