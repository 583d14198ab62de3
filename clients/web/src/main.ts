// The chat UI: wires the DOM to the API and redraws from state. View logic lives in view.ts.
import "./style.css";
import { Api, apiUrl, classify, sleep, type Problem } from "./api.ts";
import { addTurn, findJob, load, newConversation, save, type Conversation, type Turn } from "./conversations.ts";
import {
  advance,
  backoffMs,
  batchText,
  canCancel,
  groupSummary,
  isTerminal,
  jobLines,
  jobView,
  ms,
  scoreText,
  segments,
  statsSample,
  statsView,
  totalMs,
  type JobView,
  type StatsSample,
} from "./view.ts";

const SUBMIT_ATTEMPTS = 6; // about 30 s of backoff before a message is given up
const STATS_EVERY_MS = 2000;

const $ = <T extends HTMLElement>(id: string): T => document.getElementById(id) as T;
const dom = {
  newChat: $<HTMLButtonElement>("new-chat"),
  conversations: $<HTMLUListElement>("conversations"),
  messages: $<HTMLOListElement>("messages"),
  composer: $<HTMLFormElement>("composer"),
  input: $<HTMLTextAreaElement>("input"),
  inputError: $<HTMLParagraphElement>("input-error"),
  banner: $<HTMLDivElement>("banner"),
  stats: $<HTMLElement>("stats"),
  keyForm: $<HTMLFormElement>("key-form"),
  key: $<HTMLInputElement>("api-key"),
};

// The API key lives for this tab only (sessionStorage): never in localStorage, never in a URL.
const KEY_STORAGE = "batchline.apiKey";

// Where the API lives (from ?api= or /config.json). The box takes input before this settles;
// anything sent meanwhile waits on it rather than being dropped.
const apiReady: Promise<Api> = apiUrl(window.location).then((url) => new Api(url, apiKey));

const state = {
  conversations: load(localStorage),
  activeId: "",
  api: undefined as Api | undefined,
  lastStats: undefined as StatsSample | undefined,
  unreachableSince: 0,
};

// --- drawing -----------------------------------------------------------------------------------

function h<K extends keyof HTMLElementTagNameMap>(
  tag: K,
  props: Record<string, string> = {},
  ...children: (Node | string | undefined)[]
): HTMLElementTagNameMap[K] {
  const element = document.createElement(tag);
  for (const [key, value] of Object.entries(props)) {
    if (key === "class") element.className = value;
    else element.setAttribute(key, value);
  }
  for (const child of children) if (child !== undefined) element.append(child);
  return element;
}

function active(): Conversation {
  let conversation = state.conversations.find((c) => c.id === state.activeId);
  if (!conversation) {
    conversation = state.conversations[0] ?? newConversation(Date.now(), crypto.randomUUID());
    if (!state.conversations.includes(conversation)) state.conversations.unshift(conversation);
    state.activeId = conversation.id;
  }
  return conversation;
}

function render(): void {
  save(localStorage, state.conversations);
  const current = active();
  dom.conversations.replaceChildren(
    ...state.conversations.map((c) => {
      const button = h("button", { type: "button", class: "conversation" }, c.title);
      if (c.id === current.id) button.setAttribute("aria-current", "true");
      button.addEventListener("click", () => {
        state.activeId = c.id;
        render();
        dom.input.focus();
      });
      return h("li", {}, button);
    }),
  );
  // Redrawing replaces the nodes; keep keyboard focus on the same Cancel button if it had it.
  const focused = document.activeElement?.closest<HTMLElement>("[data-job-id]")?.dataset.jobId;
  dom.messages.replaceChildren(...current.turns.flatMap(drawTurn));
  dom.messages.lastElementChild?.scrollIntoView({ block: "end" });
  if (focused) dom.messages.querySelector<HTMLElement>(`[data-job-id="${focused}"] button`)?.focus();
}

function drawTurn(turn: Turn): HTMLElement[] {
  const user = h("li", { class: "message user" }, h("p", { class: "bubble" }, turn.input));
  const reply = h("li", { class: "message reply", "data-turn": turn.id });
  if (turn.problem) {
    reply.append(h("p", { class: "problem", role: "alert" }, turn.problem));
  }
  for (const job of turn.jobs) reply.append(drawJob(job, turn.jobs.length > 1));
  const summary = groupSummary(turn.jobs);
  if (summary) reply.append(h("p", { class: "summary" }, summary));
  return [user, reply];
}

function drawJob(job: JobView, quote: boolean): HTMLElement {
  const card = h("article", { class: "job", "data-status": job.status, "data-job-id": job.jobId });
  if (quote) card.append(h("p", { class: "quote" }, `“${job.text}”`));
  const outcome = h("p", { class: "outcome" });
  if (job.label) {
    outcome.append(h("span", { class: `label label-${job.label}` }, job.label), " ", h("span", { class: "score" }, scoreText(job)));
  }
  outcome.append(h("span", { class: "status" }, job.status.toLowerCase()));
  if (job.model) outcome.append(h("span", { class: "model" }, `by ${job.model}`));
  if (canCancel(job.status)) {
    const cancel = h("button", { type: "button", class: "cancel", "aria-label": `Cancel job for “${job.text}”` }, "Cancel");
    cancel.addEventListener("click", () => void cancelJob(job.jobId));
    outcome.append(cancel);
  }
  card.append(outcome);
  if (job.error) card.append(h("p", { class: "problem" }, job.error));
  if (job.trace && isTerminal(job.status)) card.append(drawTrace(job));
  return card;
}

function drawTrace(job: JobView): HTMLElement {
  const trace = job.trace!;
  const total = totalMs(trace);
  const parts = segments(trace);
  const bar = h("div", { class: "timeline", role: "img", "aria-label": parts.map((p) => `${p.label} ${ms(p.ms)}`).join(", ") });
  for (const part of parts) {
    const width = total > 0 ? (100 * part.ms) / total : 0;
    const piece = h("span", { class: `segment segment-${part.name}`, title: `${part.label}: ${ms(part.ms)}` });
    piece.style.width = `${Math.max(width, part.ms > 0 ? 1 : 0)}%`;
    bar.append(piece);
  }
  const steps = h(
    "ol",
    { class: "steps" },
    h("li", {}, "accepted"),
    h("li", {}, `waited in queue ${ms(trace.queueWaitMs)}`),
    h("li", {}, batchText(trace)),
    h("li", {}, `forward pass ${ms(trace.inferenceMs)}`),
    h("li", {}, `stored at ${ms(total)}`),
  );
  return h("figure", { class: "trace" }, bar, h("figcaption", {}, steps));
}

function apiKey(): string {
  return sessionStorage.getItem(KEY_STORAGE) ?? "";
}

/** Refused, but sent with `sentWith` before another key was entered: worth a retry with that one. */
function staleRefusal(problem: Problem, sentWith: string): boolean {
  return problem.kind === "unauthenticated" && sentWith !== apiKey();
}

/** The server wants a key this browser lacks (or has wrong): ask for one. */
function askForKey(problem: Problem): void {
  if (problem.kind !== "unauthenticated") return;
  dom.keyForm.hidden = false;
  showBanner(`This Batchline needs an API key: ${problem.message}`);
}

function showBanner(text: string): void {
  dom.banner.textContent = text;
  dom.banner.hidden = text === "";
}

// --- actions -----------------------------------------------------------------------------------

async function send(input: string): Promise<void> {
  const lines = jobLines(input);
  if (lines.length === 0) return;
  const turn: Turn = { id: crypto.randomUUID(), input, jobs: lines.map((text) => ({ jobId: "", text, status: "SUBMITTING" })) };
  addTurn(active(), turn);
  render();
  const api = await apiReady; // a message typed before /config.json arrived waits for it
  for (let attempt = 0; ; attempt++) {
    const sentWith = apiKey();
    try {
      const ids = await api.submit(lines);
      turn.jobs = lines.map((text, i) => ({ jobId: ids[i] ?? "", text, status: "QUEUED" }));
      showBanner("");
      render();
      for (const job of turn.jobs) void follow(job.jobId);
      return;
    } catch (error) {
      const problem = classify(error);
      if (staleRefusal(problem, sentWith)) continue;
      askForKey(problem);
      if (!retryable(problem) || attempt + 1 >= SUBMIT_ATTEMPTS) {
        turn.jobs = [];
        turn.problem = problemText(problem);
        if (problem.kind === "invalid") dom.inputError.textContent = turn.problem;
        render();
        return;
      }
      const delay = problem.kind === "queue-full" ? problem.retryAfterMs : backoffMs(attempt);
      showBanner(retryText(problem, delay));
      await sleep(delay);
    }
  }
}

function retryable(problem: Problem): boolean {
  return problem.kind === "queue-full" || problem.kind === "unreachable";
}

function problemText(problem: Problem): string {
  switch (problem.kind) {
    case "invalid":
      return `${problem.field}: ${problem.message}`;
    case "queue-full":
      return `The queue is full: ${problem.message}. Try again shortly.`;
    case "unreachable":
      return `Could not reach Batchline at ${state.api?.baseUrl}: ${problem.message}`;
    case "unauthenticated":
      return `Not sent: ${problem.message}. Enter an API key above and send again.`;
    case "other":
      return problem.message;
  }
}

function retryText(problem: Problem, delayMs: number): string {
  const when = `retrying in ${(delayMs / 1000).toFixed(1)} s`;
  return problem.kind === "queue-full"
    ? `The queue is full; ${when} as the server asked.`
    : `Cannot reach Batchline at ${state.api?.baseUrl}; ${when}.`;
}

/** Watch one job to its end, updating its reply in place (re-watching if the stream drops). */
async function follow(jobId: string): Promise<void> {
  if (!state.api || !jobId) return;
  const stop = new AbortController();
  try {
    await state.api.watch(
      jobId,
      (job) => {
        const view = findJob(state.conversations, jobId);
        if (!view) {
          stop.abort();
          return true;
        }
        Object.assign(view, advance(view, jobView(job, view.text)));
        render();
        return isTerminal(view.status);
      },
      stop.signal,
      (problem, delay) => showBanner(`Lost the stream for a job (${problem.message || problem.kind}); re-watching in ${(delay / 1000).toFixed(1)} s.`),
    );
    showBanner("");
  } catch (error) {
    const view = findJob(state.conversations, jobId);
    if (view) view.error = problemText(classify(error));
    render();
  }
}

async function cancelJob(jobId: string): Promise<void> {
  const view = findJob(state.conversations, jobId);
  if (!state.api || !view) return;
  try {
    const job = await state.api.cancel(jobId);
    if (job) Object.assign(view, advance(view, jobView(job, view.text)));
  } catch (error) {
    view.error = problemText(classify(error));
  }
  render();
}

async function pollStats(): Promise<void> {
  for (let attempt = 0; ; ) {
    if (document.visibilityState !== "visible" || !state.api) {
      await sleep(STATS_EVERY_MS);
      continue;
    }
    const sentWith = apiKey();
    try {
      const sample = statsSample(await state.api.stats(), Date.now());
      const view = statsView(state.lastStats, sample);
      state.lastStats = sample;
      drawStats(`${view.jobsPerSecond.toFixed(1)} jobs/s`, `mean batch ${view.meanBatchSize.toFixed(1)}`, `queue ${view.queueDepth}`);
      if (attempt > 0) showBanner("");
      attempt = 0;
      await sleep(STATS_EVERY_MS);
    } catch (error) {
      const problem = classify(error);
      if (staleRefusal(problem, sentWith)) continue;
      const locked = problem.kind === "unauthenticated";
      // Locked is no sign of load: ask at the usual pace, so stats show soon after a key.
      const delay = locked ? STATS_EVERY_MS : backoffMs(attempt++);
      drawStats(locked ? "locked" : "offline", "", "");
      if (locked) askForKey(problem);
      else showBanner(retryText(problem, delay));
      await sleep(delay);
    }
  }
}

function drawStats(...items: string[]): void {
  dom.stats.replaceChildren(...items.filter(Boolean).map((item) => h("span", { class: "stat" }, item)));
}

// --- start -------------------------------------------------------------------------------------

dom.composer.addEventListener("submit", (event) => {
  event.preventDefault();
  const input = dom.input.value;
  dom.input.value = "";
  dom.inputError.textContent = "";
  void send(input);
});
dom.input.addEventListener("keydown", (event) => {
  if (event.key === "Enter" && !event.shiftKey && !event.isComposing) {
    event.preventDefault();
    dom.composer.requestSubmit();
  }
});
document.querySelector(".skip")?.addEventListener("click", (event) => {
  event.preventDefault();
  dom.input.focus();
});
dom.newChat.addEventListener("click", () => {
  const conversation = newConversation(Date.now(), crypto.randomUUID());
  state.conversations.unshift(conversation);
  state.activeId = conversation.id;
  render();
  dom.input.focus();
});

dom.keyForm.addEventListener("submit", (event) => {
  event.preventDefault();
  sessionStorage.setItem(KEY_STORAGE, dom.key.value.trim());
  dom.key.value = "";
  dom.keyForm.hidden = true;
  showBanner("");
  dom.input.focus();
});

dom.input.focus(); // before the config fetch completes, so typing can start as soon as the page shows
state.api = await apiReady;
document.body.dataset.api = state.api.baseUrl;
render();
for (const conversation of state.conversations) {
  for (const turn of conversation.turns) {
    for (const job of turn.jobs) if (job.jobId && !isTerminal(job.status)) void follow(job.jobId);
  }
}
void pollStats();
