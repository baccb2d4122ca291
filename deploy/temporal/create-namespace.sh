#!/bin/sh
# The service's namespace (TEMPORAL_NAMESPACE, `default`), created once; describe first so a restart is a no-op.
set -eu
ns="${NAMESPACE:-default}"
temporal operator namespace describe --namespace "$ns" >/dev/null 2>&1 ||
  temporal operator namespace create --namespace "$ns" --retention "${RETENTION:-72h}"
