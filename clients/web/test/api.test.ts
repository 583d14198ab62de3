import { describe, expect, it } from "vitest";
import { create } from "@bufbuild/protobuf";
import { Code, ConnectError } from "@connectrpc/connect";
import { BadRequestSchema, RetryInfoSchema } from "../src/gen/google/rpc/error_details_pb.ts";
import { JobSchema, JobStatus } from "../src/gen/batchline/v1/job_pb.ts";
import { Api, classify } from "../src/api.ts";

describe("classify", () => {
  it("names the field of an invalid input", () => {
    const detail = create(BadRequestSchema, { fieldViolations: [{ field: "text", description: "must be at most 2000 characters" }] });
    const error = new ConnectError("text: too long", Code.InvalidArgument, undefined, [{ desc: BadRequestSchema, value: detail }]);
    expect(classify(error)).toEqual({ kind: "invalid", field: "text", message: "must be at most 2000 characters" });
  });
  it("takes the retry delay the server gave for a full queue", () => {
    const detail = create(RetryInfoSchema, { retryDelay: { seconds: 2n, nanos: 500_000_000 } });
    const error = new ConnectError("queue full", Code.ResourceExhausted, undefined, [{ desc: RetryInfoSchema, value: detail }]);
    expect(classify(error)).toMatchObject({ kind: "queue-full", retryAfterMs: 2500 });
  });
  it("treats a refused connection as unreachable", () => {
    expect(classify(new TypeError("Failed to fetch")).kind).toBe("unreachable");
    expect(classify(new ConnectError("no healthy upstream", Code.Unavailable)).kind).toBe("unreachable");
  });
  it("asks for a key when the server wants one", () => {
    expect(classify(new ConnectError("the API key is not valid", Code.Unauthenticated))).toEqual({
      kind: "unauthenticated",
      message: "the API key is not valid",
    });
  });
  it("passes anything else through with its code", () => {
    expect(classify(new ConnectError("gone", Code.NotFound))).toEqual({ kind: "other", message: "NotFound: gone" });
  });
});

describe("Api.watch", () => {
  it("re-watches after a dropped stream and stops at the terminal state", async () => {
    const event = (status: number) => ({
      event: { case: "job" as const, value: create(JobSchema, { jobId: "j", status, sequence: Math.min(status, 3) }) },
    });
    let calls = 0;
    const resumedAfter: number[] = [];
    const api = new Api("http://127.0.0.1:9");
    Object.assign(api, {
      stream: {
        async *watchJob(request: { afterSequence: number }) {
          calls += 1;
          resumedAfter.push(request.afterSequence);
          if (calls === 1) {
            yield event(JobStatus.QUEUED);
            throw new ConnectError("stream reset", Code.Unavailable);
          }
          yield event(JobStatus.RUNNING); // the server replays the current state first
          yield event(JobStatus.DONE);
        },
      },
    });
    const seen: number[] = [];
    const retries: string[] = [];
    await api.watch(
      "j",
      (job) => {
        seen.push(job.status);
        return job.status === JobStatus.DONE;
      },
      new AbortController().signal,
      (problem) => retries.push(problem.kind),
    );
    expect(calls).toBe(2);
    expect(resumedAfter).toEqual([0, 1]); // re-opened after the QUEUED state it had seen
    expect(retries).toEqual(["unreachable"]);
    expect(seen).toEqual([JobStatus.QUEUED, JobStatus.RUNNING, JobStatus.DONE]);
  });
});
