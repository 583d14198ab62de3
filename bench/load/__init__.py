"""The ghz-compatible load harness (`batchline-bench`): options, schedule, calls, report."""
