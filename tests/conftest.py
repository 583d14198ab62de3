"""Fixtures for every tier. Markers follow the directory: unit, integration, e2e, faults,
contract, browser.

Real services are isolated per test: a unique queue name and Redis key prefix each,
removed afterwards.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import aio_pika
import pytest
import redis.asyncio as aioredis

from batchline.settings import BrokerSettings, StoreSettings

AMQP_URL = os.environ.get("TEST_AMQP_URL", "amqp://guest:guest@127.0.0.1:5672/")
REDIS_URL = os.environ.get("TEST_REDIS_URL", "redis://127.0.0.1:6379/0")
ROOT = Path(__file__).resolve().parent.parent


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        tier = Path(str(item.fspath)).relative_to(ROOT / "tests").parts[0]
        if tier in {"unit", "integration", "e2e", "faults", "contract", "browser"}:
            item.add_marker(getattr(pytest.mark, tier))


@pytest.fixture
def unique() -> str:
    return uuid.uuid4().hex[:12]


@pytest.fixture
async def store_settings(unique: str) -> AsyncIterator[StoreSettings]:
    settings = StoreSettings(redis_url=REDIS_URL, key_prefix=f"test:{unique}:", timeout_s=1.0)
    yield settings
    client = aioredis.Redis.from_url(REDIS_URL)
    keys = [key async for key in client.scan_iter(match=settings.key_prefix + "*", count=1000)]
    if keys:
        await client.delete(*keys)
    await client.aclose()


@pytest.fixture
async def broker_settings(unique: str) -> AsyncIterator[BrokerSettings]:
    settings = BrokerSettings(amqp_url=AMQP_URL, queue=f"test.{unique}.requests", publish_timeout_s=2.0)
    yield settings
    connection = await aio_pika.connect(AMQP_URL)
    channel = await connection.channel()
    for name in (settings.queue, settings.dead_letter_queue):
        await channel.queue_delete(name)
    await connection.close()


@pytest.fixture(scope="session")
def tiny_distilbert(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny DistilBERT with random weights, a real tokenizer vocabulary, saved with
    save_pretrained, loadable through the real `hf` path."""
    from transformers import (
        AutoTokenizer,
        DistilBertConfig,
        DistilBertForSequenceClassification,
    )

    path = tmp_path_factory.mktemp("tiny-distilbert")
    words = (
        "the a an i it is was this that movie film service food great good bad terrible "
        "loved hated awful excellent not very really and but of to in on for with my we "
        "they he she you "
    ).split()
    vocab = [
        "[PAD]",
        "[UNK]",
        "[CLS]",
        "[SEP]",
        "[MASK]",
        *words,
        *(f"##{c}" for c in "abcdefghijklmnopqrstuvwxyz"),
        *"abcdefghijklmnopqrstuvwxyz",
        ".",
        ",",
        "!",
        "?",
    ]
    (path / "vocab.txt").write_text("\n".join(vocab) + "\n")
    tokenizer = AutoTokenizer.from_pretrained(str(path), tokenizer_type="distilbert", do_lower_case=True)
    ids = tokenizer("great movie terrible service")["input_ids"]
    assert len(set(ids)) == len(ids), f"tokenizer vocabulary is broken: {ids}"
    config = DistilBertConfig(  # type: ignore[call-arg]
        vocab_size=len(vocab),
        dim=32,
        n_layers=2,
        n_heads=2,
        hidden_dim=64,
        max_position_embeddings=32,
        num_labels=2,
        id2label={0: "NEGATIVE", 1: "POSITIVE"},
        label2id={"NEGATIVE": 0, "POSITIVE": 1},
        pad_token_id=0,
    )
    model = DistilBertForSequenceClassification(config)
    model.save_pretrained(str(path))
    tokenizer.save_pretrained(str(path))
    return path


@pytest.fixture
def clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """No deployment variables leak into settings read from the environment."""
    for name in ("AMQP_URL", "REDIS_URL", "MODEL_BACKEND", "MAX_WAIT_MS", "MAX_BATCH_SIZE", "PREFETCH"):
        monkeypatch.delenv(name, raising=False)
