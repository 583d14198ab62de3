"""Only the batcher depends on torch and transformers; the contract imports as batchline.v1."""

from __future__ import annotations

import subprocess
import sys

BLOCK_TORCH = (
    "import sys\n"
    "class Block:\n"
    "    def find_spec(self, name, path=None, target=None):\n"
    "        if name.split('.')[0] in {'torch', 'transformers'}:\n"
    "            raise ImportError(f'{name} is blocked')\n"
    "sys.meta_path.insert(0, Block())\n"
)


def test_ingress_and_stream_import_without_torch() -> None:
    code = BLOCK_TORCH + (
        "import ingress.__main__, stream.__main__, batchline.rabbit, batchline.redis_store\n"
        "assert 'torch' not in sys.modules\n"
        "print('ok')\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "ok"


def test_generated_contract_imports() -> None:
    from batchline.v1 import inference_pb2, job_pb2, stream_pb2

    services = {
        s.full_name for m in (inference_pb2, stream_pb2) for s in m.DESCRIPTOR.services_by_name.values()
    }
    assert services == {"batchline.v1.InferenceService", "batchline.v1.JobStreamService"}
    assert job_pb2.JobStatus.Name(job_pb2.JOB_STATUS_DONE) == "JOB_STATUS_DONE"
