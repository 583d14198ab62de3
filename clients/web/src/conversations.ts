// Conversations, kept in the browser's local storage. Pure functions over plain data.
import type { JobView } from "./view.ts";
import { title } from "./view.ts";

/** One message and its reply: the input, one job per line, or the problem that stopped it. */
export interface Turn {
  id: string;
  input: string;
  jobs: JobView[];
  problem?: string;
}

export interface Conversation {
  id: string;
  title: string;
  createdAt: number;
  turns: Turn[];
}

export const STORAGE_KEY = "batchline.conversations.v1";

export function newConversation(now: number, id: string): Conversation {
  return { id, title: "New chat", createdAt: now, turns: [] };
}

export function load(storage: Pick<Storage, "getItem">): Conversation[] {
  try {
    const parsed: unknown = JSON.parse(storage.getItem(STORAGE_KEY) ?? "[]");
    return Array.isArray(parsed) ? (parsed as Conversation[]).filter((c) => c && Array.isArray(c.turns)) : [];
  } catch {
    return []; // a corrupt entry must not break the app
  }
}

export function save(storage: Pick<Storage, "setItem">, conversations: Conversation[]): void {
  storage.setItem(STORAGE_KEY, JSON.stringify(conversations));
}

/** Add a turn; the first one names the conversation. */
export function addTurn(conversation: Conversation, turn: Turn): void {
  if (conversation.turns.length === 0) conversation.title = title(turn.input);
  conversation.turns.push(turn);
}

/** Every job, anywhere, with this id (so a watcher can update it in place). */
export function findJob(conversations: Conversation[], jobId: string): JobView | undefined {
  for (const conversation of conversations) {
    for (const turn of conversation.turns) {
      const job = turn.jobs.find((j) => j.jobId === jobId);
      if (job) return job;
    }
  }
  return undefined;
}
