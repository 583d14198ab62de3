"""Every relative link in the project's Markdown names a file that exists, and a link to a
section of a Markdown file names a heading it has: the benchmark pages cite each other, their
raw output and their scripts, and a renamed file or heading must not leave a dead link behind."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
LINK = re.compile(r"\]\(([^)#\s]+)(?:#[^)]*)?\)")
SECTION = re.compile(r"\]\(([^)#\s]*)#([^)\s]+)\)")
SKIP = {".venv", "node_modules", ".run", ".git"}


def markdown_files() -> list[Path]:
    return [p for p in ROOT.glob("**/*.md") if not SKIP & set(p.relative_to(ROOT).parts)]


def test_every_relative_link_resolves() -> None:
    files = markdown_files()
    assert ROOT / "docs" / "benchmarks" / "README.md" in files
    dead = [
        f"{path.relative_to(ROOT)}: {target}"
        for path in files
        for target in LINK.findall(path.read_text())
        if not target.startswith(("http://", "https://", "mailto:")) and not (path.parent / target).exists()
    ]
    assert dead == []


def anchor(heading: str) -> str:
    """The fragment GitHub gives a heading: lower case, punctuation dropped, spaces to hyphens."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def test_every_link_to_a_section_names_a_heading_of_its_page() -> None:
    assert anchor("The bare model, the stack and its lanes (`make bench-batching`)") == (
        "the-bare-model-the-stack-and-its-lanes-make-bench-batching"
    )
    dead = []
    for path in markdown_files():
        for target, fragment in SECTION.findall(path.read_text()):
            page = path.parent / target if target else path
            if page.suffix != ".md" or not page.exists():
                continue  # a missing page is the test above's to report
            headings = {
                anchor(line.lstrip("#")) for line in page.read_text().splitlines() if line.startswith("#")
            }
            if fragment not in headings:
                dead.append(f"{path.relative_to(ROOT)}: {target}#{fragment}")
    assert dead == []
