#!/usr/bin/env bash
# Issue #23 on the GPU machine: the learner's kernel-level profile and its timings (bench learner
# --profile), for sac with the g1_walk_flat defaults (symmetry on), the same without symmetry, and
# flashsac at its defaults; then `bench corun` for sac g1_walk_flat (the capacity bound of the duo).
# Run from the repo root after the wheels are staged (../shared/tools/device-wheels.sh):
#   bash benchmarks/scripts/learner_profile_h200.sh OUT_DIR [SRC_DIR]
# SRC_DIR (default: src) picks the code: a second tree (e.g. the commit before a change, exported with
# `git archive`) measures both arms in one lease. CORUN=0 skips the co-run arms; PROFILE=N profiles N
# iterations (default 5, 0: timings only); ITERS=N timed iterations (default 30); BENCHES picks among
# sac_sym, sac_nosym and flashsac (default: all three).
set -uo pipefail
out=${1:?OUT_DIR}
src=${2:-src}
source benchmarks/scripts/device_env.sh
export PYTHONPATH=/tmp/duorl-site:$PWD/$src
record_device "$out"
tag=${TAG:-$(basename "$src")}
b() { local name=$1; shift; echo "== duorl bench learner $*" >&2
      python3 -m duorl bench learner --out "$out/${name}_$tag.json" "$@" > /dev/null 2>> "$out/bench_$tag.log"
      echo "rc=$? $name" >> "$out/bench_$tag.log"
      python3 - "$out/${name}_$tag.json" <<'PY'
import json, sys
try:
    r = json.load(open(sys.argv[1]))
except Exception as e:
    print(sys.argv[1], "missing:", e); sys.exit()
g = r.get("graph_ms_per_iteration") or {}
print(sys.argv[1].rsplit("/", 1)[-1], "graph median", g.get("median"), "eager", r["eager_ms_per_iteration"]["median"])
for arm, p in (r.get("profile") or {}).items():
    if "error" in p:
        print(" ", arm, p["error"]); continue
    print(" ", arm, "kernels", p["kernels_per_iteration"], "span", p["span_ms_per_iteration"], "busy", p["busy_ms_per_iteration"],
          "idle", p["idle_ms_per_iteration"], "gemm", p.get("gemm"))
    print("   ", {k: v["ms_per_iteration"] for k, v in p["by_kind"].items()})
PY
}
p=${PROFILE:-5} it=${ITERS:-30}
for name in ${BENCHES:-sac_sym sac_nosym flashsac}; do
  case $name in
    sac_sym) b sac_sym --algo sac --task g1_walk_flat --iters $it --profile $p;;
    sac_nosym) b sac_nosym --algo sac --iters $it --profile $p;;
    flashsac) b flashsac --algo flashsac --iters $it --profile $p;;
  esac
done
if [ "${CORUN:-1}" = 1 ]; then
  python3 -m duorl bench corun --algo sac --task g1_walk_flat --window-s ${CORUN_WINDOW_S:-10} \
    --out "$out/corun_sac_g1_walk_flat_$tag.json" > /dev/null 2> "$out/corun_$tag.log"
  echo "corun rc=$?"; tail -n 6 "$out/corun_$tag.log"
  python3 -c "import json;r=json.load(open('$out/corun_sac_g1_walk_flat_$tag.json'));print({k:v for k,v in r.items() if 'bound' in k or k in ('serial_ms','mps_gain')}); print({a:{s:x['mean_ms'] for s,x in v.items()} for a,v in r['arms'].items()})"
fi
