import { describe, expect, it } from "vitest";
import { addTurn, findJob, load, newConversation, save, STORAGE_KEY } from "../src/conversations.ts";

class MemoryStorage {
  items = new Map<string, string>();
  getItem(key: string): string | null {
    return this.items.get(key) ?? null;
  }
  setItem(key: string, value: string): void {
    this.items.set(key, value);
  }
}

describe("conversations", () => {
  it("round-trip through storage", () => {
    const storage = new MemoryStorage();
    const conversation = newConversation(1, "c1");
    addTurn(conversation, { id: "t1", input: "I loved it\nso good", jobs: [{ jobId: "j1", text: "I loved it", status: "QUEUED" }] });
    save(storage, [conversation]);
    const [loaded] = load(storage);
    expect(loaded?.title).toBe("I loved it");
    expect(findJob([loaded!], "j1")?.status).toBe("QUEUED");
    expect(findJob([loaded!], "nope")).toBeUndefined();
  });
  it("start empty when storage holds garbage", () => {
    const storage = new MemoryStorage();
    storage.setItem(STORAGE_KEY, "{not json");
    expect(load(storage)).toEqual([]);
    storage.setItem(STORAGE_KEY, JSON.stringify({ not: "a list" }));
    expect(load(storage)).toEqual([]);
  });
  it("keep the first message as the title", () => {
    const conversation = newConversation(1, "c1");
    addTurn(conversation, { id: "t1", input: "first", jobs: [] });
    addTurn(conversation, { id: "t2", input: "second", jobs: [] });
    expect(conversation.title).toBe("first");
  });
});
