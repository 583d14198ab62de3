"""Ingress: the async gRPC front of the pipeline. Validates, stores QUEUED, publishes with confirm."""
