"""Batchline's Python client (`Client`, `AsyncClient`) and the `batchline` command line."""

from batchline_client.client import AsyncClient, Client, RpcError

__all__ = ["AsyncClient", "Client", "RpcError"]
