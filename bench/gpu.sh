#!/usr/bin/env bash
# The GPU checks of one lent accelerator, in one call (bench/README.md, "On a GPU"): the machine; the
# accountants (PLD: 1000 DP-SGD settings at the default accuracy, first call included, against
# dp_accounting's PLD loop on the host's CPU; RDP: the ε sweep); the clipping's sensitivity on the GPU's
# matrix units; then the DP-SGD step against the non-private step (and Opacus, on the same GPU) at batch
# 1024. Results go to $OUT (default /tmp/gpu-out), one file per part, written as each part ends so that a
# run stopped at its time limit still returns what it finished.
#
#   bash bench/gpu.sh [quick] [accounting] [sensitivity] [training]   # quick: fewer timed rounds;
#                                                                      # the parts to run (default: all)
#
# Packages the GPU image lacks (dp-accounting, dm-tree, opacus) are installed from wheels in .whl/ when
# that folder exists (download them for the machine's Python as bench/README.md says).
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/gpu-out}
mkdir -p "$OUT"
if [ -d .whl ]; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
    && export PYTHONPATH=/tmp/site
fi
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH} PYTHONUNBUFFERED=1
export JAXPRIV_TEST_CACHE=/tmp/jaxpriv-test-cache XLA_PYTHON_CLIENT_MEM_FRACTION=0.45  # torch shares the GPU
rounds=7 steps=20
[ "${1:-}" = quick ] && { rounds=3 steps=10; shift; }
parts=${*:-accounting sensitivity training}
want() { case " $parts " in *" $1 "*) return 0;; esac; return 1; }

{
  nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.sm,clocks.max.sm --format=csv
  python3 -c "import jax, flax, optax; print('jax', jax.__version__, jax.devices(), 'flax', flax.__version__, 'optax', optax.__version__)"
  python3 -c "import torch, opacus; print('torch', torch.__version__, 'opacus', opacus.__version__)" 2>&1 | tail -1
  uptime
} 2>&1 | tee "$OUT/machine.txt"

bench() {  # name, timeout, arguments of bench/dpsgd_throughput.py
  local name=$1 limit=$2
  shift 2
  timeout "$limit" python3 bench/dpsgd_throughput.py --rounds "$rounds" --steps "$steps" --json "$OUT/$name.json" "$@" \
    > "$OUT/$name.md" 2>&1
  echo "== $name: exit $?"
  grep -E "^\| (jaxpriv|JAX|Opacus|PyTorch|dp_|train_)" "$OUT/$name.md" | cut -c1-150
}

if want accounting; then
  # the accountants on the GPU (dp_accounting on the host's CPU: 20 of the 1000 settings timed, extrapolated;
  # the grid's tightness is a CPU check: bench/accounting.py --sections pld)
  timeout 200 python3 bench/accounting.py --sections pld-speed --pld-speed 1000 --dpa-sample 20 \
    --json "$OUT/pld.json" > "$OUT/pld.md" 2>&1
  echo "== pld: exit $?"
  grep -E "^\| (dp_accounting|jaxpriv|PLD)|Checks" "$OUT/pld.md" | cut -c1-200
  timeout 100 python3 bench/accounting.py --quick --sections rdp --json "$OUT/rdp.json" > "$OUT/rdp.md" 2>&1
  echo "== rdp: exit $?"
  grep -E "^\| (1000|the same|σ|random|ε on)|Checks" "$OUT/rdp.md" | cut -c1-200
fi

want training && bench cnn-standard-1024 150 --batch 1024 --pool standard
want training && bench transformer-1024 160 --batch 1024 --model transformer

# the sensitivity bound at this backend's default precision: each example's clipped contribution ≤ C
# (float32 and bfloat16 models, ghost and vmap)
if want sensitivity; then
  timeout 120 python3 -m pytest -q -p no:cacheprovider -n 2 --tb=line tests/test_train_clipping.py -k exceed \
    > "$OUT/sensitivity-tests.txt" 2>&1
  echo "== sensitivity tests: exit $?"
  grep -E "passed|failed|Error|assert" "$OUT/sensitivity-tests.txt" | cut -c1-300
fi

want training && bench cnn-shifted-1024 80 --batch 1024 --pool shifted
