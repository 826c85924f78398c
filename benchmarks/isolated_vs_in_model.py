"""Which isolated timing protocol orders two databases' schedules the way the model runs them? For every kernel
where two `schedrec compare` databases chose different schedules: its time inside the model (schedrec profile),
its recorded time, and two isolated timings now: warm (the measurer's default: repeated calls, caches hot) and
cold (number=1, every argument but the first flushed before each call, as in the model a weight is read once).

    python benchmarks/isolated_vs_in_model.py MODEL_SPEC COMPARE_FOLDER DB_A,DB_B OUT.json
"""
import json, sys, time
from pathlib import Path
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import tvm_ffi
from tvm.s_tir import meta_schedule as ms
from tvm.s_tir import Schedule
from recommender.measure import MeasureSettings, Measurer
from recommender.target.spec import parse_target
from recommender.compare.profile import profile_model

spec, folder, names = sys.argv[1], Path(sys.argv[2]), sys.argv[3].split(",")
t = parse_target("native")
prof = {n: profile_model(spec, t, folder / "db" / n, runs=15) for n in names}
inmodel = {n: {r["symbol"]: r["model_s"] / r["calls"] for r in p["rows"] if r["kind"] == "kernel"} for n, p in prof.items()}
def recs(n):
    db = ms.database.JSONDatabase(work_dir=str(folder / "db" / n))
    out = {}
    for r in db.get_all_tuning_records():
        sch = Schedule(r.workload.mod)
        r.trace.apply_to_schedule(sch, remove_postproc=False)
        out[tvm_ffi.structural_hash(r.workload.mod)] = (r.workload.mod, sch.mod, r)
    return out
R = {n: recs(n) for n in names}
# kernel name per workload: via the profile's recorded costs is ambiguous; match by recorded cost
warm = MeasureSettings(repeat=7)
cold = MeasureSettings(repeat=21, number=1, min_repeat_ms=0, flush_cache=True)
rows = []
with Measurer(t.config) as m:
    common = set(R[names[0]]) & set(R[names[1]])
    for h in sorted(common):
        a, b = R[names[0]][h], R[names[1]][h]
        if str(a[2].trace) == str(b[2].trace):
            continue
        ra = sum(float(x) for x in a[2].run_secs) / len(a[2].run_secs)
        rb = sum(float(x) for x in b[2].run_secs) / len(b[2].run_secs)
        def name_of(n, cost):
            return next((r["symbol"] for r in prof[n]["rows"] if r["kind"] == "kernel"
                         and abs(r["isolated_s"] / r["calls"] - cost) <= 1e-9 * max(cost, 1e-9) + 1e-15), None)
        ka, kb = name_of(names[0], ra), name_of(names[1], rb)
        w = m.measure([a[1], b[1]], settings=warm)
        c = m.measure([a[1], b[1]], settings=cold)
        rows.append({"kernel": [ka, kb], "inmodel": [inmodel[names[0]].get(ka), inmodel[names[1]].get(kb)],
                     "recorded": [ra, rb], "warm": [w[0].median, w[1].median], "cold": [c[0].median, c[1].median]})
        print(json.dumps(rows[-1]), flush=True)
json.dump({"model": spec, "target_key": t.key, "databases": names, "date": time.strftime("%Y-%m-%d"), "inmodel": inmodel,
           "rows": rows, "totals": {n: p["totals"] for n, p in prof.items()}}, open(sys.argv[4], "w"), indent=1)
