#!/usr/bin/env bash
# Tunes the shipped bank and references for this CPU. Resumable: rerun after a kill and it continues
# from the last kernel it finished. Keep the machine otherwise idle while it measures.
# Held out of the bank for evaluation: resnet50, mobilenet_v2, bert_base, convnext_tiny.
# A CPU's first bank is tuned into models/<key>/bank.tuning/ and renamed bank/ once every model in
# BANK_MODELS is done: until then the CPU keeps transferring from the nearest complete bank
# (recommender/target/folders.py), not from a few models of its own. Models added later tune into bank/: zoo:c3d
# (the video model, donor of conv3d schedules; 6 kernels, about 7 minutes on 2 cores) and zoo:fcn8s (the
# segmentation model, donor of bilinear resizes) came after the banks of llvm-znver3-2c, llvm-znver4-2c and
# llvm-rocketlake-2c were tuned: rerun this script on those CPUs to add them.
set -euo pipefail
cd "$(dirname "$0")/.."
BANK_MODELS=${BANK_MODELS:-zoo:resnet18,zoo:efficientnet_b0,zoo:vit_b16,zoo:distilbert,zoo:mnasnet1_0,zoo:vgg16,zoo:googlenet,zoo:regnet_y_040,zoo:gpt2,zoo:mobilebert,zoo:densenet121,zoo:bert_tiny,zoo:c3d,zoo:fcn8s}
REFERENCE_MODELS=${REFERENCE_MODELS:-zoo:bert_base,zoo:resnet50,zoo:mobilenet_v2}
KEY=$(.venv/bin/python -c "from recommender.target.spec import native_target; print(native_target().key)")
if [ "${SKIP_BANK:-0}" != 1 ]; then
  if [ -d "models/$KEY/bank" ]; then
    .venv/bin/schedrec bank tune --models "$BANK_MODELS" --target native --trials-per-task 64
  else
    .venv/bin/schedrec bank tune --bank "models/$KEY/bank.tuning" --models "$BANK_MODELS" --target native \
      --trials-per-task 64
    mv "models/$KEY/bank.tuning" "models/$KEY/bank"
  fi
fi
if [ "${SKIP_REFERENCE:-0}" != 1 ]; then
  .venv/bin/schedrec bank tune --reference --models "$REFERENCE_MODELS" --target native --trials-per-task 200
fi
