"""Batcher: consumes tasks, forms batches, runs one forward pass per batch, stores results."""
