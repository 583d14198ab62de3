"""Optional API keys: who is calling, and which jobs are theirs.

A key is a random token handed to its client once; the services keep only its SHA-256, as
`name:sha256:<hex>` entries in `API_KEYS` (comma-separated) or `API_KEYS_FILE` (one a line, `#`
comments). `python -m batchline.access new NAME` makes a key and its entry. Two entries with
one name are one owner with two keys (rotation: add the new key, move clients, drop the old).

With no keys configured the API is open. With keys, every call of a `batchline.` service needs
`authorization: Bearer <key>` (UNAUTHENTICATED, 401 through Envoy, otherwise); gRPC health and
reflection stay open for probes. A job belongs to the owner whose key created it: any other
owner's GetJob, WatchJob and CancelJob answer NOT_FOUND, exactly as for a job that never existed.
"""

from __future__ import annotations

import hashlib
import hmac
import logging
import os
import re
import secrets
import sys
from collections.abc import Iterable, Mapping
from contextvars import ContextVar
from dataclasses import dataclass
from pathlib import Path

from batchline.errors import Unauthenticated
from batchline.settings import SettingsError
from batchline.v1 import job_pb2

log = logging.getLogger(__name__)

# Methods of these services need a key; grpc.health.v1 and reflection do not.
PROTECTED = "/batchline."
TOKEN_PREFIX = "bl_"
ENTRY = re.compile(r"([A-Za-z0-9_.-]{1,64}):sha256:([0-9a-f]{64})")

# The owner this call authenticated as; None while access is open (no keys configured).
_CALLER: ContextVar[str | None] = ContextVar("batchline_caller", default=None)


def digest(token: str) -> bytes:
    """SHA-256 of a key. Keys are 256 random bits, so a fast hash is as strong as a slow one."""
    return hashlib.sha256(token.encode()).digest()


@dataclass(frozen=True)
class KeyRing:
    """The configured keys, by digest only."""

    entries: tuple[tuple[str, bytes], ...]

    @classmethod
    def parse(cls, lines: Iterable[str], source: str) -> KeyRing:
        """Entries from `lines`; a malformed one names its source and position, never its text."""
        entries = []
        for number, raw in enumerate(lines, 1):
            line = raw.split("#", 1)[0].strip()
            if not line:
                continue
            match = ENTRY.fullmatch(line)
            if match is None:
                raise SettingsError(
                    f"{source} entry {number} is not `name:sha256:<64 hex digits>` "
                    "(`python -m batchline.access new NAME` makes one)"
                )
            entries.append((match[1], bytes.fromhex(match[2])))
        return cls(tuple(entries))

    @classmethod
    def from_env(cls, env: Mapping[str, str] = os.environ) -> KeyRing | None:
        """`API_KEYS` and `API_KEYS_FILE` together; None (access open) when both are unset."""
        inline, path = env.get("API_KEYS", ""), env.get("API_KEYS_FILE", "")
        if not inline and not path:
            return None
        ring = cls.parse(inline.split(","), "API_KEYS")
        if path:
            try:
                text = Path(path).read_text()
            except OSError as exc:
                raise SettingsError(f"API_KEYS_FILE={path} cannot be read: {exc.strerror}") from exc
            ring = cls(ring.entries + cls.parse(text.splitlines(), "API_KEYS_FILE").entries)
        if not ring.entries:
            raise SettingsError("API_KEYS/API_KEYS_FILE are set but hold no key")
        return ring

    def identify(self, token: str) -> str | None:
        """The owner of `token`, or None. Compares with every entry, in constant time each, and
        never stops early, so the time taken says nothing about which digest was close."""
        presented = digest(token)
        found = None
        for name, known in self.entries:
            if hmac.compare_digest(presented, known):
                found = name
        return found

    def authenticate(self, metadata: Iterable[tuple[str, str | bytes]]) -> str:
        """The owner named by the call's `authorization: Bearer <key>`; Unauthenticated otherwise."""
        header = next((str(v) for k, v in metadata if k == "authorization"), "")
        if not header:
            raise Unauthenticated("this call needs an API key: `authorization: Bearer <key>`")
        scheme, _, token = header.partition(" ")
        if scheme.lower() != "bearer" or not token.strip():
            raise Unauthenticated("the authorization header must read `Bearer <key>`")
        owner = self.identify(token.strip())
        if owner is None:
            raise Unauthenticated("the API key is not valid")
        return owner


def admit(keys: KeyRing | None, method: str, metadata: Iterable[tuple[str, str | bytes]]) -> None:
    """Authenticate a call of `method` and remember its owner for the rest of the call."""
    if keys is None or not method.startswith(PROTECTED):
        return
    try:
        _CALLER.set(keys.authenticate(metadata))
    except Unauthenticated as exc:
        log.info("refused a call: %s", exc, extra={"method": method})  # never the key itself
        raise


def caller() -> str | None:
    """The owner of the current call; None while access is open."""
    return _CALLER.get()


def owner() -> str:
    """What a new job records as its owner: the caller, or "" while access is open."""
    return _CALLER.get() or ""


def may_see(job: job_pb2.Job) -> bool:
    """Whether the current call may see `job`: always while access is open, else its owner only."""
    who = _CALLER.get()
    return who is None or job.owner == who


def scoped(idempotency_key: str) -> str:
    """An idempotency key in the caller's own namespace, so one owner's key never finds (or
    reveals) another owner's job."""
    who = _CALLER.get()
    return f"{who}/{idempotency_key}" if who and idempotency_key else idempotency_key


def new_key() -> str:
    """A fresh key: 256 random bits, URL-safe."""
    return TOKEN_PREFIX + secrets.token_urlsafe(32)


def entry(name: str, token: str) -> str:
    """The line a keys file holds for `token`."""
    line = f"{name}:sha256:{digest(token).hex()}"
    if ENTRY.fullmatch(line) is None:
        raise SettingsError(f"key name {name!r}: use 1-64 letters, digits, '_', '.' or '-'")
    return line


def main(argv: list[str]) -> int:
    """`python -m batchline.access new NAME`: print a new key (give it to the client) and the
    entry for API_KEYS / API_KEYS_FILE (give it to the services)."""
    if len(argv) != 2 or argv[0] != "new":
        print("usage: python -m batchline.access new NAME", file=sys.stderr)
        return 2
    token = new_key()
    try:
        line = entry(argv[1], token)
    except SettingsError as exc:
        print(exc, file=sys.stderr)
        return 2
    print(f"key:   {token}\nentry: {line}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
