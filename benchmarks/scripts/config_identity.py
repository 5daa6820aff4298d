"""`duorl config` before and after a change: every value and source, pair by pair.

    python benchmarks/scripts/config_identity.py capture DIR        # duorl config for the 9 algo x task pairs
    python benchmarks/scripts/config_identity.py compare BEFORE AFTER [--out DIR]

`capture` writes DIR/config_ALGO_TASK.yaml (stdout and stderr of `duorl config --algo ALGO --task TASK`,
the duorl on PYTHONPATH). `compare` reads each file's YAML body, one `key: value  # source` per leaf, into
{dotted key: (value, source)} and its `#` header lines, and prints per pair: keys with the same value and
source, keys whose value or source differ, keys only before, keys only after, and the header lines that
changed. With --out it writes summary.txt and diff_ALGO_TASK.txt there. CPU only, a few seconds per pair.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

ALGOS = ("sac", "flashsac", "warpsac")
TASKS = ("pendulum_swingup", "g1_walk_flat", "g1_motion_tracking")


def capture(out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    for algo in ALGOS:
        for task in TASKS:
            r = subprocess.run([sys.executable, "-m", "duorl", "config", "--algo", algo, "--task", task],
                               capture_output=True, text=True, check=False)
            (out / f"config_{algo}_{task}.yaml").write_text(r.stdout + r.stderr, encoding="utf-8")
            print(f"{algo} {task}: exit {r.returncode}")


def parse(text: str) -> tuple[list[str], dict[str, tuple[str, str]]]:
    """(header lines, {dotted key: (value, source)}) of one `duorl config` listing."""
    header: list[str] = []
    leaves: dict[str, tuple[str, str]] = {}
    path: list[str] = []
    for line in text.splitlines():
        if line.startswith("#"):
            header.append(line)
            continue
        if not line.strip():
            continue
        depth = (len(line) - len(line.lstrip(" "))) // 2
        body, _, source = line.strip().partition("  # ")
        key, _, value = body.partition(":")
        path = path[:depth] + [key]
        if value.strip() or source:
            leaves[".".join(path)] = (value.strip(), source.strip())
    return header, leaves


def compare(before: Path, after: Path, out: Path | None) -> int:
    summary = [f"{'pair':<32} {'same':>5} {'differ':>6} {'only before':>11} {'only after':>10} {'header changes':>14}"]
    for algo in ALGOS:
        for task in TASKS:
            name = f"config_{algo}_{task}.yaml"
            hb, b = parse((before / name).read_text(encoding="utf-8"))
            ha, a = parse((after / name).read_text(encoding="utf-8"))
            same = [k for k in b if k in a and a[k] == b[k]]
            differ = [k for k in b if k in a and a[k] != b[k]]
            gone = [k for k in b if k not in a]
            new = [k for k in a if k not in b]
            header = [f"- {x}" for x in hb if x not in ha] + [f"+ {x}" for x in ha if x not in hb]
            summary.append(f"{algo + ' ' + task:<32} {len(same):>5} {len(differ):>6} {len(gone):>11} {len(new):>10} "
                           f"{len(header):>14}")
            lines = [f"{algo} x {task}: {len(same)} keys with the same value and source"]
            lines += [f"differs: {k}: before {b[k]}, after {a[k]}" for k in differ]
            lines += [f"only before: {k}: {b[k][0]}  # {b[k][1]}" for k in gone]
            lines += [f"only after: {k}: {a[k][0]}  # {a[k][1]}" for k in new]
            lines += [f"header {x}" for x in header]
            if out is not None:
                out.mkdir(parents=True, exist_ok=True)
                (out / f"diff_{algo}_{task}.txt").write_text("\n".join(lines) + "\n", encoding="utf-8")
    text = "\n".join(summary) + "\n"
    print(text, end="")
    if out is not None:
        (out / "summary.txt").write_text(text, encoding="utf-8")
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="cmd", required=True)
    c = sub.add_parser("capture")
    c.add_argument("out", type=Path)
    d = sub.add_parser("compare")
    d.add_argument("before", type=Path)
    d.add_argument("after", type=Path)
    d.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()
    if args.cmd == "capture":
        capture(args.out)
        return 0
    return compare(args.before, args.after, args.out)


if __name__ == "__main__":
    sys.exit(main())
