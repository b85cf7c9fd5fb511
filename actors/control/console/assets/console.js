// vigil console: plain JavaScript over the JSON API under /api/v1/ and its
// Server-Sent Events stream; no build step, nothing fetched from elsewhere.
'use strict';

const ui = { state: '', search: '', fleet: null, lastFleet: null, refreshDue: false,
  refreshAfter: false, rendering: null, livePaintDue: false, streamQuery: '', live: [],
  generation: 0 };
const $ = (id) => document.getElementById(id);
const esc = (s) => String(s ?? '').replace(/[&<>"']/g,
  (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' }[c]));

function headers() {
  const token = sessionStorage.getItem('vigil-token');
  return token ? { Authorization: 'Bearer ' + token } : {};
}

async function api(path) {
  const r = await fetch(path, { headers: headers() });
  if (r.status === 401) {
    $('auth').hidden = false;
    throw new Error('the console needs a token');
  }
  const body = await r.json();
  if (!r.ok) throw new Error(body.error || r.statusText);
  return body;
}

function setStatus(text) { $('status').textContent = text; }

// Each view is painted by the newest request for a view. A request begun
// earlier (a background refresh of the fleet when the operator clicked a
// node) may answer later; it must not paint over the newer view. Every
// render claims the view and paints only if nothing has claimed it since.
function claimView() {
  const mine = ++ui.generation;
  return () => mine === ui.generation;
}

// --- Fleet -----------------------------------------------------------------

const stateNames = ['fabric_incident', 'waiting_for_person', 'remediating', 'draining',
  'quarantined', 'cordoned_by_others', 'opted_out', 'healthy', 'unknown'];

function rate(now, before, key, seconds) {
  if (!before || seconds <= 0) return '–';
  return ((now - before) / seconds).toFixed(1);
}

async function renderFleet() {
  const current = claimView();
  const page = await api('/api/v1/fleet');
  if (!current()) return;
  const at = Date.now();
  const prev = ui.lastFleet;
  const seconds = prev ? (at - prev.at) / 1000 : 0;
  ui.lastFleet = { at, routed: page.fleet.routed, committed: page.journal.committed };
  const b = page.breaker || {};
  const use = Math.min(100, Math.round(100 * (b.utilisation || 0)));
  const counts = stateNames.filter((s) => page.counts[s] > 0 || s === ui.state)
    .map((s) => `<span class="count${ui.state === s ? ' active' : ''}" data-state="${s}">` +
      `<span class="swatch state-${s}"></span>${s.replace(/_/g, ' ')}: ` +
      `<b data-count="${s}">${page.counts[s]}</b></span>`).join('');
  const search = ui.search.toLowerCase();
  const shown = page.nodes.filter((n) => (!ui.state || n.state === ui.state) &&
    (!search || n.name.toLowerCase().includes(search)));
  const groups = new Map();
  for (const n of shown) {
    const key = n.pool || '(no pool label)';
    if (!groups.has(key)) groups.set(key, []);
    groups.get(key).push(n);
  }
  const compact = shown.length > 400 ? ' compact' : '';
  const tiles = [...groups.entries()].sort().map(([pool, nodes]) =>
    `<div class="group"><h3>${esc(pool)} <span class="muted">(${nodes.length})</span></h3>` +
    `<div class="tiles${compact}">` + nodes.map((n) =>
      `<a class="tile state-${n.state}" href="#/node/${encodeURIComponent(n.name)}" ` +
      `data-node="${esc(n.name)}" data-state="${n.state}" ` +
      `title="${esc(n.name)}: ${esc(n.state.replace(/_/g, ' '))}${n.detail ? ' – ' +
        esc(n.detail) : ''}">${esc(n.name)}</a>`).join('') + '</div></div>').join('');
  $('view').innerHTML =
    `<div class="figures">` +
    `<span class="figure">nodes <b id="node-count">${page.nodes.length}</b></span>` +
    `<span class="figure">breaker <span class="gauge${b.tripped ? ' tripped' : ''}">` +
    `<span style="width:${use}%"></span></span> ${use}% of its limit` +
    `${b.tripped ? ' <b>TRIPPED</b> ' + esc(b.reason) +
      ' <button id="breaker-reset">Reset the breaker</button>' : ''} ` +
    `(${b.cordonsInWindow ?? 0} cordons in window, ` +
    `<a href="#/breaker">${b.trips ?? 0} trips</a>)</span>` +
    `<span class="figure">journal lag <b>${(page.journal.lagSeconds ?? 0).toFixed(2)} s</b>` +
    `${page.journal.available ? '' : ' <b>UNAVAILABLE</b>'}</span>` +
    `<span class="figure">events/s <b>${rate(page.fleet.routed, prev && prev.routed,
      'routed', seconds)}</b></span>` +
    `<span class="figure">rows/s <b>${rate(page.journal.committed,
      prev && prev.committed, 'committed', seconds)}</b></span></div>` +
    `<div class="counts">${counts}</div>` +
    `<input id="search" placeholder="search nodes" value="${esc(ui.search)}">` +
    `<span class="muted"> ${shown.length} shown</span>${tiles}`;
  if ($('breaker-reset')) $('breaker-reset').addEventListener('click', resetBreaker);
  document.querySelectorAll('.count').forEach((c) => c.addEventListener('click', () => {
    ui.state = ui.state === c.dataset.state ? '' : c.dataset.state;
    renderFleet();
  }));
  const box = $('search');
  box.addEventListener('input', () => { ui.search = box.value; renderFleet().then(() => {
    const again = $('search');
    if (!again) return; // another view was asked for meanwhile
    again.focus();
    again.setSelectionRange(again.value.length, again.value.length);
  }); });
}

// The same journaled reset as `vigil breaker reset`: POST /v1/breaker/reset
// with the operator's token (a reader's token is refused there).
async function resetBreaker() {
  if (!confirm('Reset the circuit breaker? Quarantines it held will proceed.')) return;
  const r = await fetch('/v1/breaker/reset', { method: 'POST', headers: headers() });
  setStatus(r.ok ? 'breaker reset' : 'breaker reset refused: HTTP ' + r.status +
    (r.status === 401 || r.status === 403 ? ' (the operator token is needed)' : ''));
  show();
}

// The breaker's trips and resets, from the journal.
async function renderBreaker() {
  const current = claimView();
  const b = await api('/api/v1/breaker');
  const rows = [];
  for (const kind of ['breaker_tripped', 'breaker_reset'])
    rows.push(...(await api('/api/v1/journal?limit=10000&kind=' + kind)).rows);
  if (!current()) return;
  rows.sort((x, y) => y.seq - x.seq);
  $('view').innerHTML = `<h2>Circuit breaker <span class="badge state-${b.tripped
    ? 'quarantined' : 'healthy'}">${b.tripped ? 'tripped' : 'closed'}</span></h2>` +
    `<pre>${esc(JSON.stringify(b, null, 2))}</pre><h3>Trips and resets</h3>` +
    '<table id="trips"><thead><tr><th>seq</th><th>time</th><th>kind</th><th>what</th>' +
    '</tr></thead><tbody>' + rows.map((r) => `<tr><td>#${r.seq}</td><td>${esc(r.at)}` +
      `</td><td>${esc(r.kind)}</td><td>${esc(r.summary)}</td></tr>`).join('') +
    '</tbody></table>';
}

// --- Node ------------------------------------------------------------------

function relatedRows(timeline, seq) {
  // An event row and the decisions that name its id ("why is this node
  // cordoned?"): the rows whose body mentions the event's id.
  const cause = timeline.find((r) => r.seq === seq);
  const id = cause && cause.kind === 'event' && cause.body && cause.body.id;
  if (!id) return new Set([seq]);
  return new Set(timeline.filter((r) => r.seq === seq ||
    JSON.stringify(r.body).includes(id)).map((r) => r.seq));
}

// A node's NIC ports: what the agent last said of each (its nic_port
// actor's row: state, role, link_downed) and whether a fabric incident
// covers its DOWN (the node's own record).
function nicPorts(n, actors) {
  const reports = new Map(actors.filter((a) => a.kind === 'nic_port')
    .map((a) => [a.port, a]));
  const rows = (n.nicPorts || []).map((p) => {
    const r = reports.get(p.port) || {};
    return `<tr data-port="${esc(p.port)}"><td>${esc(p.port)}</td>` +
      `<td>${esc(r.state || '–')}${r.physState ? ' / ' + esc(r.physState) : ''}` +
      `${p.fabricDown ? ' <b>(down in a fabric incident)</b>' : ''}</td>` +
      `<td>${esc(r.role || '–')}</td><td>${esc(r.linkLayer || '–')}</td>` +
      `<td>${r.linkDowned ?? '–'} (${r.linkDownsInWindow ?? 0} in the flap window)</td>` +
      `<td>${esc(r.downSince || '–')}</td><td>${r.mailboxDepth ?? '–'}</td></tr>`;
  }).join('');
  return rows ? '<table id="nic-ports"><thead><tr><th>port</th><th>state</th>' +
    '<th>role</th><th>link layer</th><th>link_downed rises</th><th>down since</th>' +
    `<th>mailbox</th></tr></thead><tbody>${rows}</tbody></table>`
    : '<p class="muted">none with events (a port gets an actor with its first event)</p>';
}

// The drain in progress, pod by pod, from its drain actor's row: a pod in
// retry_wait had its eviction refused (a PodDisruptionBudget's 429, or an
// error) and is asked again.
function drainPods(d) {
  if (!d) return '';
  const pods = (d.pods || []).map((p) => `<tr data-pod="${esc(p.namespace)}/` +
    `${esc(p.pod)}"><td>${esc(p.namespace)}/${esc(p.pod)}</td><td>${esc(p.mode)}</td>` +
    `<td>${esc(p.state.replace(/_/g, ' '))}${p.state === 'retry_wait'
      ? ' (eviction refused: waiting on a PodDisruptionBudget or an error)' : ''}</td>` +
    `<td>${p.pdbProtected ? 'yes' : 'no'}</td></tr>`).join('');
  return `<p>drain <b>${esc(d.phase)}</b> ${esc(d.scope || '')}: ${esc(d.why || '')}; ` +
    `${d.evictions} evicted, ${d.waitingToRetry ?? 0} waiting to retry, ` +
    `${d.skipped ?? 0} skipped</p>` + (pods ? '<table id="drain-pods"><thead><tr>' +
    '<th>pod</th><th>mode</th><th>state</th><th>under a PDB</th></tr></thead>' +
    `<tbody>${pods}</tbody></table>` : '');
}

async function renderNode(name, focus) {
  const current = claimView();
  const page = await api('/api/v1/nodes/' + encodeURIComponent(name));
  if (!current()) return;
  const n = page.node;
  const rem = n.remediation || {};
  const related = focus ? relatedRows(page.timeline, focus) : new Set();
  const active = (n.active || []).map((a) => `<tr><td>${esc(a.check)}</td>` +
    `<td>${esc(a.entityType)}=${esc(a.entityValue)}</td><td>${esc(a.rule)}</td></tr>`)
    .join('') || '<tr><td colspan="3" class="muted">none</td></tr>';
  const rows = page.timeline.slice().reverse().map((r) =>
    `<tr class="${r.seq === focus ? 'cause' : related.has(r.seq) ? 'related' : ''}" ` +
    `data-seq="${r.seq}" data-kind="${esc(r.kind)}"><td><a href="#/node/` +
    `${encodeURIComponent(name)}/${r.seq}">#${r.seq}</a></td><td>${esc(r.at)}</td>` +
    `<td>${esc(r.kind)}</td><td>${esc(r.summary)}</td></tr>`).join('');
  const chosen = focus && page.timeline.find((r) => r.seq === focus);
  $('view').innerHTML =
    `<h2>${esc(name)} <span class="badge state-${page.state}" id="node-state">` +
    `${esc(page.state.replace(/_/g, ' '))}</span> <span class="muted">` +
    `${esc(page.detail)}</span></h2>` +
    `<div class="figures"><span class="figure">pool <b>${esc(n.pool || '–')}</b></span>` +
    `<span class="figure">cordoned <b>${n.unschedulable ? 'yes' : 'no'}` +
    `${n.unschedulable && !n.cordonOwned ? ' (not by vigil)' : ''}</b></span>` +
    `<span class="figure">GPU actors <b>${n.gpuActors}</b></span>` +
    `<span class="figure">NIC port actors <b>${n.nicPortActors}</b></span>` +
    `<span class="figure">mailbox <b>${n.mailboxDepth ?? '–'}</b></span>` +
    `${n.agentGpus ? `<span class="figure">GPUs <b>${esc(n.agentGpus.product || '')}` +
      ` ×${n.agentGpus.count ?? '?'}, ${n.agentGpus.nvswitches ?? '?'} NVSwitches` +
      `</b></span>` : ''}</div>` +
    `<h3>Active events</h3><table><thead><tr><th>check</th><th>entity</th>` +
    `<th>rule</th></tr></thead><tbody>${active}</tbody></table>` +
    `<h3>GPUs</h3><table id="gpus"><thead><tr><th>index</th><th>UUID</th><th>PCI</th>` +
    `<th>active events</th><th>held by</th></tr></thead><tbody>${(n.gpus || []).map((g) =>
      `<tr data-gpu="${esc(g.uuid)}"><td>${g.index ?? '–'}</td><td>${esc(g.uuid)}</td>` +
      `<td>${esc(g.pci || '–')}</td><td>${g.activeEvents}` +
      `${g.lastCheck ? ' (' + esc(g.lastCheck) + ')' : ''}</td><td>` +
      `${esc(g.pods.join(', ') || '–')}</td></tr>`).join('') ||
      '<tr><td colspan="5" class="muted">none known yet (the agent reports its ' +
      'GPUs with its heartbeat; a GPU with an event gets an actor)</td></tr>'}</tbody></table>` +
    `<h3>NIC ports</h3>${nicPorts(n, page.actors || [])}` +
    `<h3>Drain and remediation</h3><div class="figures">` +
    `<span class="figure">drain <b>${esc(n.draining || 'none')}</b></span>` +
    `<span class="figure">last drained <b>${esc(n.drainedKey || '–')}</b></span>` +
    `<span class="figure">remediation <b>${esc(rem.inFlight || 'none')}</b> ` +
    `${esc(rem.kind || '')} ${esc(rem.cr || '')} step <b>${esc(rem.step || '–')}</b></span>` +
    (rem.inFlight ? `<span class="figure">attempt <b>${rem.attempts ?? 0}</b> of ` +
      `${esc(rem.action || '')} in its window; next rung <b>${esc(rem.nextRung || '–')}` +
      `</b>${rem.deferredUntil ? ' (cooldown until ' + esc(rem.deferredUntil) + ')' : ''}` +
      '</span>' : '') +
    `<span class="figure">waiting <b>${esc((rem.waiting || []).join(', ') || 'none')}` +
    `</b></span>${n.handedToOperator ? `<span class="figure">needs a person: <b>` +
      `${esc(n.handedToOperator)}</b></span>` : ''}</div>` +
    drainPods((page.actors || []).find((a) => a.kind === 'drain')) +
    `<h3>Trace <button id="trace-start">follow its messages for 10 s</button> ` +
    `<span class="muted" id="trace-status"></span></h3><table id="trace"><thead><tr>` +
    `<th>#</th><th>message</th><th>from</th><th>time spent</th></tr></thead>` +
    `<tbody></tbody></table>` +
    `<h3>Timeline <span class="muted">(newest first; pick a row to see what it ` +
    `caused)</span></h3><form id="between">between <input name="from" ` +
    `placeholder="2026-11-26T04:00:00Z"> and <input name="to" placeholder="now"> ` +
    `<button type="submit">Show</button></form><table id="timeline"><thead><tr><th>seq</th><th>time</th>` +
    `<th>kind</th><th>what</th></tr></thead><tbody>${rows}</tbody></table>` +
    (chosen ? `<h3>Row #${chosen.seq}</h3><pre>${esc(JSON.stringify(chosen.body, null,
      2))}</pre>` : '');
  $('trace-start').addEventListener('click', () => traceNode(name));
  $('between').addEventListener('submit', async (e) => {
    e.preventDefault();
    const query = new URLSearchParams([['node', name], ['limit', '10000'],
      ...[...new FormData(e.target)].filter(([, v]) => v)]);
    ui.pinned = true; // no refresh over what was asked for, until the view changes
    const asked = claimView();
    const found = await api('/api/v1/journal?' + query);
    if (!asked()) return;
    document.querySelector('#timeline tbody').innerHTML = found.rows.slice().reverse()
      .map((r) => `<tr data-seq="${r.seq}" data-kind="${esc(r.kind)}"><td>#${r.seq}` +
        `</td><td>${esc(r.at)}</td><td>${esc(r.kind)}</td><td>${esc(r.summary)}</td>` +
        '</tr>').join('');
  });
}

// Trace (GET /api/v1/trace): the node actor's next messages, live, for a
// bounded time, as Erlang Observer's tracer shows them.
async function traceNode(name) {
  const status = $('trace-status');
  const body = document.querySelector('#trace tbody');
  status.textContent = 'tracing… (the page holds still meanwhile)';
  body.innerHTML = '';
  const pinned = ui.pinned;
  ui.pinned = true; // a refresh would redraw the page under the trace
  try { await readTrace(name, status, body); } finally { ui.pinned = pinned; }
}

async function readTrace(name, status, body) {
  const r = await fetch('/api/v1/trace?seconds=10&max=500&node=' +
    encodeURIComponent(name), { headers: headers() });
  if (!r.ok) { status.textContent = 'trace: HTTP ' + r.status; return; }
  const reader = r.body.getReader();
  const decoder = new TextDecoder();
  let buffer = '';
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    buffer += decoder.decode(value, { stream: true });
    let end;
    while ((end = buffer.indexOf('\n\n')) >= 0) {
      const block = buffer.slice(0, end);
      buffer = buffer.slice(end + 2);
      const event = (block.match(/^event: (.*)$/m) || [])[1];
      const data = (block.match(/^data: (.*)$/m) || [])[1];
      if (!data) continue;
      const d = JSON.parse(data);
      if (event === 'end') {
        status.textContent = `ended: ${d.why}` + (d.skipped ? ` (${d.skipped} skipped)` : '');
      } else if (body) {
        body.insertAdjacentHTML('beforeend', `<tr><td>${d.seq}</td><td>${esc(d.type)}` +
          `</td><td>${esc(d.sender)}</td><td>${d.micros.toFixed(1)} µs</td></tr>`);
      }
    }
  }
}

// --- Actors ------------------------------------------------------------------

// With `node`, the actors that node supervises (gpu, nic_port, drain) are
// listed too, under it.
async function renderActors(node) {
  const current = claimView();
  const page = await api('/api/v1/actors' + (node ? '?node=' + encodeURIComponent(node)
    : ''));
  if (!current()) return;
  const key = ui.actorSort || 'mailboxDepth';
  const value = (a) => key === 'slowest' ? (a.slowest?.p99Micros ?? 0) : (a[key] ?? 0);
  const rows = page.actors.slice().sort((a, b) => key === 'name'
    ? a.name.localeCompare(b.name) : value(b) - value(a));
  const detail = (a) => typeof a.detail === 'string' ? a.detail
    : Object.entries(a.detail || {}).filter(([, v]) => typeof v !== 'object')
      .map(([k, v]) => `${k} ${v}`).join(', ');
  const micros = (us) => us >= 1000 ? `${(us / 1000).toFixed(1)} ms` : `${us.toFixed(1)} µs`;
  // Handling time per message type, as Observer's process info shows it.
  const types = (a) => (a.messageTypes || []).length ? `<details><summary>` +
    `${a.messageTypes.length} types</summary>${a.messageTypes.map((t) => `${esc(t.type)} ` +
    `${t.count} (p50 ${micros(t.p50Micros)}, p99 ${micros(t.p99Micros)})`).join('<br>')}` +
    '</details>' : '';
  const here = node ? '#/actors/' + encodeURIComponent(node) : '#/actors';
  $('view').innerHTML = `<h2>Actors <span class="muted">(${rows.length}; sorted by ` +
    `${esc(key)}${node ? '; with the actors of ' + esc(node) : ''})</span></h2>` +
    '<table id="actors"><thead><tr>' +
    ['name', 'parent', 'mailboxDepth', 'handled', 'perSecond', 'slowest', 'restarts',
      'gpuActors', 'nicPortActors']
      .map((k) => `<th><a href="${here}" data-sort="${k}">${k}</a></th>`).join('') +
    '<th>state / figures</th></tr></thead><tbody>' + rows.map((a) =>
      `<tr data-actor="${esc(a.name)}" data-kind="${esc(a.kind)}"><td>${a.kind === 'node'
        ? `<a href="#/node/${encodeURIComponent(a.name.slice(5))}">${esc(a.name)}</a> ` +
          `<a class="muted" href="#/actors/${encodeURIComponent(a.name.slice(5))}">` +
          'its actors</a>' : esc(a.name)}</td>` +
      `<td>${esc(a.parent)}</td><td>${a.mailboxDepth}</td><td>${a.handled ?? ''}</td>` +
      `<td>${a.perSecond !== undefined ? a.perSecond.toFixed(1) : ''}</td>` +
      `<td>${a.slowest ? esc(a.slowest.type) + ' ' + micros(a.slowest.p99Micros) : ''}` +
      `${types(a)}</td><td title="${esc(a.lastCrash || '')}">${a.restarts ?? ''}</td>` +
      `<td>${a.gpuActors ?? ''}</td>` +
      `<td>${a.nicPortActors ?? ''}</td><td>${esc(a.state ? a.state.replace(/_/g, ' ') +
        (a.detail ? ': ' + a.detail : '') : detail(a))}</td></tr>`).join('') +
    '</tbody></table>';
  document.querySelectorAll('[data-sort]').forEach((h) => h.addEventListener('click',
    (e) => { e.preventDefault(); ui.actorSort = h.dataset.sort; renderActors(node); }));
}

// --- History -------------------------------------------------------------------

// The fleet at a moment, rebuilt from the journal as `vigil replay --at` does.
async function renderHistory(at) {
  const when = at || new Date().toISOString().slice(0, 19) + 'Z';
  const current = claimView();
  const page = await api('/api/v1/history?at=' + encodeURIComponent(when));
  if (!current()) return;
  const nodes = page.nodes.map((n) => `<tr data-node="${esc(n.name)}"><td><a href=` +
    `"#/node/${encodeURIComponent(n.name)}">${esc(n.name)}</a></td>` +
    `<td>${n.activeEvents.length}</td><td>${esc(n.quarantine ? JSON.stringify(
      n.quarantine).slice(0, 120) : '')}</td><td>${esc(n.remediation ? JSON.stringify(
      n.remediation).slice(0, 120) : '')}</td><td><details><summary>` +
    `${n.timeline.length} rows</summary><pre>${esc(n.timeline.join('\n'))}</pre>` +
    `</details></td></tr>`).join('');
  $('view').innerHTML = `<h2>The fleet at <input id="at" value="${esc(when)}" ` +
    `size="24"> <button id="at-go">Show</button></h2>` +
    `<p class="muted">${page.rowsRead} journal rows up to then` +
    `${page.complete ? '' : ' (only the first ones: narrow it with a node)'}; ` +
    `${page.fabricIncidents.length} fabric incidents.</p><table id="history">` +
    `<thead><tr><th>node</th><th>active events</th><th>quarantine</th>` +
    `<th>remediation</th><th>timeline</th></tr></thead><tbody>${nodes}</tbody></table>`;
  $('at-go').addEventListener('click', () => {
    location.hash = '#/history/' + encodeURIComponent($('at').value);
  });
}

// --- Live stream -------------------------------------------------------------

// Rows are painted once per frame, however many came in it: a burst of
// thousands costs one table, not one per row.
function showLive(row) {
  ui.live.unshift(row);
  ui.live.length = Math.min(ui.live.length, 100);
  if (ui.livePaintDue) return;
  ui.livePaintDue = true;
  requestAnimationFrame(paintLive);
}

function paintLive() {
  ui.livePaintDue = false;
  $('live-rows').innerHTML = ui.live.map((r) => `<tr data-seq="${r.seq}"><td>#${r.seq}` +
    `</td><td>${esc(r.at)}</td><td><a href="#/node/${encodeURIComponent(r.node)}">` +
    `${esc(r.node)}</a></td><td>${esc(r.kind)}</td><td>${esc(r.summary)}</td></tr>`).join('');
}

function dispatch(block) {
  let event = 'message';
  let data = '';
  for (const line of block.split('\n')) {
    if (line.startsWith('event:')) event = line.slice(6).trim();
    else if (line.startsWith('data:')) data += line.slice(5).trim();
  }
  if (!data) return;
  const payload = JSON.parse(data);
  if (event === 'row') {
    showLive(payload);
    scheduleRefresh();
  } else if (event === 'skipped') {
    $('live-skipped').textContent = `(${payload.skipped} rows skipped: this page fell ` +
      'behind)';
    scheduleRefresh();
  }
}

// fetch() rather than EventSource, so the stream sends the same token.
async function follow() {
  const query = ui.streamQuery;
  try {
    const r = await fetch('/api/v1/stream' + (query ? '?' + query : ''),
      { headers: headers() });
    if (!r.ok) throw new Error('stream: HTTP ' + r.status);
    setStatus('live');
    const reader = r.body.getReader();
    const decoder = new TextDecoder();
    let buffer = '';
    for (;;) {
      const { value, done } = await reader.read();
      if (done || query !== ui.streamQuery) break;
      buffer += decoder.decode(value, { stream: true });
      let end;
      while ((end = buffer.indexOf('\n\n')) >= 0) {
        dispatch(buffer.slice(0, end));
        buffer = buffer.slice(end + 2);
      }
    }
    reader.cancel();
  } catch (e) {
    setStatus('stream lost: ' + e.message + '; retrying');
  }
  setTimeout(follow, query !== ui.streamQuery ? 0 : 2000);
}

// --- Routing and refresh ----------------------------------------------------

function render() {
  const hash = decodeURIComponent(location.hash.slice(1) || '/');
  const node = hash.match(/^\/node\/([^/]+)(?:\/(\d+))?$/);
  const history = hash.match(/^\/history(?:\/(.+))?$/);
  const actors = hash.match(/^\/actors(?:\/([^/]+))?$/);
  const shown = node ? renderNode(node[1], node[2] ? Number(node[2]) : 0)
    : history ? renderHistory(history[1])
      : actors ? renderActors(actors[1])
        : hash === '/breaker' ? renderBreaker() : renderFleet();
  return shown.then(() => setStatus($('status').textContent === 'connecting…'
    ? 'ready' : $('status').textContent)).catch((e) => setStatus(e.message));
}

function frozen() { return ui.pinned || location.hash.startsWith('#/history'); }

// Every render goes through show(). A refresh (a row from the stream, the
// 10 s tick) never starts while a render is in flight, but once it is done:
// each render claims the view, so under a steady stream refreshes begun
// every 500 ms would each cancel the one before, and at 10,000 nodes (whose
// fetch alone takes longer than that) none would ever paint.
function show() {
  const shown = render();
  ui.rendering = shown;
  shown.finally(() => {
    if (ui.rendering !== shown) return;
    ui.rendering = null;
    if (ui.refreshAfter) {
      ui.refreshAfter = false;
      scheduleRefresh();
    }
  });
}

function refresh() {
  if (frozen()) return;
  if (ui.rendering) ui.refreshAfter = true;
  else show();
}

function scheduleRefresh() {
  if (ui.refreshDue || frozen()) return;
  ui.refreshDue = true;
  setTimeout(() => { ui.refreshDue = false; refresh(); }, 500);
}

window.addEventListener('hashchange', () => { ui.pinned = false; show(); });
$('auth-form').addEventListener('submit', (e) => {
  e.preventDefault();
  sessionStorage.setItem('vigil-token', $('auth-token').value);
  $('auth').hidden = true;
  show();
});
$('live-filter').addEventListener('submit', (e) => {
  e.preventDefault();
  ui.streamQuery = new URLSearchParams([...new FormData(e.target)]
    .filter(([, v]) => v)).toString();
  ui.live = [];
  $('live-rows').innerHTML = '';
});
show();
follow();
setInterval(refresh, 10000);
