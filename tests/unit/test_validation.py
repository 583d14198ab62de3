from __future__ import annotations

import pytest
from google.protobuf.duration_pb2 import Duration

from batchline.errors import InvalidArgument
from batchline.v1 import job_pb2
from ingress import validation


@pytest.mark.parametrize("text", ["a", " a ", "x" * 2000, "  " + "y" * 2000 + "\n"])
def test_acceptable_texts_are_trimmed(text: str) -> None:
    assert validation.clean_text(text, "text", 2000) == text.strip()


@pytest.mark.parametrize(
    ("text", "why"),
    [("", "at least 1"), ("   \n\t", "at least 1"), ("x" * 2001, "at most 2000"), ("a\x00b", "NUL")],
)
def test_bad_texts_name_the_field_and_why(text: str, why: str) -> None:
    with pytest.raises(InvalidArgument) as caught:
        validation.clean_text(text, "text", 2000)
    [(field, description)] = caught.value.violations
    assert field == "text"
    assert why in description


def test_batch_reports_every_bad_text_with_its_index() -> None:
    with pytest.raises(InvalidArgument) as caught:
        validation.clean_texts(["ok", "", "fine", "z" * 2001], max_items=256, max_chars=2000)
    assert [f for f, _ in caught.value.violations] == ["texts[1]", "texts[3]"]


@pytest.mark.parametrize("count", [0, 257])
def test_batch_size_is_bounded(count: int) -> None:
    with pytest.raises(InvalidArgument) as caught:
        validation.clean_texts(["a"] * count, max_items=256, max_chars=2000)
    assert caught.value.violations[0][0] == "texts"


@pytest.mark.parametrize(
    ("options", "field"),
    [
        (job_pb2.SubmitOptions(priority=11), "options.priority"),
        (job_pb2.SubmitOptions(timeout=Duration(seconds=-1)), "options.timeout"),
        (job_pb2.SubmitOptions(timeout=Duration(seconds=90_000)), "options.timeout"),
    ],
)
def test_bad_options(options: job_pb2.SubmitOptions, field: str) -> None:
    with pytest.raises(InvalidArgument) as caught:
        validation.check_options(options)
    assert caught.value.violations[0][0] == field


def test_good_options_pass() -> None:
    validation.check_options(job_pb2.SubmitOptions(priority=-10, timeout=Duration(seconds=5)))


def test_prefetch_below_four_batches_is_refused() -> None:
    from batcher.settings import BatcherSettings
    from batchline.settings import SettingsError

    with pytest.raises(SettingsError, match="PREFETCH=32"):
        BatcherSettings.from_env({"MAX_BATCH_SIZE": "16", "PREFETCH": "32"})
    assert BatcherSettings.from_env({"MAX_BATCH_SIZE": "8"}).prefetch == 64  # default: 8 batches


@pytest.mark.parametrize("value", ["1", "1.5", "-0.1", "much"])
def test_group_min_saving_is_a_share_of_the_time(value: str) -> None:
    from batcher.settings import BatcherSettings
    from batchline.settings import SettingsError

    with pytest.raises(SettingsError, match="GROUP_MIN_SAVING"):
        BatcherSettings.from_env({"GROUP_MIN_SAVING": value})


@pytest.mark.parametrize(("env", "expected"), [({}, 0.02), ({"GROUP_MIN_SAVING": "0"}, 0.0)])
def test_group_min_saving_reaches_the_policy(env: dict[str, str], expected: float) -> None:
    from batcher.settings import BatcherSettings
    from batcher.worker import Batcher
    from batchline.memory import MemoryBroker, MemoryJobStore
    from tests.helpers import RecordingModel

    batcher = Batcher(BatcherSettings.from_env(env), MemoryJobStore(), MemoryBroker(), RecordingModel())
    assert batcher._policy.group_min_saving == expected


def test_model_settings_name_the_variable_and_the_choices() -> None:
    from batcher.settings import ModelSettings
    from batchline.settings import SettingsError

    for variable in ("FORWARD", "PRECISION", "DEVICE", "MODEL_BACKEND"):
        with pytest.raises(SettingsError, match=f"{variable}='fast': choose"):
            ModelSettings.from_env({variable: "fast"})
    assert ModelSettings.from_env({}).forward == "packed"
    assert ModelSettings.from_env({"FORWARD": "padded"}).forward == "padded"
