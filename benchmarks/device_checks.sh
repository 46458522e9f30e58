#!/usr/bin/env bash
# The checks that need a CUDA machine, in one script: the GPU tests, the simulator's GPU throughput (reduced sweep
# and the whole fgrpo-fig2 sweep), the LLM trainer's throughput on the GPU, and the quick report's wall time at
# 2 and 16 workers of the local pool. Run from the repository root; each step's output goes to $OUT (or ./device-out).
set -u
out=${OUT:-device-out}; mkdir -p "$out"
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH}
{ nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv; nproc; python3 -c 'import torch; print(torch.__version__)'; } 2>&1 | tee "$out/machine.txt"
timeout 90 python3 -m pytest -m gpu -q -p no:cacheprovider tests/test_sim.py 2>&1 | tail -5 | tee "$out/pytest_gpu.txt"
timeout 45 python3 benchmarks/sim_throughput.py --device cuda --steps 20 2>&1 | tee "$out/sim_reduced.txt"
timeout 140 python3 benchmarks/sim_throughput.py --device cuda --full --no-baseline 2>&1 | tee "$out/sim_full.txt"
timeout 45 python3 benchmarks/llm_throughput.py --device cuda 2>&1 | tee "$out/llm_cuda.txt"
for jobs in 16 2; do
  rm -rf runs/quick
  t0=$(date +%s.%N)
  timeout $((jobs == 16 ? 100 : 110)) python3 -m tailmiss repro --quick --no-progress --jobs $jobs \
      > "$out/repro_quick_jobs$jobs.txt" 2>&1
  echo "jobs=$jobs rc=$? wall $(python3 -c "print(round($(date +%s.%N) - $t0, 1))") s" >> "$out/repro_quick_jobs$jobs.txt"
  tail -3 "$out/repro_quick_jobs$jobs.txt"
done
