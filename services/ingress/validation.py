"""Input rules of Submit and SubmitBatch: each violation names its field and says why."""

from __future__ import annotations

from datetime import timedelta

from batchline.errors import InvalidArgument
from batchline.v1 import job_pb2

MAX_PRIORITY = 10
MAX_TIMEOUT = timedelta(hours=24)
MAX_IDEMPOTENCY_KEY_CHARS = 128


def text_violation(text: str, field: str, max_chars: int) -> tuple[str, str] | None:
    """None when `text` is acceptable, else (field, why)."""
    trimmed = text.strip()
    if not trimmed:
        return field, "must contain at least 1 character that is not white space"
    if len(trimmed) > max_chars:
        return field, f"must be at most {max_chars} characters after trimming (got {len(trimmed)})"
    if "\x00" in trimmed:
        return field, "must not contain NUL characters"
    return None


def clean_text(text: str, field: str, max_chars: int) -> str:
    violation = text_violation(text, field, max_chars)
    if violation:
        raise InvalidArgument([violation])
    return text.strip()


def clean_texts(texts: list[str], max_items: int, max_chars: int) -> list[str]:
    """All-or-nothing: every bad text is reported, with its index."""
    if not texts:
        raise InvalidArgument.field("texts", "must hold at least 1 text")
    if len(texts) > max_items:
        raise InvalidArgument.field("texts", f"must hold at most {max_items} texts (got {len(texts)})")
    violations = [v for i, t in enumerate(texts) if (v := text_violation(t, f"texts[{i}]", max_chars))]
    if violations:
        raise InvalidArgument(violations)
    return [t.strip() for t in texts]


def check_options(options: job_pb2.SubmitOptions, prefix: str = "options") -> None:
    violations = []
    if not -MAX_PRIORITY <= options.priority <= MAX_PRIORITY:
        violations.append((f"{prefix}.priority", f"must be between {-MAX_PRIORITY} and {MAX_PRIORITY}"))
    if options.HasField("timeout"):
        timeout = options.timeout.ToTimedelta()
        if timeout <= timedelta(0) or timeout > MAX_TIMEOUT:
            violations.append((f"{prefix}.timeout", "must be positive and at most 24h"))
    if violations:
        raise InvalidArgument(violations)


def check_idempotency_key(key: str) -> None:
    if len(key) > MAX_IDEMPOTENCY_KEY_CHARS:
        raise InvalidArgument.field(
            "idempotency_key", f"must be at most {MAX_IDEMPOTENCY_KEY_CHARS} characters"
        )
