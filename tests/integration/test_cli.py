"""The `batchline` command against the real services: output, --json and exit codes."""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path

from tests.integration.conftest import MakePipeline, Pipeline

CLI = [sys.executable, str(Path(sys.executable).parent / "batchline")]


async def batchline(pipeline: Pipeline | None, *args: str) -> tuple[int, str, str]:
    """Run the CLI as its own process (the services answer from this test's event loop)."""
    targets = (
        [
            "--target",
            f"127.0.0.1:{pipeline.ports['ingress']}",
            "--stream-target",
            f"127.0.0.1:{pipeline.ports['stream']}",
        ]
        if pipeline
        else ["--target", "127.0.0.1:1"]
    )
    process = await asyncio.create_subprocess_exec(
        *CLI, *targets, *args, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE
    )
    out, err = await asyncio.wait_for(process.communicate(), 60)
    assert process.returncode is not None
    return process.returncode, out.decode(), err.decode()


async def test_submit_watch_prints_the_result_and_its_trace(make_pipeline: MakePipeline) -> None:
    pipeline = await make_pipeline()
    code, out, _ = await batchline(pipeline, "submit", "--watch", "I loved it", "terrible service")
    assert code == 0
    assert "'I loved it'" in out and "batch_size=" in out and "queue_wait=" in out and "inference=" in out

    code, out, _ = await batchline(pipeline, "--json", "submit", "--watch", "great food")
    [line] = [json.loads(x) for x in out.splitlines()]
    assert code == 0 and line["job"]["status"] == "JOB_STATUS_DONE" and line["accept_ms"] > 0


async def test_get_cancel_watch_and_stats(make_pipeline: MakePipeline) -> None:
    pipeline = await make_pipeline(batcher=False)
    code, out, _ = await batchline(pipeline, "--json", "submit", "never computed")
    job_id = json.loads(out)["job_id"]
    assert code == 0
    code, out, _ = await batchline(pipeline, "cancel", job_id)
    assert code == 0 and out.split() == [job_id, "CANCELLED"]
    code, out, _ = await batchline(pipeline, "--json", "get", job_id)
    assert code == 0 and json.loads(out)["status"] == "JOB_STATUS_CANCELLED"
    code, out, _ = await batchline(pipeline, "watch", job_id)
    assert code == 1  # a watched job that ended CANCELLED
    code, out, _ = await batchline(pipeline, "stats")
    assert code == 0 and out.startswith("jobs ")


async def test_exit_codes_scripts_can_rely_on(make_pipeline: MakePipeline) -> None:
    pipeline = await make_pipeline(batcher=False)
    code, _, err = await batchline(pipeline, "submit", "   ")
    assert code == 2 and "INVALID_ARGUMENT" in err and "text" in err
    code, _, err = await batchline(pipeline, "get", "00000000-0000-4000-8000-000000000000")
    assert code == 3 and "NOT_FOUND" in err
    code, _, err = await batchline(None, "stats")
    assert code == 3 and "UNAVAILABLE" in err
