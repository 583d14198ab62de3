"""Credentials come from the environment: a Redis with `requirepass`, spoken to with and without."""

from __future__ import annotations

import secrets
import subprocess
import time
from collections.abc import Iterator

import pytest

from batchline.errors import Unavailable
from batchline.redis_store import RedisJobStore
from batchline.settings import StoreSettings
from batchline.v1 import job_pb2
from tests.helpers import free_port

PASSWORD = secrets.token_urlsafe(24)


@pytest.fixture
def private_redis() -> Iterator[int]:
    """A Redis of our own that demands PASSWORD, on a free port; nothing kept on disk."""
    port = free_port()
    server = subprocess.Popen(
        ["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--requirepass", PASSWORD,
         "--save", "", "--appendonly", "no"],
        stdout=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        for _ in range(100):
            probe = subprocess.run(["redis-cli", "-p", str(port), "ping"], capture_output=True, text=True)
            if "NOAUTH" in probe.stdout + probe.stderr:  # up, and asking for the password
                break
            time.sleep(0.05)
        yield port
    finally:
        server.terminate()
        server.wait(10)


async def test_the_store_authenticates_with_the_password_from_its_url(private_redis: int) -> None:
    store = RedisJobStore(StoreSettings(redis_url=f"redis://:{PASSWORD}@127.0.0.1:{private_redis}/0"))
    try:
        await store.ping()
        job = job_pb2.Job(job_id="8b0c4f6e-4f4a-4a3e-9a51-0c0f4f6a1b2c", status=job_pb2.JOB_STATUS_QUEUED)
        assert (await store.create(job))[1]
        stored = await store.get(job.job_id)
        assert stored is not None and stored.status == job_pb2.JOB_STATUS_QUEUED
    finally:
        await store.close()


@pytest.mark.parametrize("password", ["", "wrong-password"])
async def test_a_missing_or_wrong_password_is_unavailable_and_never_printed(
    private_redis: int, password: str
) -> None:
    auth = f":{password}@" if password else ""
    store = RedisJobStore(StoreSettings(redis_url=f"redis://{auth}127.0.0.1:{private_redis}/0", timeout_s=1))
    try:
        with pytest.raises(Unavailable) as refused:
            await store.ping()
        message = str(refused.value)
        assert "password" in message.lower() and f"127.0.0.1:{private_redis}" in message
        assert PASSWORD not in message and (not password or password not in message)
    finally:
        await store.close()
