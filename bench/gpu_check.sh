#!/bin/bash
# The GPU check, one shot, on a machine with an NVIDIA GPU and no network (results under $OUT):
# install the package (its missing pure-Python needs as wheels in .whl/), `thor-sdk devices --json`,
# the NVML and host:cuda tests, bench/bench_nvml.py, and a THOR round trip on the GPU measured in
# energy (NVML): probe a net's layers, fit, estimate, then measure the whole net's step. Nothing changes
# a GPU setting. Run from the repository root: OUT=dir bash bench/gpu_check.sh
# Knobs (environment): NVML_S (bench_nvml's part-1 window, default 3), RT_MODEL (default cnn5),
# RT_BATCH (default 256), RT_SECONDS (probing budget, default 90), RT_ROUNDS (rounds per probe at most,
# default 5: an NVML window is long), SKIP_CHECKS=1 (only the round trip, for a second call).
set -u
OUT=${OUT:?set OUT to a folder for the results}
NVML_S=${NVML_S:-3}; RT_MODEL=${RT_MODEL:-cnn5}; RT_BATCH=${RT_BATCH:-256}; RT_SECONDS=${RT_SECONDS:-90}
RT_ROUNDS=${RT_ROUNDS:-5}; SKIP_CHECKS=${SKIP_CHECKS:-0}
export PYTHONUNBUFFERED=1
SRC=$PWD
t0=$(date +%s); stamp() { echo "== $(( $(date +%s) - t0 )) s: $*"; }
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 3
python3 -m pip install -q --no-index --no-deps --no-build-isolation --no-compile --upgrade --target /tmp/site . || exit 4
export PYTHONPATH=/tmp/site PATH=/tmp/site/bin:$PATH
stamp installed
nvidia-smi --query-gpu=name,driver_version,pstate,power.draw,power.limit,clocks.sm,temperature.gpu --format=csv
(cd /tmp && python3 -c "import torch,pynvml,thor_sdk; print(torch.__version__, torch.version.cuda, thor_sdk.__file__)")
(cd /tmp && thor-sdk devices --json 2>&1) > $OUT/devices.json; head -c 1500 $OUT/devices.json; echo
if [ "$SKIP_CHECKS" != 1 ]; then
stamp tests
# the console script, not python -m: -m would put the source tree (without thor_sdk.models) first on sys.path
timeout 90 pytest -q -p no:cacheprovider -n 0 tests/test_host_cuda.py tests/test_meters_nvml.py 2>&1 | tail -5
stamp bench_nvml
timeout 150 python3 bench/bench_nvml.py --seconds $NVML_S --report $OUT/nvml.md --json $OUT/nvml.json 2>&1 | tail -30
fi
stamp "energy round trip: $RT_MODEL at batch $RT_BATCH"
rm -rf /tmp/rt && mkdir -p /tmp/rt && cd /tmp/rt
timeout $(( RT_SECONDS + 60 )) thor-sdk probe --device host:cuda --model $RT_MODEL --batch-size $RT_BATCH --metric energy \
  --max-seconds $RT_SECONDS --max-rounds $RT_ROUNDS --out rt.db --quiet --json > $OUT/probe.json; echo "probe rc $?"
tail -c 600 $OUT/probe.json; echo
stamp fit
( thor-sdk fit rt.db --out rt.json && thor-sdk estimate --estimator rt.json --model $RT_MODEL --batch-size $RT_BATCH --unknown-ops approx --json > est.json ) 2>&1 | tail -8
cp rt.json $OUT/estimator.json 2>/dev/null
stamp measure
timeout 90 thor-sdk measure --device host:cuda --model $RT_MODEL --batch-size $RT_BATCH --metric energy --json > meas.json; echo "measure rc $?"
python3 - "$OUT" <<'P'
import json, os, sys
out = sys.argv[1]
doc = {}
for name in ("est", "meas"):
    path = name + ".json"
    try:
        doc[name] = json.load(open(path))
    except Exception as ex:  # what the command printed instead, if anything
        doc[name] = {"error": repr(ex), "text": open(path).read()[-800:] if os.path.exists(path) else None}
json.dump(doc, open(out + "/roundtrip.json", "w"), indent=1)
e, m = doc["est"], doc["meas"]
tot = e.get("total") if isinstance(e.get("total"), dict) else e
print("THOR estimate:", {k: tot.get(k) for k in ("mean", "std", "unit", "metric") if k in tot})
print("FLOPs baseline:", e.get("flops_baseline"))
print("measured:", {k: v for k, v in m.items() if not isinstance(v, (list, dict))})
P
stamp done
