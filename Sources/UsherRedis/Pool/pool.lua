-- The pool kind (LeasePool, Sources/UsherCore/Pool): a lease is a visitor of
-- the line of line.lua (which comes first in the script) whose capacity is
-- the element count; the pool adds which element each lease has. After every
-- step, `P.assign` frees the elements of leases that ended, then hands free
-- elements, least recently freed first, to the leases granted without one.
--
-- KEYS[13..16], after the line's: el: element id -> record (cjson: d = data
-- as JSON text, l = its lease, h = last holder, t = lease transitions,
-- n = leases, o = order); order: element ids by order (the stable order,
-- where a page resumes); free: free element ids by the ticket they were
-- freed with (least recently freed first); elements: the declared elements
-- as the config's JSON text (a key of its own: meta is read by every
-- operation, and this text grows with the pool).
-- A lease is a line record with `holder` and `el` (its element) beside the
-- line's fields; it has no payload.
-- meta (beside the line's): grow_max ('' = no grow), grow_prefix,
-- grown_total, grown_ids, orders, tickets; read and changed through the line's `meta` table (one
-- HGETALL, written back by flush), like the line's own fields.

LINE.kind = 'pool'
-- An unclaimed lease is recycled, as an undelivered one is.
LINE.unclaimed_status = 'completed'

local K_EL, K_ORDER, K_FREE, K_ELEMENTS = KEYS[13], KEYS[14], KEYS[15], KEYS[16]
local A = ARGV
local ELEMENT_LIMIT = 100000

-- The pool's helpers live in one table: the main chunk's locals are few.
local P = {}

function P.el_get(id)
  local text = redis.call('HGET', K_EL, id)
  if not text then return nil end
  return cjson.decode(text)
end

function P.el_put(id, e) redis.call('HSET', K_EL, id, cjson.encode(e)) end

function P.push_free(id)
  redis.call('ZADD', K_FREE, next_counter('tickets') + 1, id)
end

function P.count() return redis.call('ZCARD', K_ORDER) end
function P.available() return redis.call('ZCARD', K_FREE) end

-- A free element at the end of the order; `data` is JSON text or nil.
function P.append(id, data)
  local order = next_counter('orders') + 1
  P.el_put(id, { d = data, t = 0, n = 0, o = order })
  redis.call('ZADD', K_ORDER, order, id)
  P.push_free(id)
end

-- Frees the elements of the leases that ended, then gives the leases granted
-- without an element one each (ElementTable.lease: a holder change counts
-- after the first lease, and a lease without a holder always counts).
function P.assign()
  for _, id in ipairs(changed) do
    local r = rec_get(id)
    if r and r.el and (r.st == 'completed' or r.st == 'expired' or r.st == 'released') then
      local e = P.el_get(r.el)
      if e and e.l == id then
        e.l = nil
        P.el_put(r.el, e)
        P.push_free(r.el)
      end
    end
  end
  for _, id in ipairs(changed) do
    local r = rec_get(id)
    if r and r.st == 'granted' and not r.el then
      local popped = redis.call('ZPOPMIN', K_FREE, 1)
      if not popped[1] then return end -- capacity is the element count: never
      local eid = popped[1]
      local e = P.el_get(eid)
      if e.n > 0 and (r.holder == nil or r.holder ~= e.h) then e.t = e.t + 1 end
      e.n = e.n + 1
      e.h = r.holder
      e.l = id
      P.el_put(eid, e)
      r.el = eid
      rec_put(r)
    end
  end
end

-- The line's capacity is the element count: raising it grants waiting
-- fetchers at once; lowering it takes no lease away.
function P.sync_capacity()
  local n = P.count()
  meta_set('capacity', int_text(n))
  cfg.capacity = n
  grant_free()
  P.assign()
end

-- With grow: creates elements while none is free and someone needs one
-- (`extra` fetchers beside those waiting), up to max_size.
function P.grow(extra)
  local g = { meta.grow_max, meta.grow_prefix }
  if not g[1] or g[1] == '' then return end
  local limit = math.min(num(g[1]), ELEMENT_LIMIT)
  while P.available() == 0 and redis.call('ZCARD', K_WAIT) + extra > 0 and P.count() < limit do
    local id
    repeat
      id = g[2] .. int_text(next_counter('grown_ids') + 1)
    until redis.call('HEXISTS', K_EL, id) == 0
    P.append(id, nil)
    incr('grown_total')
    P.sync_capacity()
  end
end

-- Views ------------------------------------------------------------------

-- A lease (RedisPoolStore.lease) as a table; numbers as text.
function P.lease_table(r)
  local v = { id = r.id, holder = r.holder, status = r.st, reason = r.rs, created_at = r.enq, finished_at = r.fat }
  if r.el then
    v.element = r.el
    local e = P.el_get(r.el)
    if e then v.data = e.d end
  end
  if r.gat then
    v.granted_at = r.gat
    v.fence = r.fence
    v.expires_at = r.dl
  end
  return v
end

function P.lease_view(r) return cjson.encode(P.lease_table(r)) end

-- An element (RedisPoolStore.element) as JSON text, with its lease.
function P.element_view(id, e)
  local v = { id = id, data = e.d, transitions = int_text(e.t), last_holder = e.h, order = int_text(e.o) }
  if e.l then v.lease = P.lease_table(rec_get(e.l)) end
  return cjson.encode(v)
end

-- From meta as the line read it, with this script's changes.
function P.config_fields()
  -- A pool made before `elements` had a key of its own keeps them in meta.
  local elements = redis.call('GET', K_ELEMENTS) or meta.elements
  return { meta.max_waiting, meta.hold_seconds, meta.grow_max or '', meta.grow_prefix or '', elements,
    cfg.idle_seconds, cfg.claim_seconds }
end

-- Ends an operation: writes records back, tells every instance what
-- changed (leases as they stand now, `withdrawn` ones as they last were).
function P.publish(extra)
  if #changed == 0 and not touched and not extra then return end
  local notice = { kind = LINE.kind, name = A[4], time = int_text(NOW) }
  local views = {}
  for i, id in ipairs(changed) do views[i] = P.lease_view(cache[id]) end
  if #views > 0 then notice.changed = views end
  if #waits > 0 then notice.waits = waits end
  local nd = next_deadline()
  if nd ~= '' then notice.next = nd end
  if extra then
    for k, v in pairs(extra) do notice[k] = v end
  end
  publish(notice)
end

function P.done(reply, extra)
  flush()
  P.publish(extra)
  table.insert(reply, 1, next_deadline())
  return reply
end

-- Refuses after applying what was due: what changed is kept and told.
function P.refuse(code, detail)
  flush()
  P.publish(nil)
  return fail(code, detail)
end

function P.need(id)
  local r = rec_get(id)
  if not r then return nil, P.refuse('not_found', id) end
  return r
end

-- A lease asked for longer than the pool's lease_seconds (or 0 where they expire).
function P.lease_excess(seconds_text)
  local seconds = num(seconds_text)
  local limit = num(cfg.hold_seconds)
  return seconds and limit > 0 and (seconds == 0 or seconds > limit)
end

-- Operations -------------------------------------------------------------

if OP == 'create' then
  -- ARGV: max_waiting, lease seconds, lease µs, grow max ('' none), grow
  -- prefix, elements (config JSON text), idle seconds, idle µs, claim
  -- seconds, claim µs, then id and data ('' none) per element.
  if load_config() then
    local reply = P.config_fields()
    table.insert(reply, 1, '0')
    table.insert(reply, 1, next_deadline())
    return reply
  end
  redis.call('UNLINK', unpack(KEYS))  -- what an eviction of the meta key left
  local n = (#A - 14) / 2
  redis.call('HSET', K_META, 'capacity', int_text(n), 'max_waiting', A[5], 'hold_seconds', A[6], 'hold_us', A[7],
    'dedup', 'off', 'opposites', '[]', 'history', '1000', 'created', int_text(NOW), 'fence', int_text(NOW - 1),
    'lastid', int_text(NOW), 'seq', '0', 'dseq', '0', 'fseq', '0', 'hsum', '0', 'grow_max', A[8],
    'grow_prefix', A[9], 'grown_total', '0', 'grown_ids', '0', 'orders', '0', 'tickets', '0',
    'idle_seconds', A[11], 'idle_us', A[12], 'claim_seconds', A[13], 'claim_us', A[14], 'wseq', '0')
  redis.call('SET', K_ELEMENTS, A[10])
  for i = 15, #A, 2 do
    local data = A[i + 1]
    if data == '' then data = nil end
    P.append(A[i], data)
  end
  load_config()
  local reply = P.config_fields()
  table.insert(reply, 1, '1')
  table.insert(reply, 1, '')
  return reply
end

if OP == 'delete' then return delete_line(P.publish) end

if not load_config() then return fail('gone', '') end

begin()
P.assign()

if OP == 'tick' then
  return P.done({})
end

if OP == 'config' then
  return P.done(P.config_fields())
end

if OP == 'counts' then
  local n, free = P.count(), P.available()
  return P.done({ int_text(n), int_text(free), int_text(n - free), int_text(redis.call('ZCARD', K_WAIT)),
    oldest_entry() })
end

if OP == 'fetch' then
  -- ARGV: id ('' none), holder ('' none), lease µs (-1 none), lease seconds
  -- ('' none), wait ('1': a fetch that finds nothing free waits in the line),
  -- heard of until (µs: the end of its wait; '' = now). Reply: the lease,
  -- '1' when this call made it ('0': a known id).
  local id, holder, wait, heard_until = A[5], A[6], A[9] == '1', num(A[10])
  if id == '' then id = nil end
  if holder == '' then holder = nil end
  if P.lease_excess(A[8]) then return P.refuse('lease_excess', cfg.hold_seconds) end
  if id then
    local known = rec_get(id)
    if known then
      note_retry(known)
      hear(known, heard_until)
      if known.st == 'waiting' and not wait then return P.refuse('exhausted', next_deadline()) end
      return P.done({ P.lease_view(known), '0' })
    end
  end
  P.grow(1)
  if P.available() == 0 then
    if not wait then return P.refuse('exhausted', next_deadline()) end
    if redis.call('ZCARD', K_WAIT) >= cfg.max_waiting then
      local hold = mean_hold() or cfg.hold_us
      local seconds = math.ceil(hold / 1000000 / math.max(1, cfg.capacity))
      return P.refuse('full', int_text(math.min(3600, math.max(1, seconds))))
    end
  end
  id = id or new_id()
  NAMED = id
  local r = { id = id, holder = holder, pri = '0', enq = int_text(NOW), hold = A[7], st = 'waiting',
    wo = int_text(next_counter('wseq')) }
  r.hd = int_text(math.max(NOW, heard_until or NOW))
  incr('enqueued_total')
  enter_line(r, NOW, 'enter')
  grant_free()
  P.assign()
  if r.st == 'waiting' then watch_idle(r) end
  note(id)
  return P.done({ P.lease_view(r), '1' })
end

if OP == 'withdraw' then
  -- A waiting fetch whose wait ended leaves as if it had never come, and
  -- is refused `exhausted` (also when another request withdrew it first);
  -- one granted by now stays.
  local r = rec_get(A[5])
  if not r then return P.refuse('exhausted', next_deadline()) end
  if r.st ~= 'waiting' then return P.done({ P.lease_view(r) }) end
  local last = P.lease_view(r)
  watch_clear(r)
  unlink_waiting(r)
  incr('enqueued_total', -1)
  rec_drop(r.id)
  for i, id in ipairs(changed) do
    if id == r.id then
      table.remove(changed, i)
      changed_seen[id] = nil
      break
    end
  end
  flush()
  P.publish({ withdrawn = { last } })
  return fail('exhausted', next_deadline())
end

if OP == 'recycle' or OP == 'recycle_element' then
  local id = A[5]
  if OP == 'recycle_element' then
    local e = P.el_get(A[5])
    if not e then return P.refuse('element_not_found', A[5]) end
    if not e.l then return P.refuse('element_free', A[5]) end
    id = e.l
  end
  local r, err = P.need(id)
  if not r then return err end
  if r.st ~= 'granted' then return P.refuse('not_granted', r.st) end
  finish(r, 'completed', NOW, nil)
  grant_free()
  P.assign()
  return P.done({ P.lease_view(r) })
end

if OP == 'undelivered' then
  -- ARGV: id, fence: the lease is recycled (reason undelivered) if it still
  -- holds that grant and no retry named it.
  local r = rec_get(A[5])
  if not r or r.st ~= 'granted' or r.fence ~= A[6] or r.rt then return P.done({}) end
  finish(r, 'completed', NOW, 'undelivered')
  grant_free()
  P.assign()
  return P.done({ P.lease_view(r) })
end

if OP == 'extend' then
  -- ARGV: id, lease µs ('' = its own or the pool's), lease seconds.
  if P.lease_excess(A[7]) then return P.refuse('lease_excess', cfg.hold_seconds) end
  local r, err = P.need(A[5])
  if not r then return err end
  if r.st ~= 'granted' then return P.refuse('not_granted', r.st) end
  hear(r)
  local hold = num(A[6]) or effective_hold(r)
  if r.dl then
    local current = num(r.dl)
    if hold <= 0 then
      redis.call('ZREM', K_EXP, exp_member(r))
      r.dl = nil
      touched = true
    elseif NOW + hold > current then
      r.dl = int_text(NOW + hold)
      redis.call('ZADD', K_EXP, NOW + hold, exp_member(r))
      touched = true
    end
    rec_put(r)
  end
  return P.done({ P.lease_view(r) })
end

if OP == 'lease' then
  -- ARGV: id, heard of until (µs: a long-poll parked on it until then; '' = now).
  local r, err = P.need(A[5])
  if not r then return err end
  hear(r, num(A[6]))
  return P.done({ P.lease_view(r) })
end

if OP == 'state' then
  -- ARGV: limit, order of the element the page resumes after ('' = first page).
  -- Reply: more, element count, waiting count, size, available, leased,
  -- waiting, next expiry, granted, completed, expired, released, grown,
  -- abandoned and unclaimed totals, the config fields, the elements, the waiting leases.
  local limit = num(A[5])
  local from = '-inf'
  if A[6] ~= '' then from = '(' .. A[6] end
  local ids = redis.call('ZRANGEBYSCORE', K_ORDER, from, '+inf', 'LIMIT', 0, limit + 1)
  local elements, waiting = {}, {}
  for i = 1, math.min(limit, #ids) do elements[i] = P.element_view(ids[i], P.el_get(ids[i])) end
  if A[6] == '' and limit > 0 then
    for i, id in ipairs(redis.call('ZRANGE', K_WAIT, 0, limit - 1)) do waiting[i] = P.lease_view(rec_get(id)) end
  end
  local n, free = P.count(), P.available()
  local m = {}
  for _, field in ipairs({ 'granted_total', 'completed_total', 'expired_total', 'released_total', 'grown_total',
    'abandoned_total', 'unclaimed_total' }) do
    m[#m + 1] = meta[field] or '0'
  end
  local out = { #ids > limit and '1' or '0', int_text(#elements), int_text(#waiting), int_text(n), int_text(free),
    int_text(n - free), int_text(redis.call('ZCARD', K_WAIT)), next_deadline() }
  for _, x in ipairs(m) do out[#out + 1] = x end
  for _, list in ipairs({ P.config_fields(), elements, waiting }) do
    for _, x in ipairs(list) do out[#out + 1] = x end
  end
  return P.done(out)
end

if OP == 'patch' then
  -- ARGV: max_waiting, lease seconds, lease µs ('' = unchanged), grow given
  -- ('1'), grow max, grow prefix, idle seconds, idle µs, claim seconds, claim µs ('' = unchanged).
  local before = P.config_fields()
  local was_idle = cfg.idle_us
  if A[5] ~= '' then meta_set('max_waiting', A[5]) end
  if A[6] ~= '' then
    meta_set('hold_seconds', A[6])
    meta_set('hold_us', A[7])
  end
  if A[8] == '1' then
    meta_set('grow_max', A[9])
    meta_set('grow_prefix', A[10])
  end
  for i, field in ipairs({ 'idle_seconds', 'idle_us', 'claim_seconds', 'claim_us' }) do
    if A[10 + i] ~= '' then meta_set(field, A[10 + i]) end
  end
  load_config()
  rewatch(was_idle)
  P.grow(0)
  local after = P.config_fields()
  return P.done(after, { config_before = before, config = after })
end

if OP == 'put_element' then
  -- ARGV: id, data ('' none). Reply: the element, '1' when created.
  local id, data = A[5], A[6]
  if data == '' then data = nil end
  local e = P.el_get(id)
  if e then
    e.d = data
    P.el_put(id, e)
    return P.done({ P.element_view(id, e), '0' })
  end
  if P.count() >= ELEMENT_LIMIT then return P.refuse('too_many_elements', int_text(ELEMENT_LIMIT)) end
  P.append(id, data)
  P.sync_capacity()
  return P.done({ P.element_view(id, P.el_get(id)), '1' }, { element = id })
end

if OP == 'remove_element' then
  -- ARGV: id, force ('1'). Reply: the element as it was (no lease), the
  -- lease its removal ended ('' none).
  local id = A[5]
  local e = P.el_get(id)
  if not e then return P.refuse('element_not_found', id) end
  if e.l and A[6] ~= '1' then return P.refuse('element_leased', e.l) end
  redis.call('HDEL', K_EL, id)
  redis.call('ZREM', K_ORDER, id)
  redis.call('ZREM', K_FREE, id)
  -- Lower the capacity first, so ending the lease grants nobody.
  P.sync_capacity()
  local ended = ''
  local lease = e.l
  e.l = nil
  local removed = P.element_view(id, e)
  if lease then
    local r = rec_get(lease)
    finish(r, 'released', NOW, nil)
    grant_free()
    P.assign()
    local v = P.lease_table(r)
    v.data = e.d
    ended = cjson.encode(v)
  end
  return P.done({ removed, ended }, { element = id })
end

return fail('bad_operation', OP)
