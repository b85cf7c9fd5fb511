// The console in a real browser (Debian's chromium, driven by puppeteer-core)
// against `vigil demo --serve`: the fleet page lists every node; an XID 48
// POSTed to ingest turns that node's tile from healthy without a reload,
// through the stream; the node page shows the event and the drain in its
// timeline and its GPUs, and a fleet refresh answered late does not paint
// over it; the actors page lists the node actor with its mailbox depth, and
// under the node its gpu actor with its mailbox depth and messages handled. Screenshots go to $VIGIL_ARTIFACTS (CI keeps them).
// Usage: node console_browser_test.mjs VIGIL_BINARY
import { spawn } from 'node:child_process';
import { mkdirSync, mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import puppeteer from 'puppeteer-core';

const binary = process.argv[2];
const artifacts = process.env.VIGIL_ARTIFACTS || mkdtempSync(join(tmpdir(), 'vigil-console-'));
mkdirSync(artifacts, { recursive: true });
const chromium = process.env.CHROMIUM || '/usr/bin/chromium';
const wait = { timeout: 60000 };

function fail(message) {
  console.error('FAIL: ' + message);
  process.exitCode = 1;
  throw new Error(message);
}

// Starts the demo and reads the URLs it prints.
function startDemo() {
  const dir = mkdtempSync(join(tmpdir(), 'vigil-demo-'));
  const demo = spawn(binary, ['demo', '--serve', '--journal', `sqlite:${dir}/journal.db`],
    { stdio: ['ignore', 'pipe', 'pipe'] });
  let seen = '';
  const lines = new Promise((resolve, reject) => {
    const take = (chunk) => {
      seen += chunk;
      const consoleUrl = seen.match(/console:\s+(\S+)/);
      const ingest = seen.match(/ingest:\s+(\S+)\s+token\s+(\S+)/);
      const nodes = seen.match(/simulated cluster: (\d+) nodes/);
      if (consoleUrl && ingest && nodes)
        resolve({ consoleUrl: consoleUrl[1], ingestUrl: ingest[1], token: ingest[2],
          nodes: Number(nodes[1]) });
    };
    demo.stdout.on('data', take);
    demo.stderr.on('data', (chunk) => { seen += chunk; });
    demo.on('exit', (code) => reject(new Error(`demo exited ${code}: ${seen}`)));
  });
  return { demo, lines };
}

const { demo, lines } = startDemo();
let browser;
try {
  const { consoleUrl, ingestUrl, token, nodes } = await lines;
  browser = await puppeteer.launch({ executablePath: chromium, headless: true,
    args: ['--no-sandbox', '--disable-gpu', '--disable-dev-shm-usage'] });
  const page = await browser.newPage();
  await page.setViewport({ width: 1280, height: 900 });
  page.on('pageerror', (e) => fail('page error: ' + e.message));
  await page.goto(consoleUrl, { waitUntil: 'domcontentloaded' });

  // Every node as a tile, once the control plane has seen the Node list.
  await page.waitForFunction((n) => document.querySelectorAll('.tile').length === n &&
    document.querySelectorAll('.tile[data-state="healthy"]').length === n, wait, nodes);
  await page.screenshot({ path: join(artifacts, 'console-fleet.png') });
  const victim = await page.$eval('.tile', (t) => t.dataset.node);
  await page.evaluate(() => { window.notReloaded = true; });

  // An XID 48 through ingest: the tile changes through the stream.
  const event = { agent: 'syslog-health-monitor', componentClass: 'GPU',
    checkName: 'SysLogsXIDError', isFatal: true, errorCode: ['48'],
    recommendedAction: 'COMPONENT_RESET', message: 'XID 48 (browser test)',
    entitiesImpacted: [{ entityType: 'GPU_UUID', entityValue: 'GPU-browser-test' }],
    nodeName: victim };
  const posted = await fetch(ingestUrl, { method: 'POST',
    headers: { Authorization: 'Bearer ' + token, 'Content-Type': 'application/json' },
    body: JSON.stringify(event) });
  if (posted.status !== 200) fail('ingest answered ' + posted.status);
  await page.waitForFunction((node) => {
    const tile = document.querySelector(`.tile[data-node="${node}"]`);
    return tile && tile.dataset.state !== 'healthy';
  }, wait, victim);
  if (!await page.evaluate(() => window.notReloaded === true))
    fail('the page reloaded instead of updating');
  await page.waitForFunction((node) => [...document.querySelectorAll('#live-rows tr td')]
    .some((td) => td.textContent === node), wait, victim);
  await page.screenshot({ path: join(artifacts, 'console-fleet-after-xid.png') });

  // The node page: the event and the drain in its timeline. A refresh of
  // the fleet begun before the click, and answered after the node page was
  // painted, must not paint over it: the fleet's answer is held back here
  // until the node page is shown.
  await page.setRequestInterception(true);
  let releaseFleet;
  let holdFleet;
  const fleetHeld = new Promise((resolve) => {
    holdFleet = (request) => {
      if (request.isInterceptResolutionHandled()) return;
      if (releaseFleet === undefined && request.url().endsWith('/api/v1/fleet')) {
        releaseFleet = () => request.continue();
        resolve();
      } else {
        request.continue();
      }
    };
  });
  page.on('request', holdFleet);
  await page.evaluate(() => { window.lateFleet = render(); });
  await fleetHeld;
  await page.click(`.tile[data-node="${victim}"]`);
  await page.waitForFunction(() =>
    document.querySelector('#timeline tr[data-kind="event"]') &&
    document.querySelector('#timeline tr[data-kind="drain"]'), wait);
  releaseFleet();
  await page.evaluate(() => window.lateFleet);
  page.off('request', holdFleet);
  await page.setRequestInterception(false);
  if (!await page.$('#node-state')) fail('a late fleet refresh painted over the node page');
  const state = await page.$eval('#node-state', (b) => b.textContent);
  if (state === 'healthy') fail('the node page says healthy after the XID');
  await page.waitForFunction(() => document.querySelectorAll('#gpus tr[data-gpu]').length > 0,
    wait);
  await page.screenshot({ path: join(artifacts, 'console-node.png'), fullPage: true });

  // The actors page: every actor with its mailbox depth, the node among them.
  await page.goto(consoleUrl + '#/actors', { waitUntil: 'domcontentloaded' });
  await page.waitForFunction((node) => {
    const row = document.querySelector(`#actors tr[data-actor="node/${node}"]`);
    return row && /^\d+$/.test(row.children[2].textContent) &&
      document.querySelector('#actors tr[data-actor="journal"]');
  }, wait, victim);
  await page.screenshot({ path: join(artifacts, 'console-actors.png'), fullPage: true });

  // The node's own actors under it: the gpu actor the XID named, with its
  // mailbox depth and the messages it handled.
  await page.goto(consoleUrl + '#/actors/' + encodeURIComponent(victim),
    { waitUntil: 'domcontentloaded' });
  await page.waitForFunction(() => {
    const row = document.querySelector('#actors tr[data-actor="gpu/GPU-browser-test"]');
    return row && row.dataset.kind === 'gpu' && /^\d+$/.test(row.children[2].textContent) &&
      Number(row.children[3].textContent) >= 1;
  }, wait);
  await page.screenshot({ path: join(artifacts, 'console-node-actors.png'), fullPage: true });
  console.log(`ok: ${nodes} tiles; ${victim} is "${state}"; screenshots in ${artifacts}`);
} catch (e) {
  if (!process.exitCode) console.error('FAIL: ' + e.message);
  process.exitCode = 1;
} finally {
  if (browser) await browser.close();
  demo.kill('SIGTERM');
}
