"""Which isolated timing protocol orders two databases' schedules the way the model runs them? For every kernel
where two `schedrec compare` databases chose different schedules: its time inside the model (schedrec profile),
its recorded time, and two isolated timings now: warm (the measurer's default: repeated calls, caches hot) and
cold (number=1, every argument but the first flushed before each call, as in the model a weight is read once).

    python benchmarks/isolated_vs_in_model.py MODEL_SPEC COMPARE_FOLDER DB_A,DB_B OUT.json
"""
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from tvm.s_tir import meta_schedule as ms  # noqa: E402

from recommender.compare.profile import profile_model  # noqa: E402
from recommender.frontend.model_import import import_model  # noqa: E402
from recommender.measure import MeasureSettings, Measurer  # noqa: E402
from recommender.measure.worker import applied_records, record_module  # noqa: E402
from recommender.target.spec import parse_target  # noqa: E402


def mean(costs) -> float:
    return sum(float(x) for x in costs) / len(costs)


spec, folder, names = sys.argv[1], Path(sys.argv[2]), sys.argv[3].split(",")
t = parse_target("native")
prof = {n: profile_model(spec, t, folder / "db" / n, runs=15) for n in names}
inmodel = {n: {r["symbol"]: r["model_s"] / r["calls"] for r in p["rows"] if r["kind"] == "kernel"}
           for n, p in prof.items()}
model = import_model(spec, t.tvm())
# each kernel's record in each database, found by the query MetaScheduleApplyDatabase makes
records = {n: applied_records(model.mod, ms.database.JSONDatabase(work_dir=str(folder / "db" / n)), t.tvm())
           for n in names}
warm = MeasureSettings(repeat=7)
cold = MeasureSettings(repeat=21, number=1, min_repeat_ms=0, flush_cache=True)
rows = []
with Measurer(t.config) as m:
    for kernel in sorted(set(records[names[0]]) & set(records[names[1]])):
        recs = [records[n][kernel] for n in names]
        if str(recs[0].trace) == str(recs[1].trace):
            continue
        scheduled = [record_module(r) for r in recs]
        w = m.measure(scheduled, settings=warm)
        c = m.measure(scheduled, settings=cold)
        rows.append({"kernel": [kernel, kernel], "inmodel": [inmodel[n].get(kernel) for n in names],
                     "recorded": [mean(r.run_secs) for r in recs], "warm": [x.median for x in w],
                     "cold": [x.median for x in c]})
        print(json.dumps(rows[-1]), flush=True)
json.dump({"model": spec, "target_key": t.key, "databases": names, "date": time.strftime("%Y-%m-%d"),
           "inmodel": inmodel, "rows": rows, "totals": {n: p["totals"] for n, p in prof.items()}},
          open(sys.argv[4], "w"), indent=1)
