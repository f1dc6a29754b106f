// What tests/js/browser_page.mjs and proxy_page.mjs share: headless Chromium
// (Debian's /usr/bin/chromium, driven by playwright-core) on a fresh profile,
// JSON lines on stdout, and the way out that closes the browser and removes
// the profile. Says {"ev":"browser","pid":P,"profile":DIR} for the browser
// process at once (the test notes its pid, so that it is ended even if the
// script is killed before it could close it), {"ev":"pageerror","text":T}
// for a script error in the page, {"ev":"fatal","text":T} before exiting 1.
import { chromium } from 'playwright-core';
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';

export const say = (o) => process.stdout.write(JSON.stringify(o) + '\n');
const profile = mkdtempSync(join(tmpdir(), 'httpdcnode-chromium-'));
const ARGS = ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
              '--disable-background-networking', '--disable-component-update', '--disable-sync'];
let context = null;
let ending = false;

export async function end(code) {
  if (ending) return;
  ending = true;
  try {
    if (context) await context.close();
  } catch (e) {
    say({ ev: 'fatal', text: 'closing the browser: ' + e.message });
  }
  rmSync(profile, { recursive: true, force: true });
  process.exit(code);
}

export async function fatal(text) {
  say({ ev: 'fatal', text });
  await end(1);
}

// Our child processes: the browser.
function children() {
  const pids = [];
  for (const d of readdirSync('/proc')) {
    if (!/^[0-9]+$/.test(d)) continue;
    try {
      const stat = readFileSync(`/proc/${d}/stat`, 'utf8');
      const ppid = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]);
      if (ppid === process.pid) pids.push(Number(d));
    } catch { /* gone meanwhile */ }
  }
  return pids;
}

// The lines of stdin; the end once it closes (the test is over, or its node
// died) or after SECONDS.
export function endOnClose(seconds) {
  setTimeout(() => fatal(`still running after ${seconds} s`), seconds * 1000);
  const input = createInterface({ input: process.stdin });
  input.on('close', () => end(0));
  return input;
}

// The browser started with ARGS and EXTRA_ARGS, its pid said; its page, whose
// script errors are said.
export async function launch(extraArgs, options) {
  context = await chromium.launchPersistentContext(profile, {
    executablePath: '/usr/bin/chromium', headless: true, args: [...ARGS, ...extraArgs], ...options,
  });
  for (const pid of children()) say({ ev: 'browser', pid, profile });
  const page = context.pages()[0] || await context.newPage();
  page.on('pageerror', (e) => say({ ev: 'pageerror', text: String(e) }));
  return { context, page };
}
