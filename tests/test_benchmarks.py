"""benchmarks/: the size rule and the index of benchmarks/README.md hold, and every benchmarks/ path that a
document, a README or a source file cites exists (a move or a clean-up must not lose what a claim rests on)."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BENCH = ROOT / "benchmarks"
KB = 1024
MAX_TOTAL = 16 * KB * KB
MAX_FILE = 512 * KB
MAX_PLAIN_TEXT = 128 * KB  # bigger text is committed gzipped
BINARY = {".gz", ".tgz", ".png", ".mp4", ".npz"}
# a path written as `git show COMMIT:benchmarks/...` names history, not the tree
CITED = re.compile(r"(?<![\w/.:])benchmarks/[\w.{},/-]*")
RELATIVE = re.compile(r"`\.\./((?:20\d\d-|scripts/)[^`\s]*)`")


def _files() -> list[Path]:
    return [p for p in BENCH.rglob("*") if p.is_file()]


def _citing_files() -> list[Path]:
    docs = [ROOT / "README.md", *(ROOT / "docs").rglob("*.md"), *BENCH.rglob("README.md")]
    code = [*(ROOT / "src").rglob("*.py"), *(ROOT / "src").rglob("*.yaml"), *(ROOT / "tests").rglob("*.py"),
            *(BENCH / "scripts").iterdir()]
    return [p for p in docs + code if p.is_file()]


def _expand(path: str) -> list[str]:
    """`a{,_b}/` -> `a/`, `a_b/` (the brace form the docs use for sibling folders)."""
    m = re.search(r"\{([^{}]*)\}", path)
    if not m:
        return [path]
    return [x for alt in m.group(1).split(",") for x in _expand(path[:m.start()] + alt + path[m.end():])]


def test_size_rule() -> None:
    files = _files()
    total = sum(p.stat().st_size for p in files)
    assert total < MAX_TOTAL, f"benchmarks/ holds {total / KB / KB:.1f} MB, over the 16 MB of its size rule"
    big = [f"{p.relative_to(ROOT)}: {p.stat().st_size // KB} KB" for p in files
           if p.stat().st_size > MAX_FILE
           or (p.suffix not in BINARY and p.stat().st_size > MAX_PLAIN_TEXT)]
    assert not big, "over the size rule of benchmarks/README.md (gzip, thin or drop):\n" + "\n".join(big)


def test_every_folder_is_in_the_index_and_scripts_live_in_scripts() -> None:
    index = (BENCH / "README.md").read_text(encoding="utf-8")
    folders = sorted(p.name for p in BENCH.iterdir() if p.is_dir() and p.name != "scripts")
    missing = [f for f in folders if f"`{f}/`" not in index]
    assert not missing, f"benchmarks/README.md's index lacks {missing}"
    assert all(re.fullmatch(r"20\d\d-\d\d-\d\d_\w+", f) for f in folders), folders
    loose = sorted(p.name for p in BENCH.iterdir() if p.is_file() and p.name != "README.md")
    assert not loose, f"scripts go to benchmarks/scripts/, results to a dated folder: {loose}"
    scripts = sorted(p.name for p in (BENCH / "scripts").iterdir())
    unlisted = [s for s in scripts if s not in index]
    assert not unlisted, f"benchmarks/README.md's scripts table lacks {unlisted}"


def test_cited_benchmark_paths_exist() -> None:
    bad = []
    for page in _citing_files():
        text = page.read_text(encoding="utf-8")
        cited = [c for m in CITED.findall(text) for c in _expand(m.rstrip(".,"))]
        if page.name == "README.md" and BENCH in page.parents:
            cited += [str((page.parent.parent / m).relative_to(ROOT)) for m in RELATIVE.findall(text)]
        bad += [f"{page.relative_to(ROOT)}: {c}" for c in cited if not (ROOT / c).exists()]
    assert not bad, "cited but missing:\n" + "\n".join(sorted(set(bad)))
