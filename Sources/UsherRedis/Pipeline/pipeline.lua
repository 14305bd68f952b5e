-- A pipeline (PipelineEngine's rules), one EVALSHA per operation.
--
-- KEYS: [1] meta hash, [2] items hash (id -> record, cjson), [3] ready (sorted
-- set, every score 0: members "<7 digits: 1000000 - priority><16 digits: seq
-- + 2^52>|<id>" sort in hand-out order), [4] timers (members "<16 digits:
-- timer seq>|<id>" by deadline µs: delays ending and ack deadlines), [5] dead
-- (ids by dead serial), [6] finished (ids by finish serial), [7] filters hash
-- (name -> the filter as Swift's JSON text, never read here).
--
-- meta: name, config fields (capacity, max_in_flight, ack_s + ack_us,
-- max_deliveries, history, dedup_s + dedup_us, cfilters: the creation filters
-- as JSON text), paused, fence, lastid, fseq (front, decreasing), bseq (back),
-- tseq, dseq, hseq, fver (filters version), nd (delayed), nf (in flight) and
-- the totals c_*.
--
-- A record: id, p (payload JSON text), pri, st (status), dl (deliveries), pu
-- (pushed µs), av (available), tk (taken), ak (ack deadline), fe (fence), da
-- (dead at), rm (its ready member), tm (its timer member), tf (to front after
-- a delay). Times and fences are µs integers kept as decimal text.

local K_META, K_ITEMS, K_READY, K_TIMERS, K_DEAD, K_FIN, K_FILTERS =
  KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6], KEYS[7]

local SEQ_BIAS = 4503599627370496
local PRIORITY_BIAS = 1000000

-- Everything the script keeps in Lua locals lives in P (the main chunk allows 200 locals).
local P = {cache = {}, dirty = {}, dirty_list = {}, cfg = {}, events = {}, items = false, room = false,
  changed = false}

local function num(text) return tonumber(text) end

function P.get(id)
  local r = P.cache[id]
  if r ~= nil then return r or nil end
  local text = redis.call('HGET', K_ITEMS, id)
  if not text then
    P.cache[id] = false
    return nil
  end
  r = cjson.decode(text)
  P.cache[id] = r
  return r
end

function P.put(r)
  P.cache[r.id] = r
  P.changed = true
  if not P.dirty[r.id] then
    P.dirty[r.id] = true
    P.dirty_list[#P.dirty_list + 1] = r.id
  end
end

function P.drop(id)
  P.cache[id] = false
  P.dirty[id] = nil
  P.changed = true
  redis.call('HDEL', K_ITEMS, id)
end

function P.save_items()
  for _, id in ipairs(P.dirty_list) do
    if P.dirty[id] and P.cache[id] then redis.call('HSET', K_ITEMS, id, cjson.encode(P.cache[id])) end
  end
  P.dirty, P.dirty_list = {}, {}
end

function P.load()
  local f = redis.call('HMGET', K_META, 'name', 'capacity', 'max_in_flight', 'ack_us', 'max_deliveries', 'history',
    'dedup_us', 'paused')
  if not f[1] then return false end
  local c = P.cfg
  c.name, c.capacity, c.max_in_flight, c.ack_us = f[1], num(f[2]), num(f[3]), num(f[4])
  c.max_deliveries, c.history, c.dedup_us, c.paused = num(f[5]), num(f[6]), num(f[7]), f[8] == '1'
  return true
end

function P.incr(field, by)
  P.changed = true
  return redis.call('HINCRBY', K_META, field, by or 1)
end

function P.meta_num(field)
  return num(redis.call('HGET', K_META, field) or '0')
end

function P.count()
  return redis.call('ZCARD', K_READY) + P.meta_num('nd') + P.meta_num('nf')
end

function P.has_room(n)
  return P.count() + (n or 1) <= P.cfg.capacity
end

function P.event(kind, r, reason)
  local e = {t = kind, item = r}
  if reason then e.reason = reason end
  P.events[#P.events + 1] = e
  P.changed = true
end

-- Timers

function P.unschedule(r)
  if r.tm then
    redis.call('ZREM', K_TIMERS, r.tm)
    r.tm = nil
  end
end

function P.schedule(r, at)
  P.unschedule(r)
  local seq = P.incr('tseq')
  r.tm = string.format('%016.0f', seq) .. '|' .. r.id
  redis.call('ZADD', K_TIMERS, int_text(at), r.tm)
end

-- Ready order: higher priority first, then seq (front: decreasing; back: increasing).

function P.ready_prefix(priority, seq)
  return string.format('%07d', PRIORITY_BIAS - priority) .. string.format('%016.0f', seq + SEQ_BIAS)
end

function P.make_ready(r, front)
  local seq
  if front then seq = P.incr('fseq', -1) else seq = P.incr('bseq') end
  r.st, r.tf = 'ready', nil
  P.unschedule(r)
  r.rm = P.ready_prefix(r.pri, seq) .. '|' .. r.id
  redis.call('ZADD', K_READY, 0, r.rm)
  P.put(r)
  P.items = true
end

function P.unready(r)
  redis.call('ZREM', K_READY, r.rm)
  r.rm = nil
end

function P.position(r)
  if r.st ~= 'ready' then return nil end
  return redis.call('ZRANK', K_READY, r.rm) + 1
end

-- Finished items (consumed, cancelled): remembered without payload, at most `history`.

function P.trim_finished()
  local extra = redis.call('ZCARD', K_FIN) - P.cfg.history
  if extra <= 0 then return end
  local gone = redis.call('ZPOPMIN', K_FIN, extra)
  for i = 1, #gone, 2 do P.drop(gone[i]) end
end

function P.remember(r)
  if P.cfg.history <= 0 then
    P.drop(r.id)
    return
  end
  local record = {}
  for k, v in pairs(r) do record[k] = v end
  record.p, record.ak, record.rm, record.tm, record.tf = 'null', nil, nil, nil, nil
  P.put(record)
  redis.call('ZADD', K_FIN, P.incr('hseq'), r.id)
  P.trim_finished()
end

-- The dead list, at most `capacity`.

function P.trim_dead()
  local extra = redis.call('ZCARD', K_DEAD) - P.cfg.capacity
  if extra <= 0 then return end
  local gone = redis.call('ZPOPMIN', K_DEAD, extra)
  for i = 1, #gone, 2 do P.drop(gone[i]) end
  P.incr('c_deaddropped', extra)
end

function P.kill(r, at)
  r.st, r.da, r.ak = 'dead', int_text(at), nil
  P.unschedule(r)
  P.put(r)
  redis.call('ZADD', K_DEAD, P.incr('dseq'), r.id)
  P.incr('c_dead')
  P.trim_dead()
  P.room = true
  return r
end

-- An in-flight item comes back: dead after `max_deliveries`, else to the front now or after a delay.
function P.give_back(r, delay_us, at)
  P.incr('nf', -1)
  P.items = true
  r.ak = nil
  P.unschedule(r)
  if r.dl >= P.cfg.max_deliveries then return P.kill(r, at) end
  if delay_us > 0 then
    r.st, r.tf = 'delayed', true
    r.av = int_text(at + delay_us)
    P.schedule(r, at + delay_us)
    P.incr('nd')
    P.put(r)
  else
    r.av = int_text(at)
    P.make_ready(r, true)
  end
  return r
end

-- Applies every deadline at or before NOW, in deadline order (ties in filing order).
function P.advance()
  while true do
    local due = redis.call('ZRANGEBYSCORE', K_TIMERS, '-inf', int_text(NOW), 'WITHSCORES', 'LIMIT', 0, 100)
    if #due == 0 then return end
    for i = 1, #due, 2 do
      local at = num(due[i + 1])
      local id = string.match(due[i], '^%d+|(.+)$')
      local r = P.get(id)
      redis.call('ZREM', K_TIMERS, due[i])
      if r then r.tm = nil end
      if r and r.st == 'delayed' then
        P.incr('nd', -1)
        P.make_ready(r, r.tf)
      elseif r and r.st == 'in_flight' then
        local comes_back = r.dl < P.cfg.max_deliveries
        P.give_back(r, 0, at)
        if comes_back then
          P.incr('c_redelivered')
          P.redelivered = (P.redelivered or 0) + 1
        else
          P.dead_lettered = (P.dead_lettered or 0) + 1
        end
      end
    end
  end
end

function P.next_deadline()
  local first = redis.call('ZRANGE', K_TIMERS, 0, 0, 'WITHSCORES')
  if #first == 0 then return nil end
  return num(first[2])
end

function P.next_text()
  local n = P.next_deadline()
  return n and int_text(n) or ''
end

-- Saves and publishes what this call changed, once.
function P.flush()
  P.save_items()
  if not P.changed then return end
  local notice = {kind = 'pipeline', name = P.cfg.name, time = int_text(NOW)}
  local n = P.next_deadline()
  if n then notice.next = int_text(n) end
  if P.items then notice.items = true end
  if P.room then notice.room = true end
  if P.redelivered then notice.redelivered = P.redelivered end
  if P.dead_lettered then notice.dead_lettered = P.dead_lettered end
  if #P.events > 0 then notice.events = P.events end
  if P.updated then notice.updated = P.updated end
  publish(notice)
end

function P.refuse(code, detail)
  P.flush()
  return fail(code, detail)
end

-- An ack limit in µs ('' = the pipeline's): a shorter one than the pipeline's; 0 only when it has none.
function P.effective_ack(text)
  if text == '' then return P.cfg.ack_us end
  local wanted = num(text)
  if P.cfg.ack_us == 0 then return wanted end
  if wanted <= 0 then
    return nil, P.refuse('invalid', 'ack_seconds|0 (no limit) is only allowed when the pipeline\'s ack_seconds is 0')
  end
  return math.min(wanted, P.cfg.ack_us)
end

-- The in-flight record of `id` under `fence` ('' = any), or a refusal.
function P.in_flight(id, fence)
  local r = P.get(id)
  if not r then return nil, P.refuse('not_found', id) end
  if r.st ~= 'in_flight' then return nil, P.refuse('not_in_flight', r.st) end
  if fence ~= '' and fence ~= r.fe then return nil, P.refuse('not_in_flight', r.st) end
  return r
end

-- Push

function P.is_duplicate(r)
  return P.cfg.dedup_us > 0 and NOW < num(r.pu) + P.cfg.dedup_us
end

function P.is_known(id)
  local r = P.get(id)
  if not r then return false end
  if r.st ~= 'consumed' and r.st ~= 'cancelled' then return true end
  return P.is_duplicate(r)
end

-- The item a push of `id` repeats, or nil when the push adds one (a finished
-- record past dedup_seconds is forgotten so the new item takes its id).
function P.existing(id)
  local r = P.get(id)
  if not r then return nil end
  if (r.st == 'consumed' or r.st == 'cancelled') and not P.is_duplicate(r) then
    redis.call('ZREM', K_FIN, id)
    P.drop(id)
    return nil
  end
  P.incr('c_dedup')
  return r
end

function P.make_id()
  while true do
    local id = string.format('%016.0f', next_after_time(K_META, 'lastid'))
    if not P.get(id) then return id end
  end
end

-- ARGV layout of one push: id or '', payload text, priority, delay µs.
function P.insert(id, payload, priority, delay_us)
  if id == '' then id = P.make_id() end
  local r = {id = id, p = payload, pri = priority, st = 'delayed', dl = 0, pu = int_text(NOW)}
  P.incr('c_pushed')
  if delay_us > 0 then
    r.av = int_text(NOW + delay_us)
    P.schedule(r, NOW + delay_us)
    P.incr('nd')
    P.put(r)
  else
    r.av = int_text(NOW)
    P.make_ready(r, false)
  end
  P.event('pushed', r)
  return r
end

function P.push_reply(r, created)
  local pos = P.position(r)
  return cjson.encode({item = r, position = pos and int_text(pos) or '', created = created})
end

-- Config

function P.config_reply()
  local f = redis.call('HMGET', K_META, 'capacity', 'max_in_flight', 'ack_s', 'max_deliveries', 'history', 'dedup_s',
    'cfilters', 'paused')
  return cjson.encode({capacity = f[1], max_in_flight = f[2], ack_seconds = f[3], max_deliveries = f[4],
    history = f[5], dedup_seconds = f[6], filters = f[7], paused = f[8]})
end

-- ARGV pairs of config fields (as create and patch pass them): field, value.
function P.set_config(from)
  for i = from, #ARGV, 2 do redis.call('HSET', K_META, ARGV[i], ARGV[i + 1]) end
end

function P.counts_reply()
  local f = redis.call('HMGET', K_META, 'c_pushed', 'c_delivered', 'c_consumed', 'c_filtered', 'c_redelivered',
    'c_dead', 'c_deaddropped', 'c_cancelled', 'c_extended', 'c_dedup')
  for i = 1, #f do f[i] = f[i] or '0' end
  return f
end

function P.filters_reply()
  return redis.call('HGETALL', K_FILTERS)
end

-- Operations

if OP == 'create' then
  -- ARGV[4] name, [5..] config field/value pairs (capacity, max_in_flight,
  -- ack_s, ack_us, max_deliveries, history, dedup_s, dedup_us, cfilters),
  -- then 'filter:<name>' / filter JSON pairs.
  if P.load() then
    P.advance()
    P.flush()
    return {P.next_text(), P.config_reply(), '0'}
  end
  redis.call('UNLINK', unpack(KEYS))  -- what an eviction of the meta key left
  redis.call('HSET', K_META, 'name', ARGV[4], 'paused', '0', 'fence', int_text(NOW), 'lastid', int_text(NOW),
    'fseq', '0', 'bseq', '0', 'tseq', '0', 'dseq', '0', 'hseq', '0', 'fver', '1', 'nd', '0', 'nf', '0')
  for i = 5, #ARGV, 2 do
    local filter = string.match(ARGV[i], '^filter:(.+)$')
    if filter then
      redis.call('HSET', K_FILTERS, filter, ARGV[i + 1])
    else
      redis.call('HSET', K_META, ARGV[i], ARGV[i + 1])
    end
  end
  P.load()
  return {'', P.config_reply(), '1'}
end

if OP == 'delete' then
  if redis.call('EXISTS', K_META) == 0 then return {'', '0'} end
  local name = redis.call('HGET', K_META, 'name')
  redis.call('UNLINK', K_META, K_ITEMS, K_READY, K_TIMERS, K_DEAD, K_FIN, K_FILTERS)
  publish({kind = 'pipeline', name = name, time = int_text(NOW), deleted = true})
  return {'', '1'}
end

if not P.load() then return fail('gone', '') end
P.advance()

if OP == 'tick' then
  P.flush()
  return {P.next_text()}
end

if OP == 'push' then
  -- ARGV[4] id or '', [5] payload, [6] priority, [7] delay µs.
  local id = ARGV[4]
  if id ~= '' then
    local r = P.existing(id)
    if r then
      P.flush()
      return {P.next_text(), P.push_reply(r, false)}
    end
  end
  if not P.has_room(1) then return P.refuse('full', '') end
  local r = P.insert(id, ARGV[5], num(ARGV[6]), num(ARGV[7]))
  local reply = P.push_reply(r, true)
  P.flush()
  return {P.next_text(), reply}
end

if OP == 'push_batch' then
  -- ARGV[4] 'valid' or 'invalid' (an entry the caller refused: it answers
  -- that, after the size check), [5..]: four per entry (id or '', payload,
  -- priority, delay µs).
  local n = (#ARGV - 4) / 4
  if n > P.cfg.capacity then
    return P.refuse('invalid', 'items|the batch has ' .. n .. ' items, more than the capacity ' .. P.cfg.capacity)
  end
  if ARGV[4] ~= 'valid' then return P.refuse('invalid', '|entries') end
  local seen, needed = {}, 0
  for i = 0, n - 1 do
    local id = ARGV[5 + i * 4]
    if id == '' then
      needed = needed + 1
    elseif not P.is_known(id) and not seen[id] then
      seen[id] = true
      needed = needed + 1
    end
  end
  if not P.has_room(needed) then return P.refuse('full', '') end
  local out = {P.next_text()}
  for i = 0, n - 1 do
    local b = 5 + i * 4
    local id = ARGV[b]
    local r = id ~= '' and P.existing(id) or nil
    if r then
      out[#out + 1] = P.push_reply(r, false)
    else
      r = P.insert(id, ARGV[b + 1], num(ARGV[b + 2]), num(ARGV[b + 3]))
      out[#out + 1] = P.push_reply(r, true)
    end
  end
  P.flush()
  out[1] = P.next_text()
  return out
end

if OP == 'take' then
  -- ARGV[4] max, [5] ack µs or '', [6] most bytes (at least one item goes).
  -- Reply: next, filters version, '1' when announced here, then one record per hand-out. With
  -- filters, the caller runs them and reports with 'taken'; without, the
  -- 'delivered' events go out here.
  local ack, refusal = P.effective_ack(ARGV[5])
  if not ack then return refusal end
  local fver = redis.call('HGET', K_META, 'fver')
  local announce = redis.call('HLEN', K_FILTERS) == 0
  if P.cfg.paused then
    P.flush()
    return {P.next_text(), fver, '1'}
  end
  local limit = math.min(num(ARGV[4]), P.cfg.max_in_flight - P.meta_num('nf'))
  local max_bytes = num(ARGV[6])
  local out, bytes = {}, 0
  while #out < limit do
    local first = redis.call('ZRANGE', K_READY, 0, 0)
    if #first == 0 then break end
    local r = P.get(string.match(first[1], '|(.+)$'))
    local size = 256 + #r.id + #r.p
    if #out > 0 and bytes + size > max_bytes then break end
    bytes = bytes + size
    P.unready(r)
    local fence = next_after_time(K_META, 'fence')
    r.st, r.dl, r.tk, r.fe = 'in_flight', r.dl + 1, int_text(NOW), int_text(fence)
    if ack > 0 then
      r.ak = int_text(NOW + ack)
      P.schedule(r, NOW + ack)
    end
    P.put(r)
    P.incr('nf')
    P.incr('c_delivered')
    if announce then P.event('delivered', r) end
    out[#out + 1] = r
  end
  local reply = {P.next_text(), fver, announce and '1' or '0'}
  for _, r in ipairs(out) do reply[#reply + 1] = cjson.encode(r) end
  P.flush()
  reply[1] = P.next_text()
  return reply
end

if OP == 'taken' then
  -- After a take with filters: ARGV[4..] triples (id, fence, filtered payload
  -- text, or '' when a filter dropped it). Dropped items leave (filtered_total,
  -- not a hand-out); the others are announced with the payload delivered.
  for i = 4, #ARGV, 3 do
    local r = P.get(ARGV[i])
    if r and r.st == 'in_flight' and r.fe == ARGV[i + 1] then
      if ARGV[i + 2] == '' then
        P.unschedule(r)
        P.drop(r.id)
        P.incr('nf', -1)
        P.incr('c_delivered', -1)
        P.incr('c_filtered')
        P.room = true
        P.items = true
      else
        local shown = {}
        for k, v in pairs(r) do shown[k] = v end
        shown.p = ARGV[i + 2]
        P.event('delivered', shown)
      end
    end
  end
  P.flush()
  return {P.next_text()}
end

if OP == 'consume' then
  -- ARGV[4] id, [5] fence or ''.
  local r, refusal = P.in_flight(ARGV[4], ARGV[5])
  if not r then return refusal end
  P.unschedule(r)
  P.incr('nf', -1)
  P.incr('c_consumed')
  P.items, P.room = true, true
  r.ak, r.st = nil, 'consumed'
  local reply = cjson.encode(r)
  P.event('consumed', r)
  P.remember(r)
  P.flush()
  return {P.next_text(), reply}
end

if OP == 'release' then
  -- ARGV[4] id, [5] delay µs, [6] fence or ''.
  local r, refusal = P.in_flight(ARGV[4], ARGV[6])
  if not r then return refusal end
  P.give_back(r, num(ARGV[5]), NOW)
  P.event(r.st == 'dead' and 'dead-lettered' or 'released', r)
  P.flush()
  return {P.next_text(), cjson.encode(r)}
end

if OP == 'extend' then
  -- ARGV[4] id, [5] ack µs or '', [6] fence or ''.
  local ack, refusal = P.effective_ack(ARGV[5])
  if not ack then return refusal end
  local r, refused = P.in_flight(ARGV[4], ARGV[6])
  if not r then return refused end
  P.incr('c_extended')
  if r.ak then
    if ack == 0 then
      r.ak = nil
      P.unschedule(r)
    elseif num(r.ak) < NOW + ack then
      r.ak = int_text(NOW + ack)
      P.schedule(r, NOW + ack)
    end
    P.put(r)
  end
  P.event('extended', r)
  P.flush()
  return {P.next_text(), cjson.encode(r)}
end

if OP == 'undeliver' then
  -- ARGV[4..] pairs (id, fence): hand-outs that never reached their consumer.
  local out = {''}
  for i = 4, #ARGV, 2 do
    local r = P.get(ARGV[i])
    if r and r.st == 'in_flight' and r.fe == ARGV[i + 1] then
      r.dl = r.dl - 1
      if r.dl == 0 then r.tk, r.fe = nil, nil end
      P.give_back(r, 0, NOW)
      P.event('released', r, 'undelivered')
      out[#out + 1] = cjson.encode(r)
    end
  end
  P.flush()
  out[1] = P.next_text()
  return out
end

if OP == 'cancel' then
  -- ARGV[4] id. A finished item answers as it is, with no event.
  local r = P.get(ARGV[4])
  if not r then return P.refuse('not_found', ARGV[4]) end
  if r.st == 'consumed' or r.st == 'cancelled' then
    P.flush()
    return {P.next_text(), cjson.encode(r)}
  end
  if r.st == 'in_flight' then return P.refuse('in_flight', '') end
  if r.st == 'dead' then
    redis.call('ZREM', K_DEAD, r.id)
  else
    if r.st == 'ready' then
      P.unready(r)
    else
      P.incr('nd', -1)
      P.unschedule(r)
    end
    P.room = true
  end
  P.incr('c_cancelled')
  r.st = 'cancelled'
  local reply = cjson.encode(r)
  P.event('cancelled', r)
  P.remember(r)
  P.flush()
  return {P.next_text(), reply}
end

if OP == 'item' then
  -- ARGV[4] id: the record and its place while ready ('' otherwise).
  local r = P.get(ARGV[4])
  P.flush()
  if not r then return fail('not_found', ARGV[4]) end
  local pos = P.position(r)
  return {P.next_text(), cjson.encode(r), pos and int_text(pos) or ''}
end

if OP == 'redrive' then
  local moved = 0
  while P.has_room(1) do
    local oldest = redis.call('ZPOPMIN', K_DEAD)
    if #oldest == 0 then break end
    local r = P.get(oldest[1])
    r.dl, r.da, r.tk, r.fe, r.ak = 0, nil, nil, nil, nil
    r.av = int_text(NOW)
    P.make_ready(r, false)
    moved = moved + 1
  end
  P.flush()
  return {P.next_text(), int_text(moved), int_text(redis.call('ZCARD', K_DEAD))}
end

if OP == 'state' then
  -- ARGV[4] limit, [5] cursor prefix ('' = from the first). Reply: next,
  -- config, counts (JSON array of text), gauges "ready delayed in_flight dead
  -- fence paused", more ('1'/'0'), the filters (JSON object text), then the items.
  local limit = num(ARGV[4])
  local members
  if ARGV[5] == '' then
    members = redis.call('ZRANGE', K_READY, 0, limit)
  else
    members = redis.call('ZRANGEBYLEX', K_READY, '(' .. ARGV[5] .. '}', '+', 'LIMIT', 0, limit + 1)
  end
  local more = #members > limit and '1' or '0'
  local g = redis.call('HMGET', K_META, 'nd', 'nf', 'fence', 'paused')
  local gauges = table.concat({redis.call('ZCARD', K_READY), g[1], g[2], redis.call('ZCARD', K_DEAD), g[3], g[4]},
    ' ')
  P.flush()
  local reply = {P.next_text(), P.config_reply(), cjson.encode(P.counts_reply()), gauges, more}
  -- cjson writes an empty table as {}.
  local filters = P.filters_reply()
  reply[#reply + 1] = #filters == 0 and '[]' or cjson.encode(filters)
  for i = 1, math.min(limit, #members) do
    local r = P.get(string.match(members[i], '|(.+)$'))
    reply[#reply + 1] = cjson.encode(r)
  end
  return reply
end

if OP == 'dead' then
  -- ARGV[4] limit, [5] after serial ('' = from the oldest). Reply: next,
  -- dead count, more, then pairs (serial, record).
  local limit = num(ARGV[4])
  local from = ARGV[5] == '' and '-inf' or '(' .. ARGV[5]
  local ids = redis.call('ZRANGEBYSCORE', K_DEAD, from, '+inf', 'WITHSCORES', 'LIMIT', 0, limit + 1)
  P.flush()
  local more = #ids > 2 * limit and '1' or '0'
  local reply = {P.next_text(), int_text(redis.call('ZCARD', K_DEAD)), more}
  for i = 1, math.min(#ids, 2 * limit), 2 do
    reply[#reply + 1] = ids[i + 1]
    reply[#reply + 1] = cjson.encode(P.get(ids[i]))
  end
  return reply
end

if OP == 'patch' then
  -- ARGV[4] paused ('', '0', '1'), [5..] config field/value pairs.
  local before = P.config_reply()
  local old_capacity, old_in_flight = P.cfg.capacity, P.cfg.max_in_flight
  local was_paused = P.cfg.paused
  P.set_config(5)
  if ARGV[4] ~= '' then redis.call('HSET', K_META, 'paused', ARGV[4]) end
  P.load()
  if P.cfg.capacity > old_capacity then P.room = true end
  if P.cfg.max_in_flight > old_in_flight then P.items = true end
  if was_paused and not P.cfg.paused then P.items = true end
  P.trim_dead()
  P.trim_finished()
  local after = P.config_reply()
  if after ~= before then
    P.changed = true
    P.updated = {before = before, after = after}
  end
  P.flush()
  return {P.next_text(), after}
end

if OP == 'filters' then
  P.flush()
  local reply = {P.next_text(), redis.call('HGET', K_META, 'fver')}
  for _, v in ipairs(P.filters_reply()) do reply[#reply + 1] = v end
  return reply
end

if OP == 'filter_put' then
  -- ARGV[4] name, [5] filter JSON, [6] the most filters. Reply: next, '1' when new.
  local known = redis.call('HEXISTS', K_FILTERS, ARGV[4]) == 1
  if not known and redis.call('HLEN', K_FILTERS) >= num(ARGV[6]) then
    return P.refuse('invalid', 'filters|a pipeline has at most ' .. ARGV[6] .. ' filters')
  end
  redis.call('HSET', K_FILTERS, ARGV[4], ARGV[5])
  P.incr('fver')
  P.items = true
  P.flush()
  return {P.next_text(), known and '0' or '1'}
end

if OP == 'filter_remove' then
  -- ARGV[4] name.
  if redis.call('HDEL', K_FILTERS, ARGV[4]) == 0 then return P.refuse('not_found', ARGV[4]) end
  P.incr('fver')
  P.items = true
  P.flush()
  return {P.next_text()}
end

return fail('unknown_operation', OP)
