"""`python -m batchline.healthcheck HOST:PORT`: exit 0 when that gRPC server is SERVING.

The container health check of every Python service (compose, Kubernetes exec probes); images
carry no grpc_health_probe binary.
"""

from __future__ import annotations

import sys

from batchline.lifecycle import is_serving


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print("usage: python -m batchline.healthcheck HOST:PORT", file=sys.stderr)
        return 2
    serving = is_serving(argv[0], timeout_s=2.0)
    print(f"{argv[0]} {'SERVING' if serving else 'NOT SERVING'}")
    return 0 if serving else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
