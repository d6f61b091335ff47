#!/usr/bin/env bash
# SOLAR on a lent GPU machine (the `device` tool): fit one SOLAR configuration on a data set
# (every chunk a job; `WORKERS` processes share the GPU), stop it at `BUDGET` seconds, then
# score the model made of chunks 0..K-1, for each K of `CHUNKS` whose chunks all finished, on the
# first `MAX_TEST` test rows. Everything it measures lands in $OUT (the device tool brings it
# back): solar_device.jsonl (solar_first_chunks.py's lines), chunks.jsonl (each finished
# chunk's done.json: train seconds, epoch seconds, best epoch, validation bucket P@1),
# data.json (the data's digest, to check it is the set generated on the CPU machine), log.
#
# Usage (from the repository root, on the device machine):
#   OUT=/tmp/out DATA=realistic-670k CONFIG='{"n_chunks": 16}' CHUNKS="8 16" WORKERS=4 \
#       BUDGET=400 MAX_TEST=20000 bash benchmarks/solar_device.sh
set -u
export PYTHONPATH=src PYTHONUNBUFFERED=1 HOLOXMC_DATA=${HOLOXMC_DATA:-/tmp/holoxmc-data}
RUNS=${RUNS:-/tmp/solar_device_runs}
mkdir -p "$OUT" "$RUNS"
exec > >(tee -a "$OUT/log") 2>&1
nvidia-smi -L 2>/dev/null || echo "no nvidia-smi"
python3 - "$DATA" "$OUT/data.json" <<'PY'
import json, sys, time
import numpy, scipy, torch
from holoxmc.data import load
from holoxmc.train.checkpoint import data_digest
begun = time.perf_counter()
train, test = load(sys.argv[1], "train"), load(sys.argv[1], "test")
record = {"data": sys.argv[1], "train_digest": data_digest(train.X, train.Y), "test_digest": data_digest(test.X, test.Y),
          "shape": [*train.X.shape, train.Y.shape[1]], "load_s": round(time.perf_counter() - begun, 1),
          "torch": torch.__version__, "numpy": numpy.__version__, "cuda": torch.cuda.is_available(),
          "gpu": torch.cuda.get_device_name(0) if torch.cuda.is_available() else None}
print(json.dumps(record)); open(sys.argv[2], "w").write(json.dumps(record) + "\n")
PY
begun=$(date +%s)
timeout -k 30 "$BUDGET" python3 benchmarks/solar_compare.py "$DATA" --eval test --max-eval "$MAX_TEST" --recall \
    --workers "$WORKERS" --threads "$(nproc)" --run-root "$RUNS" --configs "$CONFIG" --out "$OUT/solar_device.jsonl"
echo "fit stage ended with $? after $(( $(date +%s) - begun )) s"
python3 -c "import glob, json, sys; [print(json.dumps(json.load(open(p)))) for p in sorted(glob.glob(sys.argv[1] + '/config_0/chunk_*/done.json'))]" "$RUNS" > "$OUT/chunks.jsonl"
echo "finished chunks: $(wc -l < "$OUT/chunks.jsonl")"
for k in $CHUNKS; do
    python3 benchmarks/solar_first_chunks.py "$RUNS/config_0" "$DATA" --chunks "$k" --max-test "$MAX_TEST" \
        --threads "$(nproc)" --list 100 --label "device, $(( $(date +%s) - begun )) s after the fit began" --out "$OUT/solar_device.jsonl" || true
done
exec >&- 2>&-; wait  # let tee write the end of the log
