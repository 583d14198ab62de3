// The network side of the UI: grpc-web clients generated from proto/, errors sorted into what a
// user can act on, and a watch that survives a dropped stream.
import { Code, ConnectError, createClient, type Client, type Interceptor } from "@connectrpc/connect";
import { createGrpcWebTransport } from "@connectrpc/connect-web";
import { InferenceService, type GetStatsResponse } from "./gen/batchline/v1/inference_pb.ts";
import { JobStreamService } from "./gen/batchline/v1/stream_pb.ts";
import type { Job } from "./gen/batchline/v1/job_pb.ts";
import { BadRequestSchema, RetryInfoSchema } from "./gen/google/rpc/error_details_pb.ts";
import { backoffMs } from "./view.ts";

/** An error sorted by what the user can do about it. */
export type Problem =
  | { kind: "invalid"; field: string; message: string }
  | { kind: "queue-full"; retryAfterMs: number; message: string }
  | { kind: "unreachable"; message: string }
  | { kind: "unauthenticated"; message: string }
  | { kind: "other"; message: string };

export function classify(error: unknown): Problem {
  const failure = ConnectError.from(error);
  if (failure.code === Code.InvalidArgument) {
    const [violation] = failure.findDetails(BadRequestSchema).flatMap((d) => d.fieldViolations);
    return { kind: "invalid", field: violation?.field ?? "", message: violation?.description ?? failure.rawMessage };
  }
  if (failure.code === Code.ResourceExhausted) {
    const [info] = failure.findDetails(RetryInfoSchema);
    const delay = info?.retryDelay;
    const retryAfterMs = delay ? Number(delay.seconds) * 1000 + delay.nanos / 1e6 : 1000;
    return { kind: "queue-full", retryAfterMs, message: failure.rawMessage };
  }
  if (failure.code === Code.Unauthenticated) {
    // API keys are on and this browser has none, or a wrong one: the user can enter one.
    return { kind: "unauthenticated", message: failure.rawMessage };
  }
  if (failure.code === Code.Unavailable || failure.code === Code.Unknown || failure.code === Code.Internal) {
    // A refused connection, an Envoy with no healthy upstream, or a proxy error page.
    return { kind: "unreachable", message: failure.rawMessage };
  }
  return { kind: "other", message: `${Code[failure.code]}: ${failure.rawMessage}` };
}

export class Api {
  readonly inference: Client<typeof InferenceService>;
  readonly stream: Client<typeof JobStreamService>;

  /** `apiKey` is asked for on every call, so a key entered later applies at once. */
  constructor(
    readonly baseUrl: string,
    apiKey: () => string = () => "",
  ) {
    const authorize: Interceptor = (next) => (request) => {
      const key = apiKey();
      if (key) request.header.set("authorization", `Bearer ${key}`);
      return next(request);
    };
    const transport = createGrpcWebTransport({ baseUrl, interceptors: [authorize] });
    this.inference = createClient(InferenceService, transport);
    this.stream = createClient(JobStreamService, transport);
  }

  /** One line: Submit; several: one SubmitBatch, one job per line. Job ids in line order. */
  async submit(lines: string[]): Promise<string[]> {
    if (lines.length === 1) {
      return [(await this.inference.submit({ text: lines[0] })).jobId];
    }
    return (await this.inference.submitBatch({ texts: lines })).jobs.map((job) => job.jobId);
  }

  async cancel(jobId: string): Promise<Job | undefined> {
    return (await this.inference.cancelJob({ jobId })).job;
  }

  async stats(): Promise<GetStatsResponse> {
    return this.inference.getStats({}, { timeoutMs: 5000 });
  }

  /**
   * Every state of `jobId` until a terminal one. A stream that drops is re-opened (with backoff)
   * after the last state seen (`afterSequence`), on whichever stream replica answers: nothing is
   * lost and nothing arrives twice.
   */
  async watch(
    jobId: string,
    onJob: (job: Job) => boolean, // returns true once the job is terminal
    signal: AbortSignal,
    onRetry: (problem: Problem, delayMs: number) => void = () => {},
  ): Promise<void> {
    let afterSequence = 0;
    for (let attempt = 0; !signal.aborted; attempt++) {
      try {
        for await (const event of this.stream.watchJob({ jobId, afterSequence }, { signal })) {
          attempt = 0;
          if (event.event.case !== "job") continue;
          afterSequence = event.event.value.sequence;
          if (onJob(event.event.value)) return;
        }
      } catch (error) {
        if (signal.aborted) return;
        const problem = classify(error);
        if (problem.kind === "other" || problem.kind === "invalid") throw error;
        const delay = problem.kind === "queue-full" ? problem.retryAfterMs : backoffMs(attempt);
        onRetry(problem, delay);
        await sleep(delay, signal);
      }
    }
  }
}

export function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    const timer = setTimeout(resolve, ms);
    signal?.addEventListener("abort", () => {
      clearTimeout(timer);
      resolve();
    });
  });
}

/** Envoy's address: `?api=` wins, then the server's /config.json, then this host on :8080. */
export async function apiUrl(location: Location): Promise<string> {
  const fromQuery = new URLSearchParams(location.search).get("api");
  if (fromQuery) return fromQuery;
  try {
    const reply = await fetch("/config.json", { cache: "no-store" });
    if (reply.ok) {
      const config = (await reply.json()) as { api?: string };
      if (config.api) return config.api;
    }
  } catch {
    // no config served: fall through to the default
  }
  return `${location.protocol}//${location.hostname}:8080`;
}
