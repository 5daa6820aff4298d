#!/usr/bin/env bash
# Issue #22's H200 run: FastSAC on g1_motion_tracking with holosoma's box-lifting clip (6.5 s at 50 fps,
# from `pip download --no-deps holosoma==0.0.3`: holosoma/data/motions/g1_29dof/whole_body_tracking/
# sub3_largebox_003_mj.npz; docs/motion.md), in parts of at most 9 minutes. One command may run 10, and
# the run's budget is 28. Every part after the first resumes the previous one on the same machine, so
# the parts must run back to back; carry the clip as runs/clips (ignored by git).
#   bash benchmarks/scripts/motion_tracking_h200.sh OUT_DIR 1     # starts /tmp/track_box
#   bash benchmarks/scripts/motion_tracking_h200.sh OUT_DIR 2     # resumes it (and 3)
# Each part copies the metrics, the summary, the plots and `duorl metrics --last 100` into OUT_DIR, and
# the last part also renders a video with the reference (VIDEO=1; MUJOCO_GL=egl, where the machine has EGL).
# Measured (benchmarks/2026-12-01_motion_tracking_h200/): part 1 alone, PART_MINUTES=8, met issue #22's criterion.
set -uo pipefail
out=${1:?OUT_DIR}
part=${2:?PART (1, 2, 3)}
source benchmarks/scripts/device_env.sh
record_device "$out"
run=/tmp/track_box
clip=runs/clips/sub3_largebox_003_mj.npz
test -f "$clip" || { echo "no $clip: carry runs/clips" >&2; exit 2; }
args=(--algo sac --task g1_motion_tracking --sim mjwarp "task.motion_file=$clip" training.eval_envs=256
      training.max_wall_minutes=${PART_MINUTES:-9} training.progress=false training.log_interval=10)
if [ "$part" = 1 ]; then
  python3 -m duorl train "${args[@]}" training.log_dir=$run > "$out/train_part1.log" 2>&1
else
  python3 -m duorl train "${args[@]}" training.resume=$run > "$out/train_part$part.log" 2>&1
fi
echo "train rc=$?" | tee -a "$out/train_part$part.log"
cp $run/metrics.jsonl $run/run_summary.json "$out/" 2>/dev/null
cp -r $run/plots "$out/" 2>/dev/null
python3 -m duorl metrics $run --last 100 > "$out/metrics_last100_part$part.txt" 2>&1
tail -n 25 "$out/metrics_last100_part$part.txt"
if [ "${VIDEO:-0}" = 1 ]; then
  # the video needs GL loaders and PyOpenGL + an MP4 encoder: carry .gl with the device README's .deb
  # files and .gl/py with `pip download --no-deps pyopengl av` (imageio-ffmpeg's wheel is too large)
  if [ -d .gl ]; then for f in .gl/*.deb; do dpkg -x "$f" /; done; ldconfig; fi
  if [ -d .gl/py ]; then python3 -m pip install -q --no-index --no-deps --target /tmp/duorl-site .gl/py/*.whl; fi
  MUJOCO_GL=egl python3 -m duorl play $run --episodes 1 --video "$out/track_box.mp4" > "$out/play.log" 2>&1
  echo "play rc=$?"; tail -n 5 "$out/play.log"
fi
