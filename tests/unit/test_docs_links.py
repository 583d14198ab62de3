"""Every relative link in the project's Markdown names a file that exists: the benchmark pages
cite each other, their raw output and their scripts, and a renamed file must not leave a dead
link behind."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
LINK = re.compile(r"\]\(([^)#\s]+)(?:#[^)]*)?\)")
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
