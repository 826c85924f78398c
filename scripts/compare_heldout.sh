#!/usr/bin/env bash
# `schedrec compare` on the held-out zoo models, one after another, into models/<target-key>/compare/<model>/
# (keep the machine otherwise idle: every method is timed in this run). Then regenerate the README's results:
#   python scripts/readme_results.py
# MODELS="resnet50 bert_base" and COMPARE_ARGS="--scratch-cap-s 0" narrow it down.
set -euo pipefail
cd "$(dirname "$0")/.."
KEY=$(.venv/bin/schedrec target | .venv/bin/python -c 'import json, sys; print(json.load(sys.stdin)["target_key"])')
for m in ${MODELS:-bert_base resnet50 mobilenet_v2 convnext_tiny}; do
  echo "== $m ($(date -u +%H:%M:%S))"
  .venv/bin/schedrec compare --model "zoo:$m" --out "models/$KEY/compare/$m" ${COMPARE_ARGS:-}
done
