"""Faults use the end-to-end tier's services-as-subprocesses fixtures."""

from tests.e2e.conftest import service_env, services

__all__ = ["service_env", "services"]
