"""`make env`: write .env from .env.example with a fresh random value for every *_PASSWORD."""

from __future__ import annotations

import re
import secrets
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def fill(template: str) -> str:
    return re.sub(
        r"^(\w+_PASSWORD)=$", lambda m: f"{m.group(1)}={secrets.token_urlsafe(24)}", template, flags=re.M
    )


def main() -> int:
    target = ROOT / ".env"
    if target.exists():
        print(".env exists; remove it first to make a new one", file=sys.stderr)
        return 1
    target.write_text(fill((ROOT / ".env.example").read_text()))
    target.chmod(0o600)
    print("wrote .env with new passwords (mode 600)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
