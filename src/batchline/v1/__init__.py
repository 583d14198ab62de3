"""Generated from proto/batchline/v1 by `make gen`. Do not edit."""
