// Usher dashboard: reads /v1 and follows /v1/events. Plain JavaScript, no
// build step. Every piece of text from the server goes into the page through
// textContent or an attribute value (never parsed as markup), so a visitor's
// "<script>" shows as text.
'use strict';
(() => {
  const POLL_SECONDS = 2;      // state polling while the event stream is down
  const SYNC_SECONDS = 1;      // summary check while live (changes without events)
  const DEBOUNCE_MS = 120;     // events for one resource within this re-fetch once
  const WAITING_ROWS = 10;     // first waiting visitors / queued items shown
  const ITEM_ROWS = 5;         // pipeline items and machine history shown
  const POOL_TILES = 1000;     // a pool's elements shown
  const MAX_CARDS = 1000;      // resources of one kind shown
  const TOKEN_KEY = 'usher.token';

  const KINDS = [
    {kind: 'queue', plural: 'queues', render: renderQueue},
    {kind: 'window', plural: 'windows', render: renderWindow},
    {kind: 'pool', plural: 'pools', render: renderPool},
    {kind: 'pipeline', plural: 'pipelines', render: renderPipeline},
    {kind: 'machine', plural: 'machines', render: renderMachine},
  ];
  const byKind = Object.fromEntries(KINDS.map((k) => [k.kind, k]));

  const $ = (id) => document.getElementById(id);
  let token = sessionStorage.getItem(TOKEN_KEY);
  let locked = false;          // waiting for a token
  let lastEventId = null;
  let streamAbort = null;
  let retryMs = 1000;
  let retryTimer = null;
  let retrySeconds = 1;        // the delay the banner announces
  let unreachable = false;     // the last poll did not reach the server
  let pollTimer = null;
  let syncTimer = null;
  const loaded = new Set();    // kinds whose list and states have been read once
  const summaries = {};        // kind → Map(name → summary JSON)
  const pending = new Map();   // "kind/name" → debounce timer
  const seqs = new Map();      // "kind/name" → latest request number
  // Resources an event named since the last summary check: the next check
  // re-reads them even when their summary looks the same as before (a grant
  // and a new waiting visitor can leave the same counts).
  const touched = new Set();   // "kind/name"

  class Unauthorized extends Error {}

  // ---- DOM helpers -------------------------------------------------------

  function el(tag, attrs, ...children) {
    const e = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (v === null || v === undefined || v === false) continue;
      if (k === 'class') e.className = v;
      else e.setAttribute(k, v === true ? '' : String(v));
    }
    append(e, children);
    return e;
  }
  function append(parent, children) {
    for (const c of children.flat(Infinity)) {
      if (c === null || c === undefined || c === false) continue;
      parent.append(c instanceof Node ? c : document.createTextNode(String(c)));
    }
  }
  const SVG = 'http://www.w3.org/2000/svg';
  function svg(tag, attrs, ...children) {
    const e = document.createElementNS(SVG, tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (v !== null && v !== undefined) e.setAttribute(k, String(v));
    }
    append(e, children);
    return e;
  }

  // ---- formatting --------------------------------------------------------

  function duration(seconds) {
    const s = Math.max(0, Math.floor(seconds));
    const two = (big, bigUnit, small, smallUnit) => big + bigUnit + (small ? ' ' + small + smallUnit : '');
    if (s < 60) return s + 's';
    if (s < 3600) return two(Math.floor(s / 60), 'm', s % 60, 's');
    if (s < 86400) return two(Math.floor(s / 3600), 'h', Math.floor((s % 3600) / 60), 'm');
    return two(Math.floor(s / 86400), 'd', Math.floor((s % 86400) / 3600), 'h');
  }
  // A fence or version (16 digits: a creation time in µs plus a counter) in
  // short: its last 6 digits, which tell neighbours apart; the whole value
  // on hover (title) and in data-full.
  function serial(value, cls) {
    if (value === null || value === undefined) return '—';
    const text = String(value);
    return el('span', {class: cls, title: text, 'data-full': text}, text.length > 8 ? '…' + text.slice(-6) : text);
  }
  function compact(value, max = 80) {
    if (value === null || value === undefined) return '';
    const text = typeof value === 'string' ? value : JSON.stringify(value);
    return text.length > max ? text.slice(0, max - 1) + '…' : text;
  }
  // A live duration: since a time ("held for") or until one ("expires in").
  function since(at) {
    return at ? el('span', {class: 'tick', 'data-since': at}, tickText('since', at)) : '—';
  }
  function until(at, none = '—') {
    return at ? el('span', {class: 'tick', 'data-until': at}, tickText('until', at)) : none;
  }
  function tickText(mode, at) {
    const delta = (Date.parse(at) - Date.now()) / 1000;
    if (mode === 'since') return duration(-delta);
    return delta <= 0 ? 'due' : duration(delta);
  }
  function tick() {
    for (const e of document.querySelectorAll('[data-since]')) e.textContent = tickText('since', e.dataset.since);
    for (const e of document.querySelectorAll('[data-until]')) e.textContent = tickText('until', e.dataset.until);
  }

  // ---- card pieces -------------------------------------------------------

  function head(name, sub) {
    return el('header', {class: 'card-head'}, el('h3', {}, name), el('span', {class: 'sub'}, sub));
  }
  function stats(pairs) {
    return el('dl', {class: 'stats'}, pairs.map(([label, value, key, tone]) =>
      el('div', {class: 'stat' + (tone ? ' ' + tone : ''), 'data-stat': key}, el('dt', {}, label), el('dd', {}, value))));
  }
  function totals(counts, keys) {
    return el('p', {class: 'totals'}, keys.filter((k) => counts[k] !== undefined)
      .map((k) => el('span', {'data-total': k}, k.replace(/_total$/, '').replace(/_/g, ' ') + ' ' + counts[k])));
  }
  function table(caption, columns, rows, emptyText, attrs) {
    if (!rows.length) return el('div', {class: 'block inline'}, el('h4', {}, caption), el('p', {class: 'none'}, emptyText));
    return el('div', {class: 'block'}, el('h4', {}, caption),
      el('div', {class: 'scroll'}, el('table', attrs || {},
        el('thead', {}, el('tr', {}, columns.map((c) => el('th', {scope: 'col'}, c)))),
        el('tbody', {}, rows))));
  }
  // "1 handover", "2 handovers".
  function nounCount(n, noun) { return n + ' ' + noun + (n === 1 ? '' : 's'); }
  function more(shown, total, what) {
    return total > shown ? el('p', {class: 'more'}, '+ ' + (total - shown) + ' more ' + what) : null;
  }
  function keyAction(v) {
    if (v.key === null && v.action === null) return '—';
    return [v.key !== null ? el('span', {class: 'key'}, v.key) : null,
      v.action !== null ? el('span', {class: 'action'}, v.action) : null];
  }
  function withPayload(id, payload) {
    return [el('span', {class: 'id'}, id), payload !== null && payload !== undefined
      ? el('code', {class: 'payload'}, compact(payload)) : null];
  }

  // ---- queues --------------------------------------------------------------

  // Why a waiting visitor has no estimate (estimated_wait_reason).
  const WAIT_UNKNOWN = {
    closed: 'capacity 0: nobody is granted',
    no_hold_limit: 'holders have no expiry and have held longer than usual',
  };

  function renderQueue(q) {
    const c = q.counts, cfg = q.config;
    const holders = q.holding.map((v) => el('tr', {'data-id': v.id},
      el('td', {}, withPayload(v.id, v.payload), el('span', {class: 'fence-line'}, 'fence ', serial(v.fence, 'fence'))), el('td', {}, keyAction(v)),
      el('td', {class: 'num'}, since(v.granted_at)), el('td', {class: 'num'}, until(v.expires_at, 'no limit'))));
    const waiting = q.waiting.slice(0, WAITING_ROWS).map((v) => el('tr', {'data-id': v.id},
      el('td', {class: 'num'}, v.position), el('td', {}, withPayload(v.id, v.payload)), el('td', {}, keyAction(v)),
      v.estimated_wait_seconds === null
        ? el('td', {class: 'num', title: WAIT_UNKNOWN[v.estimated_wait_reason] || ''}, '—')
        : el('td', {class: 'num'}, '~' + duration(v.estimated_wait_seconds)),
      el('td', {class: 'num'}, since(v.created_at))));
    const delayed = (q.delayed || []).slice(0, WAITING_ROWS).map((v) => el('tr', {'data-id': v.id},
      el('td', {}, withPayload(v.id, v.payload)), el('td', {}, keyAction(v)), el('td', {class: 'num'}, v.priority),
      el('td', {class: 'num'}, since(v.created_at))));
    return [
      head(q.name, 'capacity ' + cfg.capacity + ' · hold ' + (cfg.hold_seconds ? cfg.hold_seconds + ' s' : 'no limit')
        + (cfg.dedup !== 'off' ? ' · dedup ' + cfg.dedup : '')),
      stats([['capacity', cfg.capacity, 'capacity'], ['holding', c.holding, 'holding', c.holding >= cfg.capacity && cfg.capacity > 0 ? 'full' : ''],
        ['waiting', c.waiting, 'waiting'], ['delayed', c.delayed, 'delayed']]),
      table('Holding', ['id · fence', 'key / action', 'held for', 'expires in'], holders, 'none', {class: 'holders'}),
      table('Waiting', ['#', 'id', 'key / action', 'est. wait', 'waiting'], waiting, 'none', {class: 'waiting'}),
      more(waiting.length, c.waiting, 'waiting'),
      // Only while there are any: most queues never delay.
      c.delayed ? table('Delayed, next to wait first', ['id', 'key / action', 'priority', 'delayed for'], delayed, 'none',
        {class: 'delayed'}) : null,
      c.delayed ? more(delayed.length, c.delayed, 'delayed') : null,
      totals(c, ['enqueued_total', 'granted_total', 'completed_total', 'released_total', 'expired_total', 'cancelled_total', 'merged_total']),
    ];
  }

  // ---- windows -------------------------------------------------------------

  function renderWindow(w) {
    const c = w.counts, s = w.showing;
    const showing = s
      ? el('div', {class: 'showing', 'data-id': s.id},
        el('p', {class: 'title'}, s.title !== null ? s.title : s.id),
        s.message !== null ? el('p', {class: 'message'}, s.message) : null,
        el('p', {class: 'meta'}, el('span', {class: 'id'}, s.id), ' · shown for ', since(s.shown_at),
          ' · ', s.expires_at ? ['expires in ', until(s.expires_at)] : 'until dismissed', ' · fence ', serial(s.fence, 'fence')))
      : el('div', {class: 'showing empty-slot'}, el('p', {class: 'none'}, 'Nothing showing.'));
    const queued = w.queued.slice(0, WAITING_ROWS).map((i) => el('tr', {'data-id': i.id},
      el('td', {class: 'num'}, i.position),
      el('td', {}, el('span', {class: 'title'}, i.title !== null ? i.title : i.id), i.message !== null ? el('span', {class: 'message'}, compact(i.message, 60)) : null),
      el('td', {class: 'id'}, i.id), el('td', {class: 'num'}, i.priority), el('td', {class: 'num'}, since(i.created_at))));
    const cfg = w.config;
    return [
      head(w.name, 'display ' + (cfg.display_seconds ? cfg.display_seconds + ' s' : 'until dismissed') + ' · dedup ' + cfg.dedup),
      stats([['showing', c.showing, 'showing'], ['queued', c.queued, 'queued'], ['delayed', c.delayed, 'delayed'], ['shown', c.shown_total, 'shown_total']]),
      el('div', {class: 'block'}, el('h4', {}, 'Showing'), showing),
      table('Queued', ['#', 'title', 'id', 'priority', 'queued'], queued, 'none', {class: 'queued'}),
      more(queued.length, c.queued, 'queued'),
      totals(c, ['received_total', 'dismissed_total', 'expired_total', 'merged_total']),
    ];
  }

  // ---- pools ---------------------------------------------------------------

  function renderPool(p) {
    const c = p.counts;
    const tiles = p.elements.map((e) => {
      const lease = e.lease;
      return el('li', {class: 'tile ' + (lease ? 'leased' : 'free'), 'data-element': e.id, 'data-status': e.status},
        el('span', {class: 'tile-id'}, e.id),
        el('span', {class: 'tile-status'}, lease ? 'leased' : 'free'),
        lease ? el('span', {class: 'holder'}, lease.holder !== null ? lease.holder : lease.id) : null,
        lease ? el('span', {class: 'tile-exp'}, lease.expires_at ? ['expires in ', until(lease.expires_at)] : 'no expiry') : null,
        !lease && e.last_holder ? el('span', {class: 'tile-last', 'data-stat': 'last_holder'}, 'last: ' + e.last_holder) : null,
        e.lease_transitions ? el('span', {class: 'tile-moves', 'data-stat': 'lease_transitions', title: 'times the element changed holder'}, nounCount(e.lease_transitions, 'handover')) : null,
        e.data !== null ? el('code', {class: 'payload'}, compact(e.data, 40)) : null);
    });
    const waiting = (p.waiting_leases || []).slice(0, WAITING_ROWS).map((l, i) => el('tr', {'data-id': l.id},
      el('td', {class: 'num'}, i + 1), el('td', {}, el('span', {class: 'id'}, l.id)),
      el('td', {}, l.holder !== null ? el('span', {class: 'holder'}, l.holder) : '—')));
    const cfg = p.config;
    return [
      head(p.name, 'lease ' + (cfg.lease_seconds ? cfg.lease_seconds + ' s' : 'no expiry')
        + (cfg.grow ? ' · grows to ' + cfg.grow.max_size : '')),
      stats([['size', p.size, 'size'], ['free', c.available, 'available', c.available === 0 && p.size > 0 ? 'full' : ''],
        ['leased', c.leased, 'leased'], ['waiting', c.waiting, 'waiting']]),
      tiles.length ? el('ul', {class: 'tiles'}, tiles) : el('p', {class: 'none'}, 'No elements yet.'),
      more(tiles.length, p.size, 'elements'),
      // Only while fetches wait: the line, first in line first.
      c.waiting ? table('Waiting for an element', ['#', 'lease', 'holder'], waiting, 'none', {class: 'waiting'}) : null,
      c.waiting ? more(waiting.length, c.waiting, 'waiting') : null,
      totals(p.counts, ['fetched_total', 'recycled_total', 'expired_total', 'revoked_total', 'grown_total']),
    ];
  }

  // ---- pipelines -----------------------------------------------------------

  function describeFilter(f) {
    const parts = [f.action];
    if (f.field !== undefined && f.field !== null) parts.push(f.field === '' ? '(payload)' : f.field);
    if (f.value !== undefined) parts.push('= ' + compact(JSON.stringify(f.value), 40));
    if (f.when) {
      const w = f.when;
      const op = ['equals', 'not_equals', 'in', 'exists'].find((o) => w[o] !== undefined);
      parts.push('when ' + w.field + (op ? ' ' + op.replace('_', ' ') + ' ' + compact(JSON.stringify(w[op]), 40) : ''));
    }
    return parts.join(' ');
  }
  function describeSource(s) {
    if (!s) return el('p', {class: 'none'}, 'none');
    const bits = [s.kind + ' ' + (s.path || s.url || ''), 'pulled ' + s.pulled_total, 'errors ' + s.errors_total];
    if (s.exhausted) bits.push('exhausted');
    return el('div', {class: 'source'}, el('p', {}, bits.join(' · ')),
      s.last_error ? el('p', {class: 'error-text'}, 'last error: ' + compact(s.last_error, 120)) : null,
      s.next_retry_at ? el('p', {class: 'meta'}, 'next try in ', until(s.next_retry_at)) : null);
  }
  function meter(pct, label) {
    const fill = el('span', {class: 'meter-fill'});
    fill.style.width = pct + '%'; // CSSOM, which the policy allows (a style attribute it would not)
    return el('div', {class: 'meter', role: 'img', 'aria-label': label}, fill);
  }
  function renderPipeline(p) {
    const c = p.counts;
    const filters = [...p.filters].sort((a, b) => b.priority - a.priority || (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
    const used = c.ready + c.in_flight + c.delayed;
    const pct = p.capacity ? Math.min(100, Math.round((used / p.capacity) * 100)) : 0;
    const items = (p.items || []).slice(0, ITEM_ROWS).map((i) => el('tr', {'data-id': i.id},
      el('td', {}, withPayload(i.id, i.payload)), el('td', {}, i.status), el('td', {class: 'num'}, i.priority),
      el('td', {class: 'num'}, i.deliveries)));
    const cfg = p.config;
    return [
      head(p.name, (p.paused ? 'paused · ' : '') + 'capacity ' + p.capacity + ' · ' + cfg.max_in_flight + ' in flight at most · ack ' + cfg.ack_seconds + ' s'),
      stats([['ready', c.ready, 'ready'], ['in flight', c.in_flight, 'in_flight'], ['delayed', c.delayed, 'delayed'],
        ['dead', c.dead, 'dead', c.dead > 0 ? 'bad' : '']]),
      meter(pct, used + ' of ' + p.capacity + ' used'),
      el('p', {class: 'meter-text'}, used + ' of ' + p.capacity + ' used · consumers waiting ' + c.waiting_consumers + ' · producers waiting ' + c.waiting_producers),
      el('div', {class: 'block' + (filters.length ? '' : ' inline')}, el('h4', {}, 'Filters, in the order they run'),
        filters.length ? el('ol', {class: 'filters'}, filters.map((f) => el('li', {'data-filter': f.name},
          el('span', {class: 'prio'}, f.priority), el('span', {class: 'fname'}, f.name), el('span', {class: 'fdesc'}, describeFilter(f)))))
          : el('p', {class: 'none'}, 'none')),
      el('div', {class: 'block' + (p.source ? '' : ' inline')}, el('h4', {}, 'Source'), describeSource(p.source)),
      table('Items', ['id', 'status', 'priority', 'deliveries'], items, 'none', {class: 'items'}),
      more(items.length, c.ready + c.delayed, 'items'),
      totals(p.counts, ['pushed_total', 'delivered_total', 'consumed_total', 'filtered_total', 'redelivered_total', 'dead_total', 'extended_total']),
    ];
  }

  // ---- machines ------------------------------------------------------------

  // States as nodes (in a row for up to four states, else on an ellipse),
  // transitions as labelled quadratic curves, the current state filled, the
  // events allowed now drawn in the accent colour.
  function diagram(m) {
    const d = m.definition_detail || (typeof m.definition === 'object' ? m.definition : null);
    if (!d) return null;
    const states = d.states, n = states.length;
    const H = 34, CH = 7.4;
    const width = (s) => Math.max(64, s.length * CH + 26);
    const pos = {};
    const row = n <= 4;
    if (row) {
      let x = 20;
      for (const s of states) { const w = width(s); pos[s] = {x: x + w / 2, y: 0, w}; x += w + 70; }
    } else {
      const R = Math.max(120, n * 28), r = R * 0.62;
      states.forEach((s, i) => {
        const a = -Math.PI / 2 + (2 * Math.PI * i) / n;
        pos[s] = {x: R + 60 + R * Math.cos(a), y: r * Math.sin(a), w: width(s)};
      });
    }
    const timeoutOf = {};
    for (const t of d.timeouts || []) timeoutOf[t.state + '\u0000' + t.event] = t.after_seconds;
    // One edge per (from, to) pair, its events joined.
    const edges = new Map();
    for (const t of d.transitions) {
      for (const from of t.from) {
        const key = from + '\u0000' + t.to;
        const after = timeoutOf[from + '\u0000' + t.event];
        const label = t.event + (after !== undefined ? ' (after ' + duration(after) + ')' : '');
        const allowed = from === m.state && m.allowed_events.includes(t.event);
        const e = edges.get(key) || {from, to: t.to, labels: [], allowed: false, events: []};
        e.labels.push(label); e.events.push(t.event); e.allowed = e.allowed || allowed;
        edges.set(key, e);
      }
    }
    const idx = Object.fromEntries(states.map((s, i) => [s, i]));
    const shapes = [], labels = [];
    let minY = -H, maxY = H;
    const clip = (c, toward) => { // where the line from a node's centre toward a point leaves its box
      const dx = toward.x - c.x, dy = toward.y - c.y;
      const t = Math.min(dx ? (c.w / 2 + 3) / Math.abs(dx) : Infinity, dy ? (H / 2 + 3) / Math.abs(dy) : Infinity);
      return {x: c.x + dx * t, y: c.y + dy * t};
    };
    for (const e of edges.values()) {
      const a = pos[e.from], b = pos[e.to];
      const cls = 'edge' + (e.allowed ? ' allowed' : '');
      const text = e.labels.join(', ');
      let path, lx, ly, tip, dir;
      if (e.from === e.to) {
        const x0 = a.x - 12, x1 = a.x + 12, y0 = a.y - H / 2;
        path = 'M' + x0 + ' ' + y0 + ' C' + (x0 - 18) + ' ' + (y0 - 40) + ' ' + (x1 + 18) + ' ' + (y0 - 40) + ' ' + x1 + ' ' + (y0 - 3);
        tip = {x: x1, y: y0 - 3}; dir = {x: -0.2, y: 1};
        lx = a.x; ly = y0 - 36;
      } else {
        const dx = b.x - a.x, dy = b.y - a.y, len = Math.hypot(dx, dy) || 1;
        const px = dy / len, py = -dx / len; // left of the direction: up when going right
        // In a row, the next state right is a straight line; any other edge
        // bends: forward ones above the row, backward ones below it.
        const span = row ? Math.abs(idx[e.to] - idx[e.from]) : 1;
        const k = row ? (dx > 0 && span === 1 ? 0 : 14 + 22 * span) : 34;
        const c = {x: (a.x + b.x) / 2 + px * k, y: (a.y + b.y) / 2 + py * k};
        const p0 = clip(a, c), p2 = clip(b, c);
        path = 'M' + p0.x + ' ' + p0.y + ' Q' + c.x + ' ' + c.y + ' ' + p2.x + ' ' + p2.y;
        tip = p2; const l = Math.hypot(p2.x - c.x, p2.y - c.y) || 1; dir = {x: (p2.x - c.x) / l, y: (p2.y - c.y) / l};
        lx = 0.25 * p0.x + 0.5 * c.x + 0.25 * p2.x; ly = 0.25 * p0.y + 0.5 * c.y + 0.25 * p2.y;
        ly += k === 0 ? -7 : py * k > 0 ? 15 : -6;
      }
      const nx = -dir.y, ny = dir.x;
      shapes.push(svg('path', {class: cls, d: path}));
      shapes.push(svg('polygon', {class: cls + ' head', points: [tip.x, tip.y, tip.x - 9 * dir.x + 4.5 * nx, tip.y - 9 * dir.y + 4.5 * ny,
        tip.x - 9 * dir.x - 4.5 * nx, tip.y - 9 * dir.y - 4.5 * ny].join(' ')}));
      labels.push(svg('text', {class: 'elabel' + (e.allowed ? ' allowed' : ''), x: lx, y: ly, 'text-anchor': 'middle',
        'data-events': e.events.join(' ')}, text));
      minY = Math.min(minY, ly - 14); maxY = Math.max(maxY, ly + 6);
    }
    const nodes = states.map((s) => {
      const p = pos[s], current = s === m.state;
      return svg('g', {class: 'node' + (current ? ' current' : '') + (s === d.initial ? ' initial' : ''), 'data-state': s},
        svg('rect', {x: p.x - p.w / 2, y: p.y - H / 2, width: p.w, height: H, rx: 9}),
        svg('text', {x: p.x, y: p.y + 4.5, 'text-anchor': 'middle'}, s));
    });
    const xs = states.map((s) => [pos[s].x - pos[s].w / 2, pos[s].x + pos[s].w / 2]).flat();
    for (const l of labels) { const x = Number(l.getAttribute('x')); const half = l.textContent.length * 3.4; xs.push(x - half, x + half); }
    const x0 = Math.min(...xs) - 10, x1 = Math.max(...xs) + 10;
    const y0 = minY - 8, y1 = maxY + 8;
    return el('div', {class: 'diagram'}, svg('svg', {viewBox: [x0, y0, x1 - x0, y1 - y0].map((v) => v.toFixed(1)).join(' '),
      class: 'machine-svg', role: 'img', 'aria-label': 'state diagram, current state ' + m.state,
      'data-width': Math.round(x1 - x0)}, shapes, nodes, labels));
  }
  function renderMachine(m) {
    const history = m.history.slice(-ITEM_ROWS).reverse().map((h) => el('li', {'data-version': h.version},
      el('span', {class: 'event'}, h.event), ' ', el('span', {class: 'from-to'}, h.from + ' → ' + h.to),
      el('span', {class: 'when'}, since(h.at), ' ago', h.cause === 'event' ? '' : ' · ' + h.cause)));
    const t = m.transaction;
    return [
      head(m.name, ['definition ' + (typeof m.definition === 'string' ? m.definition : 'inline') + ' · version ',
        serial(m.version, 'version')]),
      el('p', {class: 'current-state'}, el('span', {class: 'state-pill', 'data-stat': 'state'}, m.state), ' for ', since(m.entered_at)),
      diagram(m),
      el('div', {class: 'block'}, el('h4', {}, 'Allowed now'), t
        ? el('p', {class: 'none', 'data-stat': 'transaction'}, 'Transaction ' + t.event + ' (→ ' + t.to + ') open; expires in ', until(t.expires_at))
        : m.allowed_events.length
        ? el('p', {class: 'chips', 'data-stat': 'allowed'}, m.allowed_events.map((e) => el('span', {class: 'chip'}, e)))
        : el('p', {class: 'none'}, 'No event is allowed from here.')),
      el('div', {class: 'block'}, el('h4', {}, 'Recent transitions'), history.length
        ? el('ol', {class: 'history'}, history) : el('p', {class: 'none'}, 'None yet.')),
    ];
  }

  // ---- fetching and rendering ---------------------------------------------

  async function api(path) {
    const headers = {Accept: 'application/json'};
    if (token) headers.Authorization = 'Bearer ' + token;
    const response = await fetch(path, {headers, cache: 'no-store'});
    if (response.status === 401) { askToken(); throw new Unauthorized(); }
    if (response.status === 404 || response.status === 410) return null;
    if (!response.ok) throw new Error(path + ' answered ' + response.status);
    return response.json();
  }

  function section(kind) { return $(byKind[kind].plural); }
  function cardsOf(kind) { return [...section(kind).querySelectorAll('article.card')]; }
  function cardFor(kind, name, create) {
    const cards = cardsOf(kind);
    for (const c of cards) if (c.dataset.name === name) return c;
    if (!create) return null;
    const card = el('article', {class: 'card', 'data-kind': kind, 'data-name': name});
    const before = cards.find((c) => c.dataset.name > name);
    if (before) before.before(card);
    else section(kind).querySelector('.cards').append(card);
    lead(kind);
    return card;
  }
  // The heading and the first card share one block (.lead), which the wide
  // layout never splits across columns: a heading never ends a column alone,
  // whether or not the browser honours break-after: avoid.
  function lead(kind) {
    const box = section(kind).querySelector('.lead'), cards = cardsOf(kind);
    if (cards.length && cards[0].parentNode !== box) box.append(cards[0]);
    const extra = [...box.querySelectorAll(':scope > article.card')].slice(1);
    if (extra.length) box.after(...extra);
  }
  // The count and "No queues." only once the kind has been read; "Loading…" until then.
  function counted(kind) {
    lead(kind);
    const s = section(kind), n = cardsOf(kind).length, ready = loaded.has(kind);
    s.querySelector('.kind-count').textContent = ready ? String(n) : '';
    s.querySelector('.loading').hidden = ready || n > 0;
    s.querySelector('.empty').hidden = !ready || n > 0;
  }

  async function refreshNow(kind, name, pulse) {
    const key = kind + '/' + name;
    const seq = (seqs.get(key) || 0) + 1;
    seqs.set(key, seq);
    const k = byKind[kind];
    const query = kind === 'machine' ? '?include=definition' : kind === 'pool' ? '?limit=' + POOL_TILES : '';
    const state = await api('/v1/' + k.plural + '/' + encodeURIComponent(name) + query);
    if (seqs.get(key) !== seq) return; // a newer answer is on its way
    if (!state) {
      const gone = cardFor(kind, name, false);
      if (gone) gone.remove();
    } else {
      const card = cardFor(kind, name, true);
      card.replaceChildren(...k.render(state).filter((c) => c));
      if (pulse) { card.classList.remove('pulse'); void card.offsetWidth; card.classList.add('pulse'); }
    }
    counted(kind);
    stamp();
  }
  function schedule(kind, name) {
    const key = kind + '/' + name;
    if (pending.has(key)) return;
    pending.set(key, setTimeout(() => {
      pending.delete(key);
      refreshNow(kind, name, true).catch(failed);
    }, DEBOUNCE_MS));
  }

  // Lists every resource of a kind; fetches the state of those that are new
  // or whose summary changed (all of them when `full`); drops deleted ones.
  async function loadKind(k, full) {
    const forced = new Set();
    for (const key of touched) {
      if (key.startsWith(k.kind + '/')) { forced.add(key.slice(k.kind.length + 1)); touched.delete(key); }
    }
    const list = await api('/v1/' + k.plural + '?limit=' + MAX_CARDS);
    const items = list ? list[k.plural] : [];
    const before = summaries[k.kind] || new Map(), now = new Map(), work = [];
    for (const s of items) {
      const sig = JSON.stringify(s);
      now.set(s.name, sig);
      const changed = before.get(s.name) !== sig;
      if (full || changed || forced.has(s.name) || !cardFor(k.kind, s.name, false)) {
        work.push(refreshNow(k.kind, s.name, !full && changed && before.has(s.name)));
      }
    }
    summaries[k.kind] = now;
    for (const c of cardsOf(k.kind)) if (!now.has(c.dataset.name)) c.remove();
    counted(k.kind);
    await Promise.all(work);
    loaded.add(k.kind);
    counted(k.kind);
  }
  async function loadAll(full) {
    await Promise.all(KINDS.map((k) => loadKind(k, full)));
    document.body.dataset.loaded = 'true';
    stamp();
  }
  function stamp() { $('updated').textContent = 'updated ' + new Date().toLocaleTimeString(); }
  function failed(error) {
    if (error instanceof Unauthorized) return;
    console.warn('usher dashboard:', error);
  }

  // ---- status, banner, token ------------------------------------------------

  function setStatus(state, text) {
    const s = $('status');
    s.dataset.state = state;
    s.textContent = text;
    document.body.dataset.mode = state;
  }
  function banner(text) {
    const b = $('banner');
    b.hidden = !text;
    b.textContent = text || '';
  }
  function askToken() {
    const refused = !!token;
    token = null;
    sessionStorage.removeItem(TOKEN_KEY);
    if (locked) return;
    locked = true;
    stopStream();
    stopTimers();
    banner('');
    setStatus('locked', 'token needed');
    $('token-form').hidden = false;
    $('token-error').hidden = !refused;
    $('token-input').focus();
  }
  function submitToken(event) {
    event.preventDefault();
    const value = $('token-input').value.trim();
    if (!value) return;
    token = value;
    sessionStorage.setItem(TOKEN_KEY, value);
    $('token-input').value = '';
    $('token-form').hidden = true;
    locked = false;
    start();
  }

  // ---- the event stream ----------------------------------------------------
  // fetch() rather than EventSource, which cannot send an Authorization
  // header; the SSE framing is parsed here (one code path, token or not).

  function stopStream() {
    if (streamAbort) streamAbort.abort();
    streamAbort = null;
    clearTimeout(retryTimer);
    retryTimer = null;
  }
  function stopTimers() {
    clearInterval(pollTimer); pollTimer = null;
    clearInterval(syncTimer); syncTimer = null;
  }
  function goLive() {
    const recovering = pollTimer !== null || document.body.dataset.mode !== 'connecting';
    retryMs = 1000;
    unreachable = false;
    stopTimers();
    banner('');
    setStatus('live', 'live');
    let syncing = false;
    syncTimer = setInterval(() => {
      if (syncing) return;
      syncing = true;
      loadAll(false).catch(failed).finally(() => { syncing = false; });
    }, SYNC_SECONDS * 1000);
    if (recovering) loadAll(true).catch(failed); // whatever changed while the stream was down
  }
  // While the stream is down: the banner, and the badge saying whether the
  // polls reach the server.
  function showDown() {
    if (locked || document.body.dataset.mode === 'live') return;
    setStatus(unreachable ? 'offline' : 'polling', unreachable ? 'server unreachable' : 'polling');
    banner('Live updates interrupted — polling every ' + POLL_SECONDS + ' s' + (unreachable ? ' (the server does not answer)' : '')
      + '; reconnecting in ' + retrySeconds + ' s.');
  }
  function streamLost() {
    streamAbort = null;
    if (locked) return;
    clearInterval(syncTimer); syncTimer = null;
    retrySeconds = Math.round(retryMs / 1000);
    if (document.body.dataset.mode === 'live' || document.body.dataset.mode === 'connecting') setStatus('polling', 'polling');
    showDown();
    if (!pollTimer) {
      let polling = false;
      pollTimer = setInterval(() => {
        if (polling) return;
        polling = true;
        loadAll(true).then(() => { unreachable = false; }, (error) => { unreachable = !(error instanceof Unauthorized); failed(error); })
          .finally(() => { polling = false; showDown(); });
      }, POLL_SECONDS * 1000);
    }
    retryTimer = setTimeout(openStream, retryMs);
    retryMs = Math.min(retryMs * 2, 30000);
  }
  async function openStream() {
    if (locked) return;
    const control = new AbortController();
    streamAbort = control;
    const headers = {Accept: 'text/event-stream'};
    if (token) headers.Authorization = 'Bearer ' + token;
    if (lastEventId !== null) headers['Last-Event-ID'] = lastEventId;
    try {
      const response = await fetch('/v1/events', {headers, signal: control.signal, cache: 'no-store'});
      if (response.status === 401) { askToken(); return; }
      if (!response.ok || !response.body) throw new Error('/v1/events answered ' + response.status);
      goLive();
      const reader = response.body.getReader();
      const decoder = new TextDecoder();
      let buffer = '';
      for (;;) {
        const {value, done} = await reader.read();
        if (done) break;
        buffer += decoder.decode(value, {stream: true});
        let end;
        while ((end = buffer.search(/\r?\n\r?\n/)) >= 0) {
          const block = buffer.slice(0, end);
          buffer = buffer.slice(end).replace(/^\r?\n\r?\n/, '');
          dispatch(block);
        }
      }
    } catch (error) {
      if (control.signal.aborted) return;
    }
    if (control.signal.aborted || streamAbort !== control) return;
    streamLost();
  }
  function dispatch(block) {
    let type = 'message', id = null;
    const data = [];
    for (const raw of block.split(/\r?\n/)) {
      if (!raw || raw[0] === ':') continue;
      const colon = raw.indexOf(':');
      const field = colon < 0 ? raw : raw.slice(0, colon);
      let value = colon < 0 ? '' : raw.slice(colon + 1);
      if (value[0] === ' ') value = value.slice(1);
      if (field === 'event') type = value;
      else if (field === 'data') data.push(value);
      else if (field === 'id') id = value;
    }
    if (id !== null) lastEventId = id;
    if (type === 'reset') { loadAll(true).catch(failed); return; }
    if (!data.length) return;
    let event;
    try { event = JSON.parse(data.join('\n')); } catch (error) { return; }
    if (!event || !byKind[event.kind] || typeof event.name !== 'string') return;
    touched.add(event.kind + '/' + event.name);
    if (cardFor(event.kind, event.name, false)) schedule(event.kind, event.name);
    else loadKind(byKind[event.kind], false).catch(failed); // a resource this page has not seen yet
  }

  // ---- start -----------------------------------------------------------------

  function start() {
    setStatus('connecting', 'connecting…');
    loadAll(true).then(openStream, (error) => {
      unreachable = !(error instanceof Unauthorized);
      failed(error);
      if (!locked) streamLost();
    });
  }
  document.addEventListener('DOMContentLoaded', () => {
    $('token-form').addEventListener('submit', submitToken);
    setInterval(tick, 1000);
    start();
  });
})();
