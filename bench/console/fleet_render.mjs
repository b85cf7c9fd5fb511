// Benchmark: the console's fleet page for a large simulated fleet in Debian's
// chromium (puppeteer-core from tests/console/browser/node_modules) against
// `vigil demo --serve --nodes N`: the time /api/v1/fleet takes (the fleet
// asks every node actor by message), and the time from navigation to every
// tile drawn, then a re-render (fetch + draw) in the page. Figures in
// BENCHMARKS.md. Usage: node bench/console/fleet_render.mjs VIGIL_BINARY [N]
import { spawn } from 'node:child_process';
import { mkdtempSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const here = dirname(fileURLToPath(import.meta.url));
const require = createRequire(join(here, '../../tests/console/browser/package.json'));
const puppeteer = require('puppeteer-core');
const [binary, n = '10000'] = process.argv.slice(2);
const nodes = Number(n);

const dir = mkdtempSync(join(tmpdir(), 'vigil-bench-'));
const demo = spawn(binary, ['demo', '--serve', '--nodes', n, '--journal',
  `sqlite:${dir}/journal.db`], { stdio: ['ignore', 'pipe', 'inherit'] });
let seen = '';
const consoleUrl = await new Promise((resolve, reject) => {
  demo.stdout.on('data', (c) => {
    seen += c;
    const m = seen.match(/console:\s+(\S+)/);
    if (m) resolve(m[1]);
  });
  demo.on('exit', (code) => reject(new Error(`demo exited ${code}`)));
});
const api = consoleUrl.replace('/console/', '/api/v1/fleet');
// Wait until the control plane has every node (the Node list).
for (;;) {
  const page = await (await fetch(api)).json();
  if (page.nodes.length === nodes) break;
  await new Promise((r) => setTimeout(r, 500));
}
const timings = [];
for (let i = 0; i < 5; ++i) {
  const t = performance.now();
  const body = await (await fetch(api)).text();
  timings.push([performance.now() - t, body.length]);
}
const browser = await puppeteer.launch({ executablePath: process.env.CHROMIUM ||
  '/usr/bin/chromium', headless: true, args: ['--no-sandbox', '--disable-gpu',
  '--disable-dev-shm-usage'] });
const page = await browser.newPage();
await page.setViewport({ width: 1600, height: 1000 });
const t0 = performance.now();
await page.goto(consoleUrl, { waitUntil: 'domcontentloaded' });
await page.waitForFunction((k) => document.querySelectorAll('.tile').length === k,
  { timeout: 120000, polling: 50 }, nodes);
const firstPaint = performance.now() - t0;
const rerender = [];
for (let i = 0; i < 3; ++i)
  rerender.push(await page.evaluate(async () => {
    const t = performance.now();
    await renderFleet(); // eslint-disable-line no-undef
    return performance.now() - t;
  }));
await browser.close();
demo.kill('SIGTERM');
const ms = (x) => x.toFixed(0) + ' ms';
console.log(JSON.stringify({ nodes,
  apiFleet: timings.map(([t, b]) => ({ time: ms(t), bytes: b })),
  navigationToAllTiles: ms(firstPaint), rerender: rerender.map(ms) }, null, 2));
