"""README.md and docs/: every link stays inside the repository and reaches a file (and heading) there."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
# written in parallel with this check (data parallel, issue 17): linked before it lands
PENDING = {ROOT / "docs" / "distributed.md"}


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
            elif not dest.exists() and dest not in PENDING:
                bad.append(f"{page.relative_to(ROOT)}: {target} does not exist")
            elif anchor and dest.suffix == ".md" and dest.exists() and anchor not in _anchors(dest):
                bad.append(f"{page.relative_to(ROOT)}: {target}: no heading #{anchor} there")
    assert not bad, "\n".join(bad)


def test_the_ci_runs_the_readmes_test_command() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert "make test" in readme and "make test" in (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    assert len(readme.splitlines()) <= 150, "the README is for a newcomer: move details to docs/"
