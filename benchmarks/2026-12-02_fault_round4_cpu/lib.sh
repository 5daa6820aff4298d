# sourced by the before/after scripts: `run ID duorl-args...` prints ID, seconds to exit, exit code,
# tracebacks on stderr, whether the run directory /tmp/bi_run exists, and the last stderr line
cd "$(git rev-parse --show-toplevel)"
T="training.num_envs=4 training.progress=false training.torch_threads=1 sim.nthread=1 algo.batch_size=32 algo.updates_per_step=2 algo.policy_frequency=2 algo.learning_starts=4 algo.buffer_size=64 algo.actor_hidden_dims=[32,32] algo.critic_hidden_dims=[32,32] algo.max_iterations=20 training.no_play=true"
run() {
  local id=$1; shift
  rm -rf /tmp/bi_run
  local s=$(date +%s.%N)
  PYTHONPATH=$PWD/src:$PWD timeout 300 .venv/bin/python -m duorl "$@" >/tmp/bi_out 2>/tmp/bi_err; local rc=$?
  local e=$(date +%s.%N)
  local last=$(grep -v '^\s*$' /tmp/bi_err | tail -1 | cut -c1-${CUT:-300})
  printf '%s\t%.1f s\trc=%s\ttraceback=%s\trundir=%s\t%s\n' "$id" "$(echo "$e - $s" | bc)" "$rc" \
    "$(grep -c Traceback /tmp/bi_err)" "$( [ -e /tmp/bi_run ] && echo yes || echo no)" "$last"
}
