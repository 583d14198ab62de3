"""API keys: parsing the configured digests, telling owners apart, and the key maker."""

from __future__ import annotations

import contextvars
from pathlib import Path

import pytest

from batchline import access
from batchline.errors import Unauthenticated
from batchline.settings import SettingsError
from batchline.v1 import job_pb2

ALICE, BOB = access.new_key(), access.new_key()


def ring(*pairs: tuple[str, str]) -> access.KeyRing:
    return access.KeyRing.parse([access.entry(name, key) for name, key in pairs], "test")


def test_new_keys_are_long_random_and_prefixed() -> None:
    keys = {access.new_key() for _ in range(100)}
    assert len(keys) == 100
    assert all(k.startswith("bl_") and len(k) >= 43 + 3 for k in keys)


def test_entries_hold_the_digest_never_the_key() -> None:
    line = access.entry("alice", ALICE)
    assert ALICE not in line and line.startswith("alice:sha256:") and len(line.split(":")[2]) == 64


def test_identify_finds_the_owner_of_each_key_and_no_one_else() -> None:
    keys = ring(("alice", ALICE), ("bob", BOB))
    assert keys.identify(ALICE) == "alice" and keys.identify(BOB) == "bob"
    assert keys.identify(ALICE[:-1]) is None and keys.identify("") is None


def test_two_keys_with_one_name_are_one_owner_rotating() -> None:
    old, new = access.new_key(), access.new_key()
    keys = ring(("alice", old), ("alice", new))
    assert keys.identify(old) == keys.identify(new) == "alice"


@pytest.mark.parametrize(
    ("metadata", "why"),
    [
        ((), "needs an API key"),
        ((("authorization", "Token x"),), "Bearer <key>"),
        ((("authorization", "Bearer"),), "Bearer <key>"),
        ((("authorization", "Bearer   "),), "Bearer <key>"),
        ((("authorization", "Bearer bl_nope"),), "not valid"),
    ],
)
def test_authenticate_says_what_is_wrong(metadata: tuple[tuple[str, str], ...], why: str) -> None:
    with pytest.raises(Unauthenticated, match=why):
        ring(("alice", ALICE)).authenticate(metadata)


def test_authenticate_accepts_any_case_of_the_scheme() -> None:
    keys = ring(("alice", ALICE))
    assert keys.authenticate([("authorization", f"bearer {ALICE}")]) == "alice"


def test_from_env_reads_inline_entries_and_a_file_and_is_off_when_unset(tmp_path: Path) -> None:
    assert access.KeyRing.from_env({}) is None
    keys_file = tmp_path / "keys"
    keys_file.write_text(f"# the team's keys\n{access.entry('bob', BOB)}  # bob's laptop\n\n")
    keys = access.KeyRing.from_env(
        {"API_KEYS": access.entry("alice", ALICE), "API_KEYS_FILE": str(keys_file)}
    )
    assert keys is not None and {keys.identify(ALICE), keys.identify(BOB)} == {"alice", "bob"}


@pytest.mark.parametrize(
    ("env", "message"),
    [
        ({"API_KEYS": "alice:plaintext-key"}, "API_KEYS entry 1 is not"),
        ({"API_KEYS": "alice:sha256:" + "0" * 63}, "API_KEYS entry 1 is not"),
        ({"API_KEYS": ","}, "hold no key"),
        ({"API_KEYS_FILE": "/nonexistent/keys"}, "cannot be read"),
    ],
)
def test_bad_key_settings_are_refused_at_start(env: dict[str, str], message: str) -> None:
    with pytest.raises(SettingsError, match=message) as refused:
        access.KeyRing.from_env(env)
    assert "plaintext-key" not in str(refused.value)  # a mistaken raw key is never echoed


def test_without_keys_everyone_sees_everything_and_keys_are_unscoped() -> None:
    job = job_pb2.Job(owner="alice")
    context = contextvars.copy_context()
    assert context.run(access.caller) is None
    assert context.run(access.may_see, job) and context.run(access.may_see, job_pb2.Job())
    assert context.run(access.scoped, "order-1") == "order-1" and context.run(access.owner) == ""


def test_with_keys_a_call_sees_only_its_owners_jobs() -> None:
    keys = ring(("alice", ALICE), ("bob", BOB))

    def as_bob() -> tuple[bool, bool, str, str]:
        access.admit(keys, "/batchline.v1.InferenceService/GetJob", [("authorization", f"Bearer {BOB}")])
        return (
            access.may_see(job_pb2.Job(owner="alice")),
            access.may_see(job_pb2.Job(owner="bob")),
            access.scoped("order-1"),
            access.owner(),
        )

    assert contextvars.copy_context().run(as_bob) == (False, True, "bob/order-1", "bob")


def test_health_and_reflection_need_no_key() -> None:
    keys = ring(("alice", ALICE))
    access.admit(keys, "/grpc.health.v1.Health/Check", [])
    access.admit(keys, "/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo", [])
    with pytest.raises(Unauthenticated):
        access.admit(keys, "/batchline.v1.JobStreamService/WatchJob", [])


def test_the_key_maker_prints_a_key_and_its_entry(capsys: pytest.CaptureFixture[str]) -> None:
    assert access.main(["new", "ci-runner"]) == 0
    key_line, entry_line = capsys.readouterr().out.splitlines()
    key, entry = key_line.split()[-1], entry_line.split()[-1]
    assert access.KeyRing.parse([entry], "printed").identify(key) == "ci-runner"
    assert access.main(["new", "no spaces allowed"]) == 2
    assert access.main([]) == 2
