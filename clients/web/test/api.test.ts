import { describe, expect, it } from "vitest";
import { create } from "@bufbuild/protobuf";
import { Code, ConnectError } from "@connectrpc/connect";
import { BadRequestSchema, RetryInfoSchema } from "../src/gen/google/rpc/error_details_pb.ts";
import { classify } from "../src/api.ts";

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
  it("passes anything else through with its code", () => {
    expect(classify(new ConnectError("gone", Code.NotFound))).toEqual({ kind: "other", message: "NotFound: gone" });
  });
});
