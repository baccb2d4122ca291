"""Rules the schema validators cannot see, for scripts/check-deploy.sh.

  deploy-policy.py compose <compose-go JSON model>   services of docker-compose.yml
  deploy-policy.py k8s <rendered manifests>...       output of `helm template`

Prints each violation and exits 1 if there is any. Needs PyYAML (the kubernetes-validate venv has it).
"""
import json
import sys

import yaml

problems: list[str] = []


def pinned(where: str, image: str) -> None:
    # The tag is after a colon in the last path segment (a registry's port has a colon too).
    if "@sha256:" in image:
        return
    last = image.rsplit("/", 1)[-1]
    tag = last.split(":", 1)[1] if ":" in last else ""
    if not tag:
        problems.append(f"{where}: image {image!r} has no tag")
    elif tag == "latest":
        problems.append(f"{where}: image {image!r} uses latest")


PUBLIC_SERVICES = {"api"}
# Processes that read or write connection secrets: each needs the same connections keyring, or it
# falls back to a key of its own in DATA_DIR and the others cannot read what it stored.
KEYRING_ENTRYPOINTS = ("apps/api/main.ts", "apps/worker/main.ts")
KEYRING_ENV = ("CONNECTIONS_ENCRYPTION_KEY", "CONNECTIONS_PREVIOUS_KEYS", "PAYLOAD_ENCRYPTION_KEY")


def runs_keyring_process(command: list[str] | None) -> bool:
    return any(part in KEYRING_ENTRYPOINTS for part in command or [])
LOOPBACK = {"127.0.0.1", "::1"}


def check_compose(path: str) -> None:
    model = json.load(open(path))
    services = model.get("services", {})
    for name, svc in services.items():
        where = f"compose service {name}"
        pinned(where, svc.get("image", ""))
        for dep in svc.get("depends_on", {}) or {}:
            if dep not in services:
                problems.append(f"{where}: depends_on unknown service {dep!r}")
        # Only the API is for outsiders. Temporal's frontend, its UI, PostgreSQL and the workers'
        # metrics have no authentication of their own: published at all, then on loopback only.
        if name not in PUBLIC_SERVICES:
            for port in svc.get("ports") or []:
                if port.get("host_ip") not in LOOPBACK:
                    problems.append(f"{where}: publishes port {port.get('published')} on every interface; bind it to 127.0.0.1")
        if runs_keyring_process(svc.get("command")):
            env = svc.get("environment") or {}
            for var in KEYRING_ENV:
                if var not in env:
                    problems.append(f"{where}: runs {' '.join(svc['command'][-1:])} without {var}")
        if "build" in svc:  # the service's own image: the hardening this repo controls
            if svc.get("read_only") is not True:
                problems.append(f"{where}: read_only is not true")
            if str(svc.get("user", "0")).split(":")[0] in ("", "0", "root"):
                problems.append(f"{where}: runs as root")
            if "ALL" not in (svc.get("cap_drop") or []):
                problems.append(f"{where}: does not drop all capabilities")


def check_k8s(paths: list[str]) -> None:
    docs = [d for p in paths for d in yaml.safe_load_all(open(p)) if d]
    kinds = {d["kind"] for d in docs}
    for needed in ("Deployment", "Service", "Job"):
        if needed not in kinds:
            problems.append(f"rendered manifests: no {needed}")
    for doc in docs:
        where = f"{doc['kind']}/{doc['metadata']['name']}"
        if doc["kind"] in ("Secret", "ConfigMap"):
            problems.append(f"{where}: the chart must not carry settings or secrets as objects; use existing Secrets")
        pod = doc.get("spec", {}).get("template", {}).get("spec")
        if pod is None:
            continue
        if pod.get("securityContext", {}).get("runAsNonRoot") is not True:
            problems.append(f"{where}: pod is not runAsNonRoot")
        for c in pod.get("containers", []) + pod.get("initContainers", []):
            cw = f"{where} container {c['name']}"
            pinned(cw, c.get("image", ""))
            res = c.get("resources", {})
            for part in ("requests", "limits"):
                for r in ("cpu", "memory"):
                    if r not in res.get(part, {}):
                        problems.append(f"{cw}: no {part}.{r}")
            sc = c.get("securityContext", {})
            if sc.get("readOnlyRootFilesystem") is not True:
                problems.append(f"{cw}: root filesystem is writable")
            if sc.get("allowPrivilegeEscalation") is not False:
                problems.append(f"{cw}: allowPrivilegeEscalation is not false")
            for e in c.get("env", []):
                if any(s in e["name"] for s in ("DATABASE_URL", "KEY", "PASSWORD", "SECRET", "TOKEN")) and "value" in e:
                    problems.append(f"{cw}: {e['name']} is a literal value, not a secretKeyRef")
            if runs_keyring_process(c.get("command")):
                names = {e["name"] for e in c.get("env", [])}
                for var in KEYRING_ENV:
                    if var not in names:
                        problems.append(f"{cw}: runs {c['command'][-1]} without {var}")
        if doc["kind"] == "Deployment" and doc["metadata"]["name"].endswith("-api"):
            c = pod["containers"][0]
            probes = {p: c.get(p, {}).get("httpGet", {}).get("path") for p in ("startupProbe", "livenessProbe", "readinessProbe")}
            if probes != {"startupProbe": "/livez", "livenessProbe": "/livez", "readinessProbe": "/readyz"}:
                problems.append(f"{where}: probes are {probes}")


if __name__ == "__main__":
    mode, *args = sys.argv[1:]
    check_compose(args[0]) if mode == "compose" else check_k8s(args)
    for p in problems:
        print(f"policy: {p}", file=sys.stderr)
    sys.exit(1 if problems else 0)
