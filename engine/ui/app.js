// The engine's web console (served at /_engine/ui/, docs/ENGINE.md). It
// polls the engine every second: the overview (clock, Regions, tables)
// and what the open tab shows (a page of items, a query's results, the
// stream). Everything the engine answers is put in the page as text
// (textContent, text nodes, attribute values), never as HTML: items and
// names are whatever a client wrote.

const API = '/_engine/ui/api/';
const CONTROL = '/_engine/';
const POLL_MS = 1000;
const PAGE = 25;
const FIVE_YEARS_MS = 5 * 365 * 24 * 3600 * 1000;
const ATTRS_SHOWN = 300; // characters of an item's other attributes in the list

const state = {
  overview: null,
  overviewText: '',
  route: { region: '', table: '', tab: 'items' },
  pages: [null], // ExclusiveStartKey of each items page seen
  page: 0,
  lastKey: null, // LastEvaluatedKey of the page shown
  itemsText: '',
  query: null, // the last query's input, re-run on each update
  queryText: '',
  streamText: '',
  busy: false,
  timer: 0,
};

// ---- DOM helpers ----

const $ = (id) => document.getElementById(id);

// h makes an element; attrs are set as attributes (class, data-*, ...),
// children appended (strings become text nodes).
function h(tag, attrs, ...children) {
  const n = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === false || v === null || v === undefined) continue;
    n.setAttribute(k, v === true ? '' : String(v));
  }
  for (const c of children.flat(Infinity)) {
    if (c !== null && c !== undefined && c !== false) n.append(c instanceof Node ? c : String(c));
  }
  return n;
}

function setStatus(text, error) {
  const s = $('status');
  s.textContent = text;
  s.classList.toggle('error', !!error);
}

function message(node, text, ok) {
  node.textContent = text;
  node.className = 'msg ' + (ok ? 'ok' : 'error');
}

// ---- requests ----

function errorText(res, body) {
  if (body && typeof body.error === 'string') return body.error;
  if (body && typeof body.__type === 'string') return body.__type.split('#').pop() + ': ' + (body.message || '');
  return res.status + ' ' + res.statusText;
}

async function request(path, init) {
  const res = await fetch(path, { cache: 'no-store', credentials: 'same-origin', ...init });
  const text = await res.text();
  let body = null;
  try { body = JSON.parse(text); } catch { /* not JSON: reported below */ }
  if (!res.ok) throw new Error(errorText(res, body));
  if (body === null) throw new Error('the engine answered something other than JSON');
  return { body, text };
}

const getJSON = (path) => request(path, { headers: { Accept: 'application/json' } });
const postJSON = (path, payload) => request(path, {
  method: 'POST',
  headers: { 'Content-Type': 'application/json', Accept: 'application/json' },
  body: JSON.stringify(payload),
});
const call = (op, input) => postJSON(API + 'call', { region: state.route.region, op, input });

// ---- attribute values ----

// show renders one DynamoDB JSON attribute value as short text.
function show(v) {
  if (v === null || typeof v !== 'object') return String(v);
  const [t, x] = Object.entries(v)[0] || ['', ''];
  switch (t) {
    case 'S': case 'N': return String(x);
    case 'B': return 'b64:' + x;
    case 'BOOL': return String(x);
    case 'NULL': return 'null';
    default: return JSON.stringify(x);
  }
}

// clip shortens a long text for a table cell (the editor shows it whole).
const clip = (text) => (text.length > ATTRS_SHOWN ? text.slice(0, ATTRS_SHOWN) + '…' : text);

// duration renders milliseconds as 3d4h5m6s, 1m0s, 30s.
function duration(ms) {
  let s = Math.max(0, Math.round(ms / 1000));
  const d = Math.floor(s / 86400); s -= d * 86400;
  const hh = Math.floor(s / 3600); s -= hh * 3600;
  const m = Math.floor(s / 60); s -= m * 60;
  let out = '';
  if (d) out += d + 'd';
  if (d || hh) out += hh + 'h';
  if (d || hh || m) out += m + 'm';
  return out + s + 's';
}

// ttlState is an item's TTL as the engine reads it (a Number of epoch
// seconds, expired when strictly past, never when five years past).
function ttlState(v, nowMs) {
  if (v === undefined) return { text: 'no TTL', cls: 'none' };
  if (!v || typeof v.N !== 'string') return { text: 'not a Number: never expires', cls: 'none' };
  const exp = Number(v.N) * 1000;
  if (!Number.isFinite(exp)) return { text: 'never expires', cls: 'none' };
  const d = exp - nowMs;
  if (d > 0) return { text: 'expires in ' + duration(Math.ceil(d / 1000) * 1000), cls: 'live' };
  if (-d > FIVE_YEARS_MS) return { text: 'more than five years past: never expires', cls: 'none' };
  return { text: 'expired ' + duration(-d) + ' ago, awaiting the sweeper', cls: 'expired' };
}

const nowMs = () => (state.overview ? Date.parse(state.overview.now) : Date.now());

// ---- routing: #/REGION/TABLE/TAB ----

function parseRoute() {
  const parts = location.hash.replace(/^#\/?/, '').split('/').map((p) => {
    try { return decodeURIComponent(p); } catch { return ''; }
  });
  const tab = ['items', 'query', 'stream', 'details'].includes(parts[2]) ? parts[2] : 'items';
  return { region: parts[0] || '', table: parts[1] || '', tab };
}

const href = (region, table, tab) => '#/' + [region, table, tab || 'items'].map(encodeURIComponent).join('/');

function currentTable() {
  const o = state.overview;
  if (!o) return null;
  return o.tables.find((t) => t.region === state.route.region && t.table.TableName === state.route.table) || null;
}

function keyNames(desc, indexName) {
  let ks = desc.KeySchema;
  for (const ix of [...(desc.GlobalSecondaryIndexes || []), ...(desc.LocalSecondaryIndexes || [])]) {
    if (ix.IndexName === indexName) ks = ix.KeySchema;
  }
  const hash = (ks.find((k) => k.KeyType === 'HASH') || {}).AttributeName;
  const range = (ks.find((k) => k.KeyType === 'RANGE') || {}).AttributeName;
  return { hash, range };
}

function attrType(desc, name) {
  const d = (desc.AttributeDefinitions || []).find((a) => a.AttributeName === name);
  return d ? d.AttributeType : 'S';
}

// ---- the header: clock and sweeper ----

function renderClock() {
  const o = state.overview;
  $('clock-now').textContent = o.now;
  $('clock-now').setAttribute('datetime', o.now);
  $('clock-kind').textContent = (o.manualClock ? 'manual' : 'real time') + ' · TTL sweeper ' + (o.ttlSweep === 'off' ? 'off' : 'every ' + o.ttlSweep);
  const off = !o.manualClock;
  $('clock-advance').disabled = off;
  $('clock-advance-btn').disabled = off;
  $('clock-form').title = off ? 'the clock is real time: start the engine with --manual-clock to move it' : '';
}

async function advanceClock(ev) {
  ev.preventDefault();
  try {
    const { body } = await postJSON(CONTROL + 'clock', { advance: $('clock-advance').value.trim() });
    setStatus('clock advanced to ' + body.now);
    await tick();
  } catch (err) {
    setStatus('advancing the clock: ' + err.message, true);
  }
}

async function sweepNow() {
  try {
    const { body } = await postJSON(CONTROL + 'ttl/sweep', {});
    $('sweep-info').textContent = 'swept: ' + body.deleted + ' deleted';
    await tick();
  } catch (err) {
    setStatus('TTL sweep: ' + err.message, true);
  }
}

// ---- the sidebar: Regions, tables, replicas ----

function tableMeta(t) {
  const d = t.table;
  const parts = [d.ItemCount + (d.ItemCount === 1 ? ' item' : ' items')];
  parts.push(t.ttlAttribute ? 'TTL ' + t.ttlAttribute : 'no TTL');
  const s = d.StreamSpecification;
  parts.push(s && s.StreamEnabled ? 'stream ' + s.StreamViewType : (d.LatestStreamArn ? 'stream disabled' : 'no stream'));
  return parts.join(' · ');
}

function renderTables() {
  const o = state.overview;
  const nav = $('tables');
  const others = [...new Set([...o.regions, ...o.tables.map((t) => t.region)])].filter((r) => r !== o.region).sort();
  const regions = [o.region, ...others]; // the default Region first
  const out = [];
  for (const region of regions) {
    out.push(h('h2', { 'data-region': region }, region, region === o.region ? h('span', { class: 'muted' }, ' (default)') : null));
    const list = h('ul');
    for (const t of o.tables.filter((x) => x.region === region)) {
      const name = t.table.TableName;
      const current = region === state.route.region && name === state.route.table;
      const li = h('li', {},
        h('a', { class: 'table-link' + (current ? ' current' : ''), href: href(region, name), 'data-region': region, 'data-table': name }, name),
        h('span', { class: 'meta' }, tableMeta(t)));
      const reps = t.table.Replicas || [];
      if (reps.length) {
        li.append(h('span', { class: 'meta' }, 'replicas: ',
          reps.map((r, i) => [i ? ', ' : '', h('a', { class: 'replica-link', href: href(r.RegionName, name), 'data-region': r.RegionName }, r.RegionName)])));
      }
      list.append(li);
    }
    if (!list.childElementCount) list.append(h('li', { class: 'muted' }, 'no tables'));
    out.push(list);
  }
  nav.replaceChildren(...out);
}

// ---- the main view of one table ----

function buildMain() {
  const main = $('main');
  const { region, table, tab } = state.route;
  if (!table) {
    main.replaceChildren(h('p', { class: 'muted' }, 'Pick a table.'));
    return;
  }
  const tabs = h('nav', { class: 'tabs', 'aria-label': 'views' },
    ['items', 'query', 'stream', 'details'].map((t) => h('a', { href: href(region, table, t), class: t === tab ? 'current' : '', id: 'tab-' + t }, t)));
  const body = h('section', { id: 'tab-body' });
  main.replaceChildren(
    h('h2', { id: 'table-title' }, table, h('span', { class: 'muted' }, ' in ' + region)),
    h('p', { id: 'table-meta', class: 'muted' }),
    tabs, body);
  if (tab === 'items') buildItemsTab(body);
  if (tab === 'query') buildQueryTab(body);
  if (tab === 'stream') body.append(h('div', { id: 'stream' }, h('p', { class: 'muted' }, 'Loading…')));
  if (tab === 'details') body.append(h('div', { id: 'details' }));
}

function buildItemsTab(body) {
  const prev = h('button', { type: 'button', id: 'items-prev' }, '← previous');
  const next = h('button', { type: 'button', id: 'items-next' }, 'next →');
  const add = h('button', { type: 'button', id: 'item-new' }, 'New item');
  prev.addEventListener('click', () => { if (state.page > 0) { state.page--; refreshSoon(); } });
  next.addEventListener('click', () => {
    if (!state.lastKey) return;
    state.pages[state.page + 1] = state.lastKey;
    state.page++;
    refreshSoon();
  });
  add.addEventListener('click', () => openEditor(null));
  body.append(h('div', { class: 'toolbar' }, add, prev, next, h('span', { id: 'items-page', class: 'muted' })),
    h('div', { id: 'items' }), h('div', { id: 'editor-slot' }));
}

// renderItems puts items in node as a table: the key attributes, the TTL
// countdown and the other attributes; each row can be opened for editing.
function renderItems(node, items, desc, ttlAttr, keys) {
  const tk = keyNames(desc);
  const { hash, range } = keys || tk;
  const cols = [hash, range].filter(Boolean);
  const head = h('tr', {}, cols.map((c) => h('th', {}, c)), ttlAttr ? h('th', {}, 'TTL (' + ttlAttr + ')') : null, h('th', {}, 'other attributes'), h('th', {}, ''));
  const rows = items.map((it) => {
    const key = {};
    for (const k of [tk.hash, tk.range]) if (k && it[k] !== undefined) key[k] = it[k];
    const rest = Object.keys(it).filter((k) => !cols.includes(k) && k !== ttlAttr).sort();
    const edit = h('button', { type: 'button', class: 'edit-item' }, 'edit');
    edit.addEventListener('click', () => openEditor(it));
    const tr = h('tr', { class: 'item-row', 'data-key': JSON.stringify(key) },
      cols.map((c) => h('td', { class: 'key', 'data-attr': c }, it[c] === undefined ? '' : show(it[c]))),
      ttlAttr ? h('td', { class: 'ttl', 'data-ttl': JSON.stringify(it[ttlAttr] === undefined ? null : it[ttlAttr]) }) : null,
      h('td', { class: 'attrs' }, clip(rest.map((k) => k + ': ' + show(it[k])).join(', '))),
      h('td', {}, edit));
    return tr;
  });
  if (!rows.length) rows.push(h('tr', {}, h('td', { colspan: cols.length + 3, class: 'muted' }, 'no items')));
  node.replaceChildren(h('table', { class: 'items' }, h('thead', {}, head), h('tbody', {}, rows)));
  updateCountdowns();
}

// updateCountdowns sets every TTL cell from the engine clock.
function updateCountdowns() {
  const now = nowMs();
  for (const td of document.querySelectorAll('td.ttl')) {
    let v;
    try { v = JSON.parse(td.getAttribute('data-ttl')); } catch { v = null; }
    const s = ttlState(v === null ? undefined : v, now);
    td.textContent = s.text;
    td.className = 'ttl ' + s.cls;
  }
}

async function refreshItems(t) {
  const input = { TableName: t.table.TableName, Limit: PAGE };
  if (state.pages[state.page]) input.ExclusiveStartKey = state.pages[state.page];
  const { body, text } = await call('Scan', input);
  return () => {
    state.lastKey = body.LastEvaluatedKey || null;
    $('items-prev').disabled = state.page === 0;
    $('items-next').disabled = !state.lastKey;
    $('items-page').textContent = 'page ' + (state.page + 1) + ' · ' + body.Count + ' shown';
    if (text === state.itemsText) return;
    state.itemsText = text;
    renderItems($('items'), body.Items || [], t.table, t.ttlAttribute);
  };
}

// ---- the item editor ----

function openEditor(item) {
  const t = currentTable();
  if (!t) return;
  const { hash, range } = keyNames(t.table);
  const template = {};
  template[hash] = { [attrType(t.table, hash)]: '' };
  if (range) template[range] = { [attrType(t.table, range)]: '' };
  const area = h('textarea', { id: 'editor-json', spellcheck: 'false', 'aria-label': 'the item, in DynamoDB JSON' });
  area.value = JSON.stringify(item || template, null, 2);
  const save = h('button', { type: 'button', id: 'editor-save' }, 'Save (PutItem)');
  const del = h('button', { type: 'button', id: 'editor-delete', disabled: !item }, 'Delete (DeleteItem)');
  const close = h('button', { type: 'button', id: 'editor-close' }, 'Close');
  const msg = h('span', { id: 'editor-status', class: 'msg' });
  save.addEventListener('click', () => editorWrite('PutItem', area, msg));
  del.addEventListener('click', () => editorWrite('DeleteItem', area, msg));
  close.addEventListener('click', () => $('editor-slot').replaceChildren());
  $('editor-slot').replaceChildren(h('section', { id: 'editor' },
    h('h3', {}, item ? 'Edit item' : 'New item'),
    h('p', { class: 'muted' }, 'DynamoDB JSON, e.g. {"pk": {"S": "a"}, "exp": {"N": "1767225600"}}. Save replaces the whole item.'),
    area, h('div', { class: 'toolbar' }, save, del, close, msg)));
  area.focus();
}

async function editorWrite(op, area, msg) {
  const t = currentTable();
  if (!t) return;
  let item;
  try {
    item = JSON.parse(area.value);
  } catch (err) {
    message(msg, 'not JSON: ' + err.message, false);
    return;
  }
  if (!item || typeof item !== 'object' || Array.isArray(item)) {
    message(msg, 'the item must be a JSON object of attributes', false);
    return;
  }
  const input = { TableName: t.table.TableName };
  if (op === 'PutItem') {
    input.Item = item;
  } else {
    const { hash, range } = keyNames(t.table);
    input.Key = {};
    for (const k of [hash, range]) if (k && item[k] !== undefined) input.Key[k] = item[k];
  }
  try {
    await call(op, input);
    message(msg, op === 'PutItem' ? 'saved' : 'deleted', true);
    state.itemsText = '';
    await tick();
  } catch (err) {
    message(msg, err.message, false);
  }
}

// ---- the query tab ----

function buildQueryTab(body) {
  const t = currentTable();
  const desc = t ? t.table : { KeySchema: [] };
  const indexes = [...(desc.GlobalSecondaryIndexes || []), ...(desc.LocalSecondaryIndexes || [])].map((ix) => ix.IndexName);
  const index = h('select', { id: 'q-index' }, h('option', { value: '' }, '(table)'), indexes.map((n) => h('option', { value: n }, n)));
  const pk = h('input', { id: 'q-pk', autocomplete: 'off', spellcheck: 'false' });
  const op = h('select', { id: 'q-op' }, ['', '=', '<', '<=', '>', '>=', 'begins_with', 'between'].map((o) => h('option', { value: o }, o || '(no sort key condition)')));
  const sk = h('input', { id: 'q-sk', autocomplete: 'off', spellcheck: 'false' });
  const sk2 = h('input', { id: 'q-sk2', autocomplete: 'off', spellcheck: 'false', placeholder: 'and (between)' });
  const back = h('input', { id: 'q-desc', type: 'checkbox' });
  const pkLabel = h('span', { id: 'q-pk-name' });
  const skLabel = h('span', { id: 'q-sk-name' });
  const labels = () => {
    const k = keyNames(desc, index.value);
    pkLabel.textContent = (k.hash || '?') + ' =';
    skLabel.textContent = k.range ? k.range : '(no sort key)';
  };
  index.addEventListener('change', labels);
  labels();
  const form = h('form', { class: 'query', id: 'query-form', 'data-known': t ? '1' : '0' },
    h('label', {}, 'index', index), h('label', {}, pkLabel, pk), h('label', {}, skLabel, op), h('label', {}, 'value', sk),
    h('label', {}, 'and', sk2), h('label', {}, 'newest first', back), h('button', { type: 'submit', id: 'q-run' }, 'Query'));
  form.addEventListener('submit', (ev) => {
    ev.preventDefault();
    state.query = queryInput(desc, index.value, pk.value, op.value, sk.value, sk2.value, back.checked);
    state.queryText = '';
    refreshSoon();
  });
  body.append(form, h('p', { id: 'query-msg', class: 'msg' }), h('div', { id: 'query-results' }));
}

function typed(desc, name, value) {
  return { [attrType(desc, name)]: value };
}

function queryInput(desc, index, pk, op, sk, sk2, back) {
  const k = keyNames(desc, index);
  const input = {
    TableName: desc.TableName,
    KeyConditionExpression: '#pk = :pk',
    ExpressionAttributeNames: { '#pk': k.hash },
    ExpressionAttributeValues: { ':pk': typed(desc, k.hash, pk) },
    Limit: 100,
    ScanIndexForward: !back,
  };
  if (index) input.IndexName = index;
  if (op && k.range) {
    input.ExpressionAttributeNames['#sk'] = k.range;
    input.ExpressionAttributeValues[':sk'] = typed(desc, k.range, sk);
    if (op === 'begins_with') input.KeyConditionExpression += ' AND begins_with(#sk, :sk)';
    else if (op === 'between') {
      input.ExpressionAttributeValues[':sk2'] = typed(desc, k.range, sk2);
      input.KeyConditionExpression += ' AND #sk BETWEEN :sk AND :sk2';
    } else input.KeyConditionExpression += ' AND #sk ' + op + ' :sk';
  }
  return input;
}

async function refreshQuery(t) {
  if (!state.query) return null;
  const q = state.query;
  let res;
  try {
    res = await call('Query', q);
  } catch (err) {
    return () => message($('query-msg'), err.message, false);
  }
  return () => {
    if (res.text === state.queryText) return;
    state.queryText = res.text;
    message($('query-msg'), res.body.Count + ' items' + (res.body.LastEvaluatedKey ? ' (first 100)' : ''), true);
    renderItems($('query-results'), res.body.Items || [], t.table, t.ttlAttribute, keyNames(t.table, q.IndexName));
  };
}

// ---- the stream tab: shards as a tree, records, service deletes ----

function isServiceDelete(rec) {
  const u = rec.userIdentity;
  return !!u && u.Type === 'Service' && u.PrincipalId === 'dynamodb.amazonaws.com';
}

function renderRecord(rec) {
  const d = rec.dynamodb || {};
  const svc = isServiceDelete(rec);
  const at = new Date((d.ApproximateCreationDateTime || 0) * 1000).toISOString();
  const keys = Object.entries(d.Keys || {}).map(([k, v]) => k + ': ' + show(v)).join(', ');
  const images = {};
  if (d.NewImage) images.NewImage = d.NewImage;
  if (d.OldImage) images.OldImage = d.OldImage;
  return h('li', { class: 'record' + (svc ? ' service-delete' : ''), 'data-event': rec.eventName, 'data-seq': d.SequenceNumber },
    h('span', { class: 'badge event' }, rec.eventName),
    svc ? h('span', { class: 'badge service', title: 'userIdentity: Service, dynamodb.amazonaws.com' }, 'TTL delete (service)') : null,
    h('span', { class: 'keys' }, keys), ' ',
    h('span', { class: 'muted' }, at + ' · seq ' + d.SequenceNumber),
    Object.keys(images).length ? h('details', {}, h('summary', {}, 'images'), h('pre', {}, JSON.stringify(images, null, 2))) : null);
}

function renderShard(sh, children) {
  const range = sh.startingSequenceNumber + ' … ' + (sh.endingSequenceNumber || '(open)');
  const recs = [...sh.records].reverse().map(renderRecord);
  const more = sh.recordsKept > sh.records.length ? h('li', { class: 'muted' }, (sh.recordsKept - sh.records.length) + ' older records not shown') : null;
  const kids = children.get(sh.shardId) || [];
  return h('li', { class: 'shard', 'data-shard': sh.shardId },
    h('div', { class: 'shard-head' }, sh.shardId, ' ',
      h('span', { class: 'muted' }, (sh.endingSequenceNumber ? 'closed' : 'open') + ' · ' + range + ' · ' + sh.recordCount + ' records, ' + sh.recordsKept + ' kept')),
    h('ol', { class: 'records' }, recs.length ? recs : h('li', { class: 'muted' }, 'no records'), more),
    kids.length ? h('ul', { class: 'shard-tree' }, kids.map((k) => renderShard(k, children))) : null);
}

function renderStream(v) {
  const s = v.stream;
  const ids = new Set(s.shards.map((x) => x.shardId));
  const children = new Map();
  const roots = [];
  for (const sh of s.shards) {
    if (sh.parentShardId && ids.has(sh.parentShardId)) {
      if (!children.has(sh.parentShardId)) children.set(sh.parentShardId, []);
      children.get(sh.parentShardId).push(sh);
    } else roots.push(sh);
  }
  const rootItems = roots.map((sh) => {
    const li = renderShard(sh, children);
    if (sh.parentShardId) li.prepend(h('div', { class: 'muted' }, 'child of ' + sh.parentShardId + ' (trimmed away)'));
    return li;
  });
  $('stream').replaceChildren(
    h('dl', { class: 'details' },
      h('dt', {}, 'stream'), h('dd', {}, s.streamArn),
      h('dt', {}, 'status'), h('dd', {}, s.streamStatus + (v.enabled ? '' : ' (the table has no current stream)')),
      h('dt', {}, 'view type'), h('dd', {}, s.streamViewType)),
    h('p', { class: 'muted' }, 'Shards by lineage, each with its latest records, newest first. A REMOVE marked "TTL delete (service)" is the TTL sweeper\'s.'),
    h('ul', { class: 'shard-tree' }, rootItems.length ? rootItems : h('li', { class: 'muted' }, 'no shards')));
}

async function refreshStream(t) {
  const q = new URLSearchParams({ region: t.region, table: t.table.TableName });
  let res;
  try {
    res = await getJSON(API + 'stream?' + q);
  } catch (err) {
    return () => $('stream').replaceChildren(h('p', { class: 'msg error' }, err.message));
  }
  return () => {
    if (res.text === state.streamText) return;
    state.streamText = res.text;
    renderStream(res.body);
  };
}

// ---- the details tab ----

function renderDetails(t) {
  const d = t.table;
  const keys = (ks) => ks.map((k) => k.AttributeName + ' (' + k.KeyType + ')').join(', ');
  const rows = [
    ['ARN', d.TableArn], ['Region', t.region], ['created', new Date(d.CreationDateTime * 1000).toISOString()],
    ['key', keys(d.KeySchema)], ['items', String(d.ItemCount)], ['size', d.TableSizeBytes + ' bytes'],
    ['TTL attribute', t.ttlAttribute || '(TTL off)'],
    ['stream', d.StreamSpecification ? d.StreamSpecification.StreamViewType + ' · ' + d.LatestStreamArn : (d.LatestStreamArn ? 'disabled · ' + d.LatestStreamArn : 'none')],
  ];
  for (const ix of [...(d.GlobalSecondaryIndexes || []).map((x) => ['GSI', x]), ...(d.LocalSecondaryIndexes || []).map((x) => ['LSI', x])]) {
    rows.push([ix[0] + ' ' + ix[1].IndexName, keys(ix[1].KeySchema) + ' · ' + ix[1].Projection.ProjectionType + ' · ' + ix[1].ItemCount + ' items']);
  }
  const dl = h('dl', { class: 'details' }, rows.map(([k, v]) => [h('dt', {}, k), h('dd', {}, v)]));
  const reps = d.Replicas || [];
  if (reps.length) {
    dl.append(h('dt', {}, 'replicas'), h('dd', {}, reps.map((r, i) => [i ? ', ' : '',
      h('a', { class: 'replica-link', href: href(r.RegionName, d.TableName, 'details'), 'data-region': r.RegionName }, r.RegionName),
      ' (' + r.ReplicaStatus + ')'])));
  }
  $('details').replaceChildren(dl, h('h3', {}, 'DescribeTable'), h('pre', {}, JSON.stringify(d, null, 2)));
}

// ---- the update loop ----

async function refresh() {
  const route = location.hash;
  const { body, text } = await getJSON(API + 'overview');
  if (route !== location.hash) return;
  state.overview = body;
  renderClock();
  const changed = text !== state.overviewText;
  state.overviewText = text;
  if (changed) renderTables();
  const t = currentTable();
  if (state.route.table) {
    $('table-meta').textContent = t ? tableMeta(t) : 'no such table in ' + state.route.region;
  }
  if (t && state.route.tab === 'query' && $('query-form').getAttribute('data-known') !== '1') {
    $('tab-body').replaceChildren(); // built before the table was known (a link straight to the tab)
    buildQueryTab($('tab-body'));
  }
  let apply = null;
  if (t && state.route.tab === 'items') apply = await refreshItems(t);
  if (t && state.route.tab === 'query') apply = await refreshQuery(t);
  if (t && state.route.tab === 'stream') apply = await refreshStream(t);
  if (t && state.route.tab === 'details' && changed) apply = () => renderDetails(t);
  if (route !== location.hash) return;
  if (apply) apply();
  updateCountdowns();
  document.body.setAttribute('data-updated', body.now);
}

async function tick() {
  if (state.busy) return;
  state.busy = true;
  try {
    await refresh();
    if ($('status').classList.contains('error')) setStatus('');
  } catch (err) {
    setStatus('update failed: ' + err.message, true);
  } finally {
    state.busy = false;
  }
}

function schedule() {
  clearTimeout(state.timer);
  state.timer = setTimeout(async () => {
    if (!document.hidden) await tick();
    schedule();
  }, POLL_MS);
}

function refreshSoon() {
  state.itemsText = '';
  tick();
}

function onRoute() {
  const r = parseRoute();
  const same = r.region === state.route.region && r.table === state.route.table;
  state.route = r;
  if (!same) {
    state.pages = [null];
    state.page = 0;
    state.lastKey = null;
    state.query = null;
  }
  state.itemsText = state.queryText = state.streamText = '';
  buildMain();
  if (state.overview) {
    renderTables();
    const t = currentTable();
    if (t && r.tab === 'details') renderDetails(t);
  }
  tick();
}

function start() {
  $('clock-form').addEventListener('submit', advanceClock);
  $('sweep-btn').addEventListener('click', sweepNow);
  window.addEventListener('hashchange', onRoute);
  document.addEventListener('visibilitychange', () => { if (!document.hidden) tick(); });
  onRoute();
  schedule();
}

start();
