#!/bin/bash
# The GPU check, one shot, on a machine with an NVIDIA GPU and no network (results under $OUT):
# install the package (its missing pure-Python needs as wheels in .whl/), `thor-sdk devices --json`,
# bench/bench_nvml.py, the NVML and host:cuda tests, and a short THOR round trip (probe, fit, estimate,
# measure) on the GPU. Nothing changes a GPU setting. Run from the repository root: OUT=dir bash bench/gpu_check.sh
set -u
OUT=${OUT:?set OUT to a folder for the results}
export PYTHONUNBUFFERED=1
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 3
python3 -m pip install -q --no-index --no-deps --no-build-isolation --no-compile --upgrade --target /tmp/site . || exit 4
export PYTHONPATH=/tmp/site PATH=/tmp/site/bin:$PATH
nvidia-smi --query-gpu=name,driver_version,pstate,power.draw,power.limit,clocks.sm,temperature.gpu --format=csv | tee $OUT/smi.txt
python3 -c "import torch,pynvml,thor_sdk; print(torch.__version__, torch.version.cuda, thor_sdk.__file__)"
(cd /tmp && thor-sdk devices --json 2>&1) > $OUT/devices.json; head -c 1500 $OUT/devices.json; echo
timeout 200 python3 bench/bench_nvml.py --report $OUT/nvml.md --json $OUT/nvml.json 2>&1 | tail -40
timeout 90 pytest -q -p no:cacheprovider tests/test_host_cuda.py tests/test_meters_nvml.py 2>&1 | tail -5
cd /tmp && mkdir -p rt && cd rt
( timeout 120 thor-sdk probe --device host:cuda --model lenet5 --batch-size 64 --out lenet5-cuda.db --quiet \
  && thor-sdk fit lenet5-cuda.db --out lenet5-cuda.json \
  && thor-sdk estimate --estimator lenet5-cuda.json --model lenet5 --batch-size 64 --json > est.json \
  && thor-sdk measure --device host:cuda --model lenet5 --batch-size 64 --json > meas.json ) 2>&1 | tail -15
python3 - <<'P' | tee $OUT/roundtrip.txt
import json
try:
    e = json.load(open("est.json")); m = json.load(open("meas.json"))
    tot = e.get("total") or e
    print("THOR", {k: tot.get(k) for k in ("mean", "std") if isinstance(tot, dict)}, "measured median", m["median"], "mean", m["mean"], "device", m["device"])
except Exception as ex:
    print("round trip incomplete:", ex)
P
cp est.json meas.json $OUT/ 2>/dev/null; true
