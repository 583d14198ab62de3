// Pure view logic: everything the UI shows is computed here from plain data, and unit-tested.
// No DOM, no network: main.ts draws what these functions return.
import type { Job, Trace } from "./gen/batchline/v1/job_pb.ts";
import { JobStatus } from "./gen/batchline/v1/job_pb.ts";
import type { GetStatsResponse } from "./gen/batchline/v1/inference_pb.ts";
import type { Timestamp } from "@bufbuild/protobuf/wkt";

export const MAX_TEXT_CHARS = 2000;

/** A job as the UI keeps it (JSON-safe, so a conversation survives a reload). */
export interface JobView {
  jobId: string;
  text: string;
  status: StatusName;
  label?: string;
  score?: number;
  model?: string;
  trace?: TraceView;
  error?: string;
}

export type StatusName = "SUBMITTING" | "QUEUED" | "RUNNING" | "DONE" | "FAILED" | "CANCELLED";

export interface TraceView {
  acceptedAt: number; // epoch milliseconds
  startedAt: number;
  finishedAt: number;
  queueWaitMs: number;
  inferenceMs: number;
  batchId: string;
  batchSize: number;
  realTokens: number;
  paddedTokens: number;
  worker: string;
  closeReason: string;
}

const STATUS: Record<number, StatusName> = {
  [JobStatus.QUEUED]: "QUEUED",
  [JobStatus.RUNNING]: "RUNNING",
  [JobStatus.DONE]: "DONE",
  [JobStatus.FAILED]: "FAILED",
  [JobStatus.CANCELLED]: "CANCELLED",
};
const RANK: Record<StatusName, number> = { SUBMITTING: 0, QUEUED: 1, RUNNING: 2, DONE: 3, FAILED: 3, CANCELLED: 3 };
const CLOSE_REASONS = ["unspecified", "size", "tokens", "wait", "drained", "deadline"];

export function isTerminal(status: StatusName): boolean {
  return RANK[status] === 3;
}

export function canCancel(status: StatusName): boolean {
  return status === "QUEUED" || status === "RUNNING";
}

function millis(ts: Timestamp | undefined): number {
  return ts ? Number(ts.seconds) * 1000 + Math.floor(ts.nanos / 1e6) : 0;
}

function traceView(trace: Trace): TraceView {
  return {
    acceptedAt: millis(trace.acceptedAt),
    startedAt: millis(trace.startedAt),
    finishedAt: millis(trace.finishedAt),
    queueWaitMs: trace.queueWaitMs,
    inferenceMs: trace.inferenceMs,
    batchId: trace.batchId,
    batchSize: trace.batchSize,
    realTokens: trace.batchRealTokens,
    paddedTokens: trace.batchPaddedTokens,
    worker: trace.worker,
    closeReason: CLOSE_REASONS[trace.closeReason] ?? "unspecified",
  };
}

/** The UI's view of a job record from the server. */
export function jobView(job: Job, text: string): JobView {
  const view: JobView = { jobId: job.jobId, text, status: STATUS[job.status] ?? "QUEUED" };
  if (job.result && job.status === JobStatus.DONE) {
    view.label = job.result.label;
    view.score = job.result.score;
  }
  if (job.model) view.model = job.model;
  if (job.trace && job.trace.batchId) view.trace = traceView(job.trace);
  if (job.error && job.error.message) view.error = job.error.message;
  return view;
}

/** Apply a state from the server: never backwards, so a re-watch replays nothing twice. */
export function advance(current: JobView, next: JobView): JobView {
  return RANK[next.status] >= RANK[current.status] && !isTerminal(current.status) ? next : current;
}

/** The lines of an input that become jobs: trimmed, non-empty, in order. */
export function jobLines(input: string): string[] {
  return input
    .split("\n")
    .map((line) => line.trim())
    .filter((line) => line.length > 0);
}

export interface Segment {
  name: "queue" | "forward" | "other";
  label: string;
  ms: number;
}

/** Where a job's time went, from accepted to stored: the trace's three measured parts. */
export function segments(trace: TraceView): Segment[] {
  const queue = Math.max(0, trace.queueWaitMs);
  const forward = Math.max(0, trace.inferenceMs);
  return [
    { name: "queue", label: "waited in queue", ms: queue },
    { name: "forward", label: "forward pass", ms: forward },
    { name: "other", label: "tokenize + store", ms: Math.max(0, totalMs(trace) - queue - forward) },
  ];
}

/** The batch the job rode in, in words. */
export function batchText(trace: TraceView): string {
  return `batch ${trace.batchId.slice(0, 8)} · ${trace.batchSize} ${trace.batchSize === 1 ? "job" : "jobs"} · ${percent(
    padding(trace),
  )} real tokens · closed by ${trace.closeReason}`;
}

/** Real over padded tokens of the job's batch (1 = no padding at all). */
export function padding(trace: TraceView): number {
  return trace.paddedTokens > 0 ? trace.realTokens / trace.paddedTokens : 1;
}

export function totalMs(trace: TraceView): number {
  return Math.max(0, trace.finishedAt - trace.acceptedAt);
}

export function percent(fraction: number): string {
  return `${Math.round(fraction * 100)}%`;
}

export function ms(value: number): string {
  return value >= 1000 ? `${(value / 1000).toFixed(2)} s` : `${value.toFixed(1)} ms`;
}

/** How many forward passes a group of jobs took: their distinct batches. */
export function forwardPasses(jobs: JobView[]): number {
  return new Set(jobs.filter((j) => j.trace).map((j) => j.trace?.batchId)).size;
}

/** The line under a multi-line reply, once every job has finished. */
export function groupSummary(jobs: JobView[]): string | undefined {
  if (jobs.length < 2 || !jobs.every((j) => isTerminal(j.status))) return undefined;
  const passes = forwardPasses(jobs);
  return `${jobs.length} texts in ${passes} forward ${passes === 1 ? "pass" : "passes"}`;
}

export function scoreText(view: JobView): string {
  return view.score === undefined ? "" : view.score.toFixed(3);
}

export function title(text: string, max = 40): string {
  const first = jobLines(text)[0] ?? "New chat";
  return first.length > max ? `${first.slice(0, max - 1)}…` : first;
}

/** Exponential backoff with a cap, for reconnecting to an unreachable stack. */
export function backoffMs(attempt: number, baseMs = 500, capMs = 10_000): number {
  return Math.min(capMs, baseMs * 2 ** Math.max(0, attempt));
}

export interface StatsView {
  jobsPerSecond: number;
  meanBatchSize: number;
  queueDepth: number;
}

export interface StatsSample {
  at: number; // epoch milliseconds
  jobs: number;
  batches: number;
  queueDepth: number;
}

export function statsSample(stats: GetStatsResponse, at: number): StatsSample {
  return { at, jobs: Number(stats.jobs), batches: Number(stats.batches), queueDepth: Number(stats.queueDepth) };
}

/** The stats strip from two samples: throughput over the interval between them. */
export function statsView(previous: StatsSample | undefined, latest: StatsSample): StatsView {
  const seconds = previous ? (latest.at - previous.at) / 1000 : 0;
  const jobs = previous ? latest.jobs - previous.jobs : 0;
  return {
    jobsPerSecond: seconds > 0 ? Math.max(0, jobs) / seconds : 0,
    meanBatchSize: latest.batches > 0 ? latest.jobs / latest.batches : 0,
    queueDepth: latest.queueDepth,
  };
}
