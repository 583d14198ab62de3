"""Browser tests start the stack with the e2e harness's subprocess helpers."""

from tests.e2e.conftest import service_env, services

__all__ = ["service_env", "services"]
