// grpc-web from Node through Envoy (@connectrpc/connect-web over fetch): the example in the README,
// and the grpc-web client of the Envoy contract tests.
// Usage: npx tsx clients/web/examples/grpcweb.ts <base-url> <scenario> [args...]; prints one JSON object per line.
//   submit-watch <text>     Submit, then WatchJob to the end: {"submitted": id}, then each event
//   watch-abort <job-id>    WatchJob, abort after the first event: {"event": ...}, {"aborted": true}
//   submit-error <text>     Submit expecting an error: {"code": ..., "violations": [...]}
import { createClient, ConnectError } from "@connectrpc/connect";
import { createGrpcWebTransport } from "@connectrpc/connect-web";
import { InferenceService } from "../src/gen/batchline/v1/inference_pb.ts";
import { JobStreamService } from "../src/gen/batchline/v1/stream_pb.ts";
import { JobStatus } from "../src/gen/batchline/v1/job_pb.ts";
import { BadRequestSchema } from "../src/gen/google/rpc/error_details_pb.ts";

const [baseUrl, scenario, ...args] = process.argv.slice(2);
const transport = createGrpcWebTransport({ baseUrl: baseUrl ?? "" });
const inference = createClient(InferenceService, transport);
const stream = createClient(JobStreamService, transport);
const emit = (value: unknown) => console.log(JSON.stringify(value));

async function submitWatch(text: string): Promise<void> {
  const { jobId } = await inference.submit({ text });
  emit({ submitted: jobId });
  for await (const event of stream.watchJob({ jobId })) {
    if (event.event.case === "job") {
      const job = event.event.value;
      emit({ status: JobStatus[job.status], label: job.result?.label ?? "", batchSize: job.trace?.batchSize ?? 0 });
    }
  }
}

async function watchAbort(jobId: string): Promise<void> {
  const controller = new AbortController();
  try {
    for await (const event of stream.watchJob({ jobId }, { signal: controller.signal })) {
      if (event.event.case === "job") {
        emit({ status: JobStatus[event.event.value.status] });
        controller.abort();
      }
    }
    emit({ aborted: false });
  } catch (error) {
    emit({ aborted: controller.signal.aborted, code: ConnectError.from(error).code });
  }
}

async function submitError(text: string): Promise<void> {
  try {
    await inference.submit({ text });
    emit({ code: 0 });
  } catch (error) {
    const failure = ConnectError.from(error);
    const violations = failure.findDetails(BadRequestSchema).flatMap((d) => d.fieldViolations);
    emit({ code: failure.code, violations: violations.map((v) => ({ field: v.field, description: v.description })) });
  }
}

const scenarios: Record<string, (arg: string) => Promise<void>> = {
  "submit-watch": submitWatch,
  "watch-abort": watchAbort,
  "submit-error": submitError,
};
const run = scenarios[scenario ?? ""];
if (!baseUrl || !run) {
  console.error(`usage: grpcweb.ts <base-url> ${Object.keys(scenarios).join("|")} <arg>`);
  process.exit(2);
}
await run(args[0] ?? "");
