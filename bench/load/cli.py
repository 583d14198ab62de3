"""`batchline-bench`: ghz's command line, ghz's report, and what ghz cannot see.

    batchline-bench --insecure --protoset envoy/batchline.pb \\
        --call batchline.v1.InferenceService.Submit -d '{"text": "review {{.RequestNumber}}"}' \\
        --rps 500 -z 10s --e2e 127.0.0.1:8080
"""

from __future__ import annotations

import sys
from pathlib import Path

from bench.load import report, runner
from bench.load.options import OptionError, parse
from bench.load.protocols import descriptor_set


def main(argv: list[str] | None = None) -> int:
    try:
        options = parse(argv)
        plan = runner.make_plan(options, descriptor_set(options))
    except OptionError as exc:
        print(f"batchline-bench: {exc}", file=sys.stderr)
        return 2
    try:
        result = runner.run(plan)
    except OptionError as exc:
        print(f"batchline-bench: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("\nbatchline-bench: interrupted", file=sys.stderr)
        return 130
    text = report.render(result, options.format)
    if options.output:
        Path(options.output).write_text(text)
    else:
        sys.stdout.write(text if text.endswith("\n") else text + "\n")
    return 0
