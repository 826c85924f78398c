#!/usr/bin/env bash
# Everything this CPU's shipped data needs, in order, each step resumable (rerun after a kill and it
# continues where it stopped). Keep the machine otherwise idle while it measures; `touch
# models/<key>/bank/PAUSE` makes the bank tuner wait between kernels. SKIP_BANK=1 skips step 1 (a complete
# bank only re-imports its models there). (Steps 2 and 3 were run once with `--remeasure wrong_result` after
# the correctness check was made tolerant of rounding where sums cancel; real wrong results remain, so the
# option is not repeated here.)
#   1. the bank (scripts/tune_bank.sh, SKIP_REFERENCE=1)
#   2. the transfer matrix: leave-one-model-out replay over the bank (top 3 records per source kernel,
#      at most 48 candidates per kernel) -> models/<key>/transfer/; kernels finished before the bank gained
#      models get those donors' candidates added (--add-donors)
#   3. exhaustive replay of the held-out zoo models from the whole bank -> models/<key>/heldout/<model>/
#   4. the target's rankers, trained on its matrix, and their leave-one-model-out evaluation
#      -> models/<key>/rankers/
#   5. the "full tuning" references (200 trials per kernel) -> models/<key>/reference/ (SKIP_REFERENCE=1: not)
#   6. the latency table (LATENCY_MODELS=a,b: those rows only; else held-out models without a reference get
#      rows too), the figures and the card
set -euo pipefail
cd "$(dirname "$0")/.."
KEY=$(.venv/bin/python -c "from recommender.target.spec import native_target; print(native_target().key)")
HELDOUT=${HELDOUT:-resnet50 mobilenet_v2 bert_base convnext_tiny}
step() { echo "== $(date -u +%FT%TZ) $*"; }

if [ -z "${SKIP_BANK:-}" ]; then
  step bank
  SKIP_REFERENCE=1 scripts/tune_bank.sh
fi
step transfer matrix
.venv/bin/schedrec replay --all-pairs --top-n 3 --cap 48 --add-donors
for m in $HELDOUT; do
  if [ ! -f "models/$KEY/heldout/$m/report.json" ]; then
    step "held-out replay $m"
    .venv/bin/schedrec replay --model "zoo:$m" --top-n 3 --cap 48 --out "models/$KEY/heldout/$m"
  fi
done
step rankers
.venv/bin/schedrec train --target-key "$KEY" --ranker all
.venv/bin/schedrec evaluate --target-key "$KEY"
if [ -z "${SKIP_REFERENCE:-}" ]; then
  step references
  SKIP_BANK=1 SKIP_REFERENCE= scripts/tune_bank.sh
fi
step latency table and card
.venv/bin/python scripts/latency_table.py ${LATENCY_MODELS:+--models "$LATENCY_MODELS"}
# held-out zoo models without a reference get rows of their own (no own-records column)
UNREFERENCED=$(for m in $HELDOUT; do [ -d "models/$KEY/reference/$m" ] || printf '%s,' "$m"; done)
if [ -z "${LATENCY_MODELS:-}" ] && [ -n "$UNREFERENCED" ]; then
  .venv/bin/python scripts/latency_table.py --heldout "${UNREFERENCED%,}"
fi
.venv/bin/python scripts/transfer_figures.py
.venv/bin/python scripts/make_card.py
step done
