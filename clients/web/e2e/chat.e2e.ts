// The chat UI in a real browser (Debian's chromium through playwright-core) against a running
// stack. Run by tests/browser/test_chat_ui.py, which starts the stack and sets:
//   UI_URL     the UI (served with /config.json pointing at Envoy)
//   DEAD_API   an address where nothing listens, for the "stack is down" case
//   ARTIFACTS  where screenshots go
import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import { mkdirSync } from "node:fs";
import { join } from "node:path";
import { chromium, type Browser, type Page, type Route } from "playwright-core";

const UI_URL = process.env.UI_URL ?? "http://localhost:3000";
const ARTIFACTS = process.env.ARTIFACTS ?? "test-artifacts/browser";
const TIMEOUT = 20_000;
let browser: Browser;

before(async () => {
  mkdirSync(ARTIFACTS, { recursive: true });
  browser = await chromium.launch({
    executablePath: process.env.CHROMIUM ?? "/usr/bin/chromium",
    args: ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking"],
  });
});
after(async () => browser?.close());

async function open(width = 1280, height = 860, url = UI_URL): Promise<Page> {
  const page = await browser.newPage({ viewport: { width, height } });
  page.setDefaultTimeout(TIMEOUT);
  await page.goto(url);
  await page.locator("#input").waitFor();
  return page;
}

async function send(page: Page, lines: string[]): Promise<void> {
  const input = page.locator("#input");
  await input.focus();
  for (const [i, line] of lines.entries()) {
    if (i > 0) await page.keyboard.press("Shift+Enter");
    await input.pressSequentially(line, { delay: 0 });
  }
  await page.keyboard.press("Enter");
}

const lastReply = (page: Page) => page.locator("li.reply").last();

test("a sentence gets a reply with a label and a pipeline trace", async () => {
  const page = await open();
  await send(page, ["I loved it, what a great film"]);
  const job = lastReply(page).locator("article.job[data-status=DONE]");
  await job.waitFor();
  assert.match(await job.locator(".label").innerText(), /POSITIVE|NEGATIVE/);
  const steps = await job.locator(".steps").innerText();
  for (const part of ["accepted", "waited in queue", "batch", "forward pass", "stored at"]) {
    assert.ok(steps.includes(part), `trace lacks "${part}": ${steps}`);
  }
  assert.equal(await job.locator(".timeline .segment").count(), 3);
  await page.locator(".stats .stat", { hasText: "jobs/s" }).waitFor();
  await page.screenshot({ path: join(ARTIFACTS, "chat-desktop.png") });
  await page.close();
});

test("three lines at once are three jobs, and the reply counts the forward passes", async () => {
  const page = await open();
  await send(page, ["the food was great", "terrible service", "not bad at all"]);
  const reply = lastReply(page);
  await reply.locator(".summary").waitFor();
  assert.equal(await reply.locator("article.job[data-status=DONE]").count(), 3);
  assert.match(await reply.locator(".summary").innerText(), /^3 texts in [123] forward pass(es)?$/);
  await page.screenshot({ path: join(ARTIFACTS, "chat-batch.png") });
  await page.close();
});

test("a queued job can be cancelled and is never computed", async () => {
  const page = await open();
  const lines = Array.from({ length: 10 }, (_, i) => `queued sentence number ${i + 1}`);
  await send(page, lines);
  const reply = lastReply(page);
  const last = reply.locator("article.job").last();
  await last.locator("button.cancel").waitFor();
  assert.equal(await last.getAttribute("data-status"), "QUEUED");
  await last.locator("button.cancel").click();
  await reply.locator("article.job").last().and(page.locator("[data-status=CANCELLED]")).waitFor();
  const cancelled = reply.locator("article.job").last();
  assert.equal(await cancelled.locator(".label").count(), 0, "a cancelled job has no result");
  await reply.locator(".summary").waitFor(); // the others finish; the group is summarised
  await page.close();
});

test("a 2,001-character input shows the server's field error", async () => {
  const page = await open();
  await page.locator("#input").fill("x".repeat(2001));
  await page.keyboard.press("Enter");
  const error = page.locator("#input-error");
  await error.filter({ hasText: "text:" }).waitFor();
  assert.match(await error.innerText(), /^text: must be at most 2000 characters/);
  assert.equal(await lastReply(page).locator("article.job").count(), 0);
  await page.screenshot({ path: join(ARTIFACTS, "input-too-long.png") });
  await page.close();
});

test("a message sent before the page has its API address goes out once it has", async () => {
  // The box takes input while /config.json is in flight; hold that response to widen the gap.
  const page = await browser.newPage();
  page.setDefaultTimeout(TIMEOUT);
  const held: Route[] = [];
  await page.route("**/config.json", (route) => void held.push(route));
  await page.goto(UI_URL, { waitUntil: "commit" });
  while (held.length === 0) await page.waitForTimeout(20); // the UI's script runs and asks
  await page.locator("#input").fill("sent while the page was starting, and I loved it");
  await page.keyboard.press("Enter");
  await lastReply(page).locator("article.job").waitFor();
  assert.equal(await page.locator("#input").inputValue(), "");
  for (const route of held) await route.continue();
  await page.unroute("**/config.json");
  await lastReply(page).locator("article.job[data-status=DONE]").waitFor();
  await page.close();
});

test("keyboard only: the box has focus, Enter sends, Tab order is box then Send, skip link works", async () => {
  const page = await open();
  const focused = () => page.evaluate(() => document.activeElement?.id || document.activeElement?.textContent || "");
  assert.equal(await focused(), "input");
  await page.keyboard.type("keyboard only and it works");
  await page.keyboard.press("Enter");
  await lastReply(page).locator("article.job[data-status=DONE]").waitFor();
  assert.equal(await focused(), "input", "focus stays in the box after sending");
  await page.keyboard.press("Tab");
  assert.equal(await focused(), "Send");
  await page.keyboard.press("Shift+Tab");
  assert.equal(await focused(), "input");
  await page.focus(".skip"); // the first stop on the page, shown when focused
  assert.ok(await page.locator(".skip").isVisible());
  await page.keyboard.press("Enter");
  assert.equal(await focused(), "input");
  await page.close();
});

test("it reads well at phone width and keeps the conversation after a reload", async () => {
  const page = await open(390, 844);
  await send(page, ["small screens deserve good news"]);
  await lastReply(page).locator("article.job[data-status=DONE]").waitFor();
  const overflow = await page.evaluate(() => document.documentElement.scrollWidth - window.innerWidth);
  assert.ok(overflow <= 0, `page scrolls sideways by ${overflow}px`);
  await page.screenshot({ path: join(ARTIFACTS, "chat-phone.png") });
  await page.reload();
  await page.locator("li.reply article.job[data-status=DONE]").first().waitFor();
  await page.close();
});

test("when the stack is down the UI says so and keeps retrying", async () => {
  const dead = process.env.DEAD_API ?? "http://127.0.0.1:9";
  const page = await open(1280, 860, `${UI_URL}/?api=${encodeURIComponent(dead)}`);
  const banner = page.locator("#banner");
  await banner.filter({ hasText: "Cannot reach Batchline" }).waitFor();
  assert.match(await banner.innerText(), /retrying in \d/);
  assert.equal(await page.locator(".stats").innerText(), "offline");
  await page.screenshot({ path: join(ARTIFACTS, "stack-down.png") });
  await page.close();
});

test("with API keys on, the UI asks for one and sends with it", async () => {
  // KEYED_UI_URL: a second stack started with API_KEYS; API_KEY: one of its keys.
  const keyed = process.env.KEYED_UI_URL;
  const key = process.env.API_KEY;
  assert.ok(keyed && key, "KEYED_UI_URL and API_KEY must be set");
  const page = await open(1280, 860, keyed);
  await page.locator("#banner", { hasText: "needs an API key" }).waitFor();
  assert.equal(await page.locator(".stats").innerText(), "locked");
  await send(page, ["sent before the key"]);
  await lastReply(page).locator(".problem", { hasText: "Enter an API key" }).waitFor();

  // A stats poll sent without a key is held until the key is in: its refusal, arriving after
  // the key, is stale and must not ask for a key again.
  const held: Route[] = [];
  await page.route("**/GetStats", (route) => void held.push(route));
  while (held.length === 0) await page.waitForTimeout(50);
  await page.locator("#api-key").fill(key);
  await page.keyboard.press("Enter");
  assert.equal(await page.locator("#key-form").isHidden(), true);
  for (const route of held) await route.continue();
  await page.unroute("**/GetStats");
  await page.locator(".stats .stat", { hasText: "jobs/s" }).waitFor();
  assert.equal(await page.locator("#key-form").isHidden(), true, "a stale refusal asked for the key again");
  await send(page, ["I loved it, and my key works"]);
  await lastReply(page).locator("article.job[data-status=DONE]").waitFor();
  assert.equal(await page.evaluate(() => localStorage.getItem("batchline.apiKey")), null);
  await page.screenshot({ path: join(ARTIFACTS, "api-key.png") });
  await page.close();
});
