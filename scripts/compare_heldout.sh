#!/usr/bin/env bash
# `schedrec compare` on the held-out zoo models and on ONNX files of architectures outside the zoo (written by
# scripts/export_onnx_examples.py), one after another, into models/<target-key>/compare/<model>/ (keep the
# machine otherwise idle: every method is timed in this run). Then regenerate the README's results:
#   python scripts/readme_results.py
# MODELS="resnet50 bert_base", ONNX="onnx_encoder_d384" and COMPARE_ARGS="--scratch-cap-s 0" narrow it down.
set -euo pipefail
cd "$(dirname "$0")/.."
KEY=$(.venv/bin/schedrec target | .venv/bin/python -c 'import json, sys; print(json.load(sys.stdin)["target_key"])')
for m in ${MODELS-bert_base resnet50 mobilenet_v2 convnext_tiny}; do
  echo "== $m ($(date -u +%H:%M:%S))"
  .venv/bin/schedrec compare --model "zoo:$m" --out "models/$KEY/compare/$m" ${COMPARE_ARGS:-}
done
.venv/bin/python scripts/export_onnx_examples.py --out out/onnx
for m in ${ONNX-onnx_encoder_d384}; do
  echo "== $m ($(date -u +%H:%M:%S))"
  .venv/bin/schedrec compare --model "out/onnx/$m.onnx" --out "models/$KEY/compare/$m" ${COMPARE_ARGS:-}
done
