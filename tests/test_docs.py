"""README.md and docs/: every link stays inside the repository and reaches a file (and heading) there, and
every `docs/design.md §N` reference in the sources, tests and documents names a section that exists."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
DESIGN = ROOT / "docs" / "design.md"
SECTION_REF = re.compile(r"design\.md §(\d+)")


def _anchor(heading: str) -> str:
    """GitHub's id for a heading: lower case, punctuation dropped, spaces to hyphens."""
    text = re.sub(r"[`*_]", "", heading.strip().lower())
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def _anchors(page: Path) -> set[str]:
    return {_anchor(line.lstrip("#")) for line in page.read_text(encoding="utf-8").splitlines()
            if line.startswith("#")}


def test_links_stay_in_the_repository_and_resolve() -> None:
    bad = []
    for page in PAGES:
        for target in LINK.findall(page.read_text(encoding="utf-8")):
            if re.match(r"^[a-z]+:", target):
                bad.append(f"{page.relative_to(ROOT)}: {target} leaves the repository")
                continue
            path, _, anchor = target.partition("#")
            dest = (page.parent / path).resolve() if path else page
            if ROOT not in (dest, *dest.parents):
                bad.append(f"{page.relative_to(ROOT)}: {target} points outside the repository")
            elif not dest.exists():
                bad.append(f"{page.relative_to(ROOT)}: {target} does not exist")
            elif anchor and dest.suffix == ".md" and dest.exists() and anchor not in _anchors(dest):
                bad.append(f"{page.relative_to(ROOT)}: {target}: no heading #{anchor} there")
    assert not bad, "\n".join(bad)


def test_the_ci_runs_the_readmes_test_command() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert "make test" in readme and "make test" in (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    assert len(readme.splitlines()) <= 150, "the README is for a newcomer: move details to docs/"


def test_design_references_name_sections_that_exist() -> None:
    """Source files point into docs/design.md by section number; a renumbered or dropped section must not
    leave them pointing at nothing, and the first specification's DESIGN.md (not in the repository) is not
    cited at all."""
    sections = {m.group(1) for m in re.finditer(r"^## (\d+)\. ", DESIGN.read_text(encoding="utf-8"), re.MULTILINE)}
    files = [*PAGES, *(ROOT / "src").rglob("*.py"), *(ROOT / "src").rglob("*.yaml"), *(ROOT / "tests").rglob("*.py"),
             *(ROOT / "benchmarks").rglob("README.md")]
    bad, seen = [], 0
    for f in files:
        text = f.read_text(encoding="utf-8")
        if "DESIGN.md" in text and f != Path(__file__):
            bad.append(f"{f.relative_to(ROOT)}: cites DESIGN.md, which is not in the repository: cite docs/design.md")
        for n in SECTION_REF.findall(text):
            seen += 1
            if n not in sections:
                bad.append(f"{f.relative_to(ROOT)}: docs/design.md §{n} does not exist (sections: {sorted(sections, key=int)})")
    assert not bad, "\n".join(bad)
    assert seen > 30  # the sources do cite it: a broken pattern would pass vacuously
