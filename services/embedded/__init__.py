"""The embedded default: ingress, batcher and stream in one process on in-memory adapters.

The same servicers, batch loop and fan-out as the distributed services, not a second
implementation; only the queue and the store are swapped for their in-memory twins.
"""
