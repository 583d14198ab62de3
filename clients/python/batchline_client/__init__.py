"""Batchline's Python client and the `batchline` command line."""
