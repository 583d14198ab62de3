import { describe, expect, it } from "vitest";
import { create } from "@bufbuild/protobuf";
import { timestampFromMs } from "@bufbuild/protobuf/wkt";
import { BatchCloseReason, JobSchema, JobStatus, TraceSchema } from "../src/gen/batchline/v1/job_pb.ts";
import { GetStatsResponseSchema } from "../src/gen/batchline/v1/inference_pb.ts";
import {
  advance,
  backoffMs,
  batchText,
  canCancel,
  forwardPasses,
  groupSummary,
  jobLines,
  jobView,
  ms,
  padding,
  segments,
  statsSample,
  statsView,
  title,
  type JobView,
  type TraceView,
} from "../src/view.ts";

const trace: TraceView = {
  acceptedAt: 1_000,
  startedAt: 1_020,
  finishedAt: 1_050,
  queueWaitMs: 20,
  inferenceMs: 25,
  batchId: "abcdef0123456789",
  batchSize: 4,
  realTokens: 30,
  paddedTokens: 40,
  worker: "batcher-1",
  closeReason: "size",
};
const done = (jobId: string, batchId: string): JobView => ({ jobId, text: jobId, status: "DONE", trace: { ...trace, batchId } });

describe("jobLines", () => {
  it("makes one job per non-empty trimmed line", () => {
    expect(jobLines("  I loved it \n\n terrible service\n   \n")).toEqual(["I loved it", "terrible service"]);
  });
  it("gives nothing for blank input", () => {
    expect(jobLines(" \n\t\n")).toEqual([]);
  });
});

describe("jobView", () => {
  it("keeps label, score, model and the trace of a finished job", () => {
    const job = create(JobSchema, {
      jobId: "j1",
      status: JobStatus.DONE,
      model: "simulated",
      result: { label: "POSITIVE", score: 0.9 },
      trace: create(TraceSchema, {
        acceptedAt: timestampFromMs(1000),
        startedAt: timestampFromMs(1020),
        finishedAt: timestampFromMs(1050),
        queueWaitMs: 20,
        inferenceMs: 25,
        batchId: "b1",
        batchSize: 2,
        batchRealTokens: 10,
        batchPaddedTokens: 12,
        closeReason: BatchCloseReason.WAIT,
      }),
    });
    const view = jobView(job, "I loved it");
    expect(view).toMatchObject({ jobId: "j1", text: "I loved it", status: "DONE", label: "POSITIVE", model: "simulated" });
    expect(view.trace).toMatchObject({ acceptedAt: 1000, finishedAt: 1050, batchSize: 2, closeReason: "wait" });
  });
  it("has no label or trace while queued", () => {
    const view = jobView(create(JobSchema, { jobId: "j2", status: JobStatus.QUEUED }), "x");
    expect(view.label).toBeUndefined();
    expect(view.trace).toBeUndefined();
  });
  it("carries the error of a failed job", () => {
    const view = jobView(create(JobSchema, { jobId: "j3", status: JobStatus.FAILED, error: { code: 4, message: "deadline passed" } }), "x");
    expect(view).toMatchObject({ status: "FAILED", error: "deadline passed" });
  });
});

describe("advance", () => {
  const queued: JobView = { jobId: "j", text: "t", status: "QUEUED" };
  const running: JobView = { ...queued, status: "RUNNING" };
  const finished: JobView = { ...queued, status: "DONE", label: "POSITIVE" };
  it("moves forward", () => {
    expect(advance(queued, running)).toBe(running);
    expect(advance(running, finished)).toBe(finished);
  });
  it("never moves backwards, so a re-watch that replays QUEUED changes nothing", () => {
    expect(advance(running, queued)).toBe(running);
    expect(advance(finished, running)).toBe(finished);
  });
  it("keeps the first terminal state", () => {
    expect(advance(finished, { ...queued, status: "CANCELLED" })).toBe(finished);
  });
});

describe("the trace", () => {
  it("splits the total into queue, forward pass and the rest", () => {
    expect(segments(trace).map((s) => [s.name, s.ms])).toEqual([
      ["queue", 20],
      ["forward", 25],
      ["other", 5],
    ]);
  });
  it("never shows a negative part when clocks disagree", () => {
    expect(segments({ ...trace, finishedAt: 1_010 }).every((s) => s.ms >= 0)).toBe(true);
  });
  it("reports padding as real over padded tokens", () => {
    expect(padding(trace)).toBe(0.75);
    expect(padding({ ...trace, paddedTokens: 0 })).toBe(1);
    expect(batchText(trace)).toBe("batch abcdef01 · 4 jobs · 75% real tokens · closed by size");
  });
  it("formats durations", () => {
    expect(ms(12.345)).toBe("12.3 ms");
    expect(ms(2500)).toBe("2.50 s");
  });
});

describe("several lines at once", () => {
  it("counts distinct batches as forward passes", () => {
    expect(forwardPasses([done("a", "b1"), done("b", "b1"), done("c", "b2")])).toBe(2);
  });
  it("summarises only once every job has finished", () => {
    const jobs = [done("a", "b1"), { jobId: "b", text: "b", status: "RUNNING" as const }];
    expect(groupSummary(jobs)).toBeUndefined();
    expect(groupSummary([done("a", "b1"), done("b", "b1"), done("c", "b1")])).toBe("3 texts in 1 forward pass");
    expect(groupSummary([done("a", "b1")])).toBeUndefined();
  });
});

describe("small things", () => {
  it("lets only unfinished jobs be cancelled", () => {
    expect(canCancel("QUEUED")).toBe(true);
    expect(canCancel("RUNNING")).toBe(true);
    expect(canCancel("DONE")).toBe(false);
    expect(canCancel("SUBMITTING")).toBe(false);
  });
  it("backs off exponentially up to a cap", () => {
    expect([0, 1, 2, 10].map((a) => backoffMs(a))).toEqual([500, 1000, 2000, 10_000]);
  });
  it("titles a conversation by its first line", () => {
    expect(title("\nhello there\nsecond")).toBe("hello there");
    expect(title("x".repeat(50), 10)).toBe("xxxxxxxxx…");
  });
  it("computes the stats strip from two samples", () => {
    const first = statsSample(create(GetStatsResponseSchema, { jobs: 100n, batches: 10n, queueDepth: 3n }), 0);
    const second = statsSample(create(GetStatsResponseSchema, { jobs: 160n, batches: 14n, queueDepth: 1n }), 2000);
    expect(statsView(undefined, first)).toEqual({ jobsPerSecond: 0, meanBatchSize: 10, queueDepth: 3 });
    expect(statsView(first, second)).toEqual({ jobsPerSecond: 30, meanBatchSize: 160 / 14, queueDepth: 1 });
  });
});
