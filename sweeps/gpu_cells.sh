#!/usr/bin/env bash
# Whole cells of a sweep on one GPU machine inside one time limit, their results back in one folder
# (docs/online.md#whole-cells-on-a-gpu). For a GPU machine lent for minutes, with JAX for CUDA
# installed, no package index and no Ray: every cell is its own sweep driver (--backend
# processes), all cells share the GPU at once, and the finished runs come back small.
#
#   bash sweeps/gpu_cells.sh SPEC.toml OUT SECONDS AXIS=VALUE...
#   bash sweeps/gpu_cells.sh sweeps/minatar_online.toml "$OUT" 540 cell=freeway-qrc cell=seaquest-qrc
#
# Prepared on the machine that sends the work, in the repository's root (both folders ignored):
#   .device/code.bundle   git bundle create .device/code.bundle HEAD: the runs are trained from a
#                         clean clone of it, so their rows name that commit (without it, or without
#                         git there, they run from this folder and name no commit; said below)
#   .device/whl/*.whl     the package's needs the machine lacks, for its Python (docs/online.md)
#
# OUT receives, per cell VALUE: VALUE.log (its driver's output), and for all cells: runs.tgz (each
# run directory without its checkpoints: config.json, results.csv, metrics.csv, episodes.csv and
# the sweep's logs and states), board.csv and timings.csv (the rows as the device's sweep wrote
# them), device.txt (the GPU, the commit, the versions). Back home, each run goes on the committed
# board with `offline_gitd leaderboard submit RUN_DIR --board BOARD`, which validates it as any run.
# A cell still running at SECONDS is stopped (Ctrl-C to its driver) and brings nothing back.
set -u -o pipefail
if [ $# -lt 4 ]; then
  sed -n 2,22p "$0" | cut -c3-
  exit 2
fi
spec=$1 out=$2 limit=$3
shift 3
mkdir -p "$out"
out=$(cd "$out" && pwd)
started=$(date +%s)

if ls .device/whl/*.whl >/dev/null 2>&1; then
  site=$(mktemp -d /tmp/gpu-site.XXXXXX)
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target "$site" \
    .device/whl/*.whl || { echo "gpu_cells: the carried wheels did not install" >&2; exit 1; }
else
  site=
fi
code=$PWD
if [ -f .device/code.bundle ] && command -v git >/dev/null; then
  code=$(mktemp -d /tmp/gpu-src.XXXXXX)
  git -c advice.detachedHead=false clone -q .device/code.bundle "$code" || exit 1
else
  echo "gpu_cells: no .device/code.bundle or no git here: training from this folder, rows name no commit" >&2
fi
cd "$code" || exit 1
export PYTHONPATH=$code${site:+:$site}${PYTHONPATH:+:$PYTHONPATH}
export JAX_PLATFORMS=${JAX_PLATFORMS:-cuda} PYTHONUNBUFFERED=1  # cpu: the script's own test
# The cells share the card: each process takes its share of memory, not JAX's default 75%.
export XLA_PYTHON_CLIENT_MEM_FRACTION=$(python3 -c "print(round(0.9 / $#, 3))")
{
  nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
  echo "commit $(git rev-parse HEAD 2>/dev/null || echo none)"
  python3 -c "import jax, sys; print('python', sys.version.split()[0], 'jax', jax.__version__, jax.devices())"
} > "$out/device.txt" 2>&1

runs=$(mktemp -d /tmp/gpu-runs.XXXXXX)  # never an earlier call's runs or board
left=$((limit - ($(date +%s) - started) - 30))  # 30 s kept for packing the results
drivers=()
for only in "$@"; do
  name=${only#*=}
  timeout --signal=INT --kill-after=20 "$left" python3 -m offline_gitd.cli sweep "$spec" --backend processes \
    --no-pin --out "$runs/$name" --only "$only" --board "$runs/board.csv" >"$out/$name.log" 2>&1 &
  drivers+=($!)
done
failed=0
for pid in "${drivers[@]}"; do
  wait "$pid" || failed=$((failed + 1))
done
cp "$runs/board.csv" "$runs/timings.csv" "$out/" 2>/dev/null
tar czf "$out/runs.tgz" -C "$runs" --exclude=checkpoints --exclude=host_state --exclude=tb \
  --exclude=board.csv --exclude=timings.csv --exclude='*.lock' . 2>/dev/null
grep -h "sweep finished\|failed:" "$out"/*.log
echo "gpu_cells: $(($(date +%s) - started)) s; $failed of $# cells failed or were stopped; results in $out"
[ "$failed" -eq 0 ]
