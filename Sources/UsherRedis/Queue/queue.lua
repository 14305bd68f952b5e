-- The queue kind: every operation of QueueEngine (Sources/UsherCore/Line),
-- one EVALSHA each. RedisQueueStore.swift lists KEYS in this order.
local K_META, K_WAIT, K_ARR, K_HOLD, K_EXP, K_DELAYED, K_VIS, K_LK, K_LP, K_FIN, K_HOLDS =
  KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6], KEYS[7], KEYS[8], KEYS[9], KEYS[10], KEYS[11]
-- meta: config fields, totals, `fence` (the last one; the first grant gets
-- the creation time, as in memory), `lastid`, `seq`, `dseq`, `fseq`, `hsum`, `created`.
-- wait: waiting ids by (PRIORITY_BIAS - priority) * 2^32 + arrival seq (grant order).
-- arr: waiting ids by arrival seq (the most recent arrival, the oldest waiter).
-- hold: holders' ids by fence (grant order). exp: "<fence %020>:<id>" by expiry.
-- delayed: "<dseq %016>:<id>" by delay end. vis: id -> record (cjson, numbers as text).
-- lk: key -> most recent waiting id with it; lp: key+action -> the same.
-- fin: finished ids in finish order. holds: the last 100 finished holds in µs.
-- A record (VisitorRecord): id, key, action, payload (JSON text), pri, st
-- (status), rs (reason), enq, gat, dl (VisitorRecord.deadline), fat, fence,
-- hold (µs asked for, -1 none), seq (arrival number while waiting), dm (its
-- `delayed` member), kp/kn and pp/pn (the key and key+action chains), rel
-- (merged_into or cancelled_with).

local PRIORITY_BIAS = 1000000
local SEQ_SPAN = 4294967296
local HOLD_WINDOW = 100

local function num(text) return tonumber(text) end

-- Records: loaded once per script, written back by `flush`.
local cache, dirty, dirty_list = {}, {}, {}

local function rec_get(id)
  local r = cache[id]
  if r ~= nil then return r or nil end
  local text = redis.call('HGET', K_VIS, id)
  if not text then
    cache[id] = false
    return nil
  end
  r = cjson.decode(text)
  cache[id] = r
  return r
end

local function rec_put(r)
  cache[r.id] = r
  if not dirty[r.id] then
    dirty[r.id] = true
    dirty_list[#dirty_list + 1] = r.id
  end
end

local function rec_drop(id)
  cache[id] = false
  dirty[id] = nil
  redis.call('HDEL', K_VIS, id)
end

local function flush()
  for _, id in ipairs(dirty_list) do
    if dirty[id] and cache[id] then redis.call('HSET', K_VIS, id, cjson.encode(cache[id])) end
  end
  dirty, dirty_list = {}, {}
end

-- Config, read once.
local cfg = {}
local function load_config()
  local f = redis.call('HMGET', K_META, 'capacity', 'max_waiting', 'hold_seconds', 'hold_us', 'dedup',
    'opposites', 'history')
  cfg.capacity = num(f[1])
  cfg.max_waiting = num(f[2])
  cfg.hold_seconds = f[3]
  cfg.hold_us = num(f[4])
  cfg.dedup = f[5]
  cfg.opposites_text = f[6]
  cfg.history = num(f[7])
  cfg.opposite_of = {}
  for _, pair in ipairs(cjson.decode(f[6])) do
    if #pair == 2 then
      local a, b = pair[1], pair[2]
      cfg.opposite_of[a] = cfg.opposite_of[a] or {}
      cfg.opposite_of[b] = cfg.opposite_of[b] or {}
      table.insert(cfg.opposite_of[a], b)
      table.insert(cfg.opposite_of[b], a)
    end
  end
end

local function config_fields()
  return { int_text(cfg.capacity), int_text(cfg.max_waiting), cfg.hold_seconds, cfg.dedup, cfg.opposites_text,
    int_text(cfg.history) }
end

-- Changes of the current operation: ids in first-change order.
local changed, changed_seen = {}, {}
local function note(id)
  if not changed_seen[id] then
    changed_seen[id] = true
    changed[#changed + 1] = id
  end
end
-- A deadline moved without any status changing (an extend): tell it too.
local touched = false
-- µs each visitor granted by this operation waited in the line (the wait histogram).
local waits = {}

-- (+ 0 turns -0, which HINCRBY refuses, into 0.)
local function incr(field, by) redis.call('HINCRBY', K_META, field, int_text((by or 1) + 0)) end

local function next_counter(field)
  return redis.call('HINCRBY', K_META, field, 1) - 1
end

-- Lists -----------------------------------------------------------------

local function pair_key(key, action)
  return #key .. ':' .. key .. (action and ('+' .. action) or '-')
end

local function wait_score(r)
  return (PRIORITY_BIAS - num(r.pri)) * SEQ_SPAN + num(r.seq)
end

-- Numbers the waiting visitors 0, 1, … in arrival order again, when arrival
-- numbers would reach SEQ_SPAN (and break the `wait` score): once every 2^32
-- arrivals, O(n log n). Cursors into the line from before skip or repeat.
local function renumber_line()
  local ids = redis.call('ZRANGE', K_ARR, 0, -1)
  for i, id in ipairs(ids) do
    local r = rec_get(id)
    r.seq = int_text(i - 1)
    redis.call('ZADD', K_ARR, i - 1, id)
    redis.call('ZADD', K_WAIT, (PRIORITY_BIAS - num(r.pri)) * SEQ_SPAN + i - 1, id)
    rec_put(r)
  end
  redis.call('HSET', K_META, 'seq', int_text(#ids))
end

local function link_waiting(r)
  if num(redis.call('HGET', K_META, 'seq')) >= SEQ_SPAN then renumber_line() end
  local seq = next_counter('seq')
  r.seq = int_text(seq)
  redis.call('ZADD', K_WAIT, wait_score(r), r.id)
  redis.call('ZADD', K_ARR, seq, r.id)
  if r.key then
    local prev = redis.call('HGET', K_LK, r.key)
    redis.call('HSET', K_LK, r.key, r.id)
    if prev then
      r.kp = prev
      local p = rec_get(prev)
      p.kn = r.id
      rec_put(p)
    end
    local pk = pair_key(r.key, r.action)
    prev = redis.call('HGET', K_LP, pk)
    redis.call('HSET', K_LP, pk, r.id)
    if prev then
      r.pp = prev
      local p = rec_get(prev)
      p.pn = r.id
      rec_put(p)
    end
  end
  rec_put(r)
end

-- Takes `r` out of a doubly linked list (`pf`/`nf` fields) whose last
-- element is indexed under `index_key` in the hash `index`.
local function unlink_chain(r, pf, nf, index, index_key)
  local prev, nxt = r[pf], r[nf]
  if prev then
    local p = rec_get(prev)
    p[nf] = nxt
    rec_put(p)
  end
  if nxt then
    local n = rec_get(nxt)
    n[pf] = prev
    rec_put(n)
  elseif prev then
    redis.call('HSET', index, index_key, prev)
  else
    redis.call('HDEL', index, index_key)
  end
  r[pf], r[nf] = nil, nil
end

local function unlink_waiting(r)
  redis.call('ZREM', K_WAIT, r.id)
  redis.call('ZREM', K_ARR, r.id)
  if r.key then
    unlink_chain(r, 'kp', 'kn', K_LK, r.key)
    unlink_chain(r, 'pp', 'pn', K_LP, pair_key(r.key, r.action))
  end
  rec_put(r)
end

local function exp_member(r) return string.format('%020.0f', num(r.fence)) .. ':' .. r.id end

local function unlink_holder(r)
  redis.call('ZREM', K_HOLD, r.id)
  redis.call('ZREM', K_EXP, exp_member(r))
end

local function record_hold(micros)
  local d = math.max(0, micros)
  redis.call('RPUSH', K_HOLDS, int_text(d))
  incr('hsum', d)
  if redis.call('LLEN', K_HOLDS) > HOLD_WINDOW then
    incr('hsum', -num(redis.call('LPOP', K_HOLDS)))
  end
end

local function mean_hold()
  local n = redis.call('LLEN', K_HOLDS)
  if n == 0 then return nil end
  return num(redis.call('HGET', K_META, 'hsum')) / n
end

-- Endings ---------------------------------------------------------------

local TOTAL_OF = {
  completed = 'completed_total', released = 'released_total', expired = 'expired_total',
  cancelled = 'cancelled_total', merged = 'merged_total',
}

-- A final status for a visitor in no list.
local function settle(r, status, t, reason)
  r.st = status
  r.fat = int_text(t)
  r.rs = reason
  incr(TOTAL_OF[status])
  redis.call('ZADD', K_FIN, next_counter('fseq'), r.id)
  rec_put(r)
  note(r.id)
end

local function finish(r, status, t, reason)
  if r.st == 'delayed' then
    redis.call('ZREM', K_DELAYED, r.dm)
    r.dm = nil
    r.dl = nil
  elseif r.st == 'waiting' then
    unlink_waiting(r)
  elseif r.st == 'granted' then
    unlink_holder(r)
    record_hold(t - num(r.gat))
  else
    return
  end
  settle(r, status, t, reason)
end

-- Dedup and grants --------------------------------------------------------

local function is_opposite(a, b)
  if not a or not b then return false end
  local list = cfg.opposite_of[a]
  if not list then return false end
  for _, x in ipairs(list) do
    if x == b then return true end
  end
  return false
end

-- 'enter', or 'merge'/'cancel' with the waiting visitor it meets (SPEC §2).
local function dedup(key, action)
  if not key or cfg.dedup == 'off' then return 'enter' end
  if cfg.dedup == 'key' then
    local t = redis.call('HGET', K_LP, pair_key(key, action))
    if t then return 'merge', rec_get(t) end
    t = redis.call('HGET', K_LK, key)
    if t then
      local other = rec_get(t)
      if is_opposite(action, other.action) then return 'cancel', other end
    end
    return 'enter'
  end
  local last = redis.call('ZRANGE', K_ARR, -1, -1)[1]
  if not last then return 'enter' end
  local other = rec_get(last)
  if other.key ~= key then return 'enter' end
  if other.action == action then return 'merge', other end
  if is_opposite(action, other.action) then return 'cancel', other end
  return 'enter'
end

local function enter_line(r, t, outcome, other)
  r.dl = int_text(t)
  if outcome == 'enter' then
    link_waiting(r)
  elseif outcome == 'merge' then
    r.rel = other.id
    settle(r, 'merged', t, nil)
  else
    r.rel = other.id
    other.rel = r.id
    finish(other, 'cancelled', t, 'opposite')
    settle(r, 'cancelled', t, 'opposite')
  end
end

local function effective_hold(r)
  local own = num(r.hold)
  if cfg.hold_us == 0 then return math.max(0, own) end
  if own > 0 then return math.min(own, cfg.hold_us) end
  return cfg.hold_us
end

local function grant_free()
  while redis.call('ZCARD', K_HOLD) < cfg.capacity do
    local id = redis.call('ZRANGE', K_WAIT, 0, 0)[1]
    if not id then return end
    local r = rec_get(id)
    unlink_waiting(r)
    waits[#waits + 1] = int_text(NOW - num(r.dl))  -- while waiting, dl is the line entry
    r.st = 'granted'
    r.gat = int_text(NOW)
    local fence = next_after_time(K_META, 'fence')
    r.fence = int_text(fence)
    local hold = effective_hold(r)
    if hold > 0 then
      r.dl = int_text(NOW + hold)
      redis.call('ZADD', K_EXP, NOW + hold, exp_member(r))
    else
      r.dl = nil
    end
    redis.call('ZADD', K_HOLD, fence, id)
    incr('granted_total')
    rec_put(r)
    note(id)
  end
end

-- Operation frame -----------------------------------------------------------

local function first_score(key)
  local top = redis.call('ZRANGE', key, 0, 0, 'WITHSCORES')
  if top[2] then return num(top[2]) end
  return nil
end

-- Forgets finished visitors beyond `history`, then applies every delay end
-- and hold expiry due by NOW, one instant at a time, granting after each.
local function begin()
  load_config()
  local excess = redis.call('ZCARD', K_FIN) - cfg.history
  if excess > 0 then
    local popped = redis.call('ZPOPMIN', K_FIN, excess)
    for i = 1, #popped, 2 do rec_drop(popped[i]) end
  end
  while true do
    local d, e = first_score(K_DELAYED), first_score(K_EXP)
    local t = d
    if not t or (e and e < t) then t = e end
    if not t or t > NOW then break end
    touched = true
    if d == t then
      for _, member in ipairs(redis.call('ZRANGEBYSCORE', K_DELAYED, t, t)) do
        redis.call('ZREM', K_DELAYED, member)
        local r = rec_get(member:sub(18))
        r.dm = nil
        r.st = 'waiting'
        note(r.id)
        enter_line(r, t, dedup(r.key, r.action))
      end
    end
    if e == t then
      for _, member in ipairs(redis.call('ZRANGEBYSCORE', K_EXP, t, t)) do
        finish(rec_get(member:sub(22)), 'expired', t, nil)
      end
    end
    grant_free()
  end
end

local function next_deadline()
  local d, e = first_score(K_DELAYED), first_score(K_EXP)
  if not d or (e and e < d) then d = e end
  if d then return int_text(d) end
  return ''
end

-- Views -----------------------------------------------------------------

-- The estimate's µs as QueueEngine.estimatedWait computes it before rounding, or nil.
local function estimated_wait(position)
  local capacity = cfg.capacity
  if capacity <= 0 or position <= 0 then return nil end
  local mean = mean_hold()
  if not mean and cfg.hold_us > 0 then mean = cfg.hold_us end
  local round = math.floor((position - 1) / capacity)
  local slot = (position - 1) % capacity + 1
  local holding = redis.call('ZCARD', K_HOLD)
  local k = slot + math.max(0, holding - capacity)
  local first
  if redis.call('ZCARD', K_EXP) == holding and k <= holding then
    local at = redis.call('ZRANGE', K_EXP, k - 1, k - 1, 'WITHSCORES')
    first = math.max(0, num(at[2]) - NOW)
  elseif mean then
    first = slot * mean / capacity
  else
    return nil
  end
  local micros = first
  if round > 0 then
    if not mean then return nil end
    micros = micros + round * mean
  end
  return micros
end

-- A view (VisitorView) as JSON text with every number as text.
local function view(r, position)
  local v = {
    id = r.id, key = r.key, action = r.action, payload = r.payload, priority = r.pri, status = r.st,
    enqueued_at = r.enq, reason = r.rs,
  }
  if r.st == 'waiting' then
    position = position or (redis.call('ZRANK', K_WAIT, r.id) + 1)
    v.position = int_text(position)
    v.seq = r.seq
    local wait = estimated_wait(position)
    if wait then v.wait_micros = string.format('%.17g', wait) end
  end
  if r.gat then
    v.granted_at = r.gat
    v.fence = r.fence
    v.expires_at = r.dl
  end
  v.finished_at = r.fat
  if r.st == 'merged' then v.merged_into = r.rel end
  if r.rs == 'opposite' then v.cancelled_with = r.rel end
  return cjson.encode(v)
end

local function publish_changes(extra)
  if #changed == 0 and not touched and not extra then return end
  local views = {}
  for i, id in ipairs(changed) do views[i] = view(cache[id]) end
  local notice = { kind = 'queue', name = ARGV[4], time = int_text(NOW), changed = views, waits = waits }
  local nd = next_deadline()
  if nd ~= '' then notice.next = nd end
  if extra then
    for k, v in pairs(extra) do notice[k] = v end
  end
  -- cjson writes an empty table as {}: the list of views must stay a list.
  if #views == 0 then notice.changed = nil end
  if #waits == 0 then notice.waits = nil end
  publish(notice)
end

-- Ends an operation: writes records back, tells every instance.
local function done(reply, extra)
  flush()
  publish_changes(extra)
  table.insert(reply, 1, next_deadline())
  return reply
end

-- Refuses after applying what was due: what changed is kept and told.
local function refuse(code, detail)
  flush()
  publish_changes(nil)
  return fail(code, detail)
end

local function count_fields()
  local m = redis.call('HMGET', K_META, 'enqueued_total', 'granted_total', 'completed_total', 'released_total',
    'expired_total', 'cancelled_total', 'merged_total', 'timed_out_total')
  local out = {
    int_text(redis.call('ZCARD', K_WAIT)), int_text(redis.call('ZCARD', K_HOLD)),
    int_text(redis.call('ZCARD', K_DELAYED)),
  }
  for _, x in ipairs(m) do out[#out + 1] = x or '0' end
  return out
end

local function full()
  local hold = mean_hold() or cfg.hold_us
  local seconds = math.ceil(hold / 1000000 / math.max(1, cfg.capacity))
  return refuse('full', int_text(math.min(3600, math.max(1, seconds))))
end

local function time_out(r)
  if r.st ~= 'waiting' and r.st ~= 'delayed' then return end
  finish(r, 'cancelled', NOW, 'timeout')
  incr('timed_out_total')
end

-- Operations ------------------------------------------------------------

local A = ARGV

if OP == 'create' then
  if redis.call('EXISTS', K_META) == 1 then
    load_config()
    local reply = config_fields()
    table.insert(reply, 1, '0')
    table.insert(reply, 1, next_deadline())
    return reply
  end
  redis.call('HSET', K_META, 'capacity', A[5], 'max_waiting', A[6], 'hold_seconds', A[7], 'hold_us', A[8],
    'dedup', A[9], 'opposites', A[10], 'history', A[11], 'created', int_text(NOW), 'fence', int_text(NOW - 1),
    'lastid', int_text(NOW), 'seq', '0', 'dseq', '0', 'fseq', '0', 'hsum', '0')
  return { '', '1', A[5], A[6], A[7], A[9], A[10], A[11] }
end

if OP == 'delete' then
  local existed = redis.call('EXISTS', K_META)
  redis.call('UNLINK', unpack(KEYS))  -- frees a big queue's memory off the main thread
  if existed == 1 then publish({ kind = 'queue', name = A[4], time = int_text(NOW), deleted = true }) end
  return { '', int_text(existed) }
end

if redis.call('EXISTS', K_META) == 0 then return fail('gone', '') end

begin()

local function need(id)
  local r = rec_get(id)
  if not r then return nil, refuse('not_found', id) end
  return r
end

if OP == 'tick' then
  return done({})
end

if OP == 'config' then
  return done(config_fields())
end

if OP == 'counts' then
  local reply = count_fields()
  local first = redis.call('ZRANGE', K_ARR, 0, 0)[1]
  reply[#reply + 1] = first and rec_get(first).dl or ''
  return done(reply)
end

if OP == 'patch' then
  -- ARGV: capacity, max_waiting, hold_seconds, hold_us, dedup, opposites, history ('' = unchanged).
  local before = config_fields()
  local names = { 'capacity', 'max_waiting', 'hold_seconds', 'hold_us', 'dedup', 'opposites', 'history' }
  for i, field in ipairs(names) do
    if A[4 + i] ~= '' then redis.call('HSET', K_META, field, A[4 + i]) end
  end
  load_config()
  grant_free()
  local after = config_fields()
  return done(after, { config_before = before, config = after })
end

if OP == 'enqueue' then
  -- ARGV: id, key, action, payload, priority, hold µs (-1 none), hold seconds,
  -- delay µs, problem field, problem message, try once ('1').
  local id, key, action, payload = A[5], A[6], A[7], A[8]
  if id == '' then id = nil end
  if key == '' then key = nil end
  if action == '' then action = nil end
  if payload == '' then payload = nil end
  local try_once = A[15] == '1'
  local r
  if id then r = rec_get(id) end
  local created = '0'
  if not r then
    if A[13] ~= '' then return refuse('invalid', A[13] .. ' ' .. A[14]) end
    local hold_seconds = num(A[11])
    local limit = num(cfg.hold_seconds)
    if hold_seconds and limit > 0 and (hold_seconds == 0 or hold_seconds > limit) then
      return refuse('hold_excess', cfg.hold_seconds)
    end
    local delay = num(A[12])
    local waiting_count = redis.call('ZCARD', K_WAIT) + redis.call('ZCARD', K_DELAYED)
    local outcome, other
    if delay > 0 then
      if waiting_count >= cfg.max_waiting then return full() end
    else
      outcome, other = dedup(key, action)
      if outcome == 'enter' and redis.call('ZCARD', K_HOLD) >= cfg.capacity and waiting_count >= cfg.max_waiting then
        return full()
      end
    end
    if not id then
      repeat
        id = string.format('%016.0f', next_after_time(K_META, 'lastid'))
      until redis.call('HEXISTS', K_VIS, id) == 0
    end
    r = { id = id, key = key, action = action, payload = payload, pri = A[9], enq = int_text(NOW), hold = A[10] }
    incr('enqueued_total')
    created = '1'
    if delay > 0 then
      r.st = 'delayed'
      r.dl = int_text(NOW + delay)
      r.dm = string.format('%016.0f', next_counter('dseq')) .. ':' .. id
      redis.call('ZADD', K_DELAYED, NOW + delay, r.dm)
      rec_put(r)
      note(id)
    else
      r.st = 'waiting'
      enter_line(r, NOW, outcome, other)
      grant_free()
      if r.st == 'waiting' then note(id) end
    end
  end
  if try_once then time_out(r) end
  return done({ view(r), created })
end

if OP == 'complete' or OP == 'extend' then
  local r, err = need(A[5])
  if not r then return err end
  if r.st ~= 'granted' then return refuse('not_granted', r.st) end
  if OP == 'complete' then
    finish(r, 'completed', NOW, nil)
    grant_free()
    return done({ view(r) })
  end
  -- ARGV: id, hold µs ('' = default), hold seconds, problem field, problem message.
  if A[8] ~= '' then return refuse('invalid', A[8] .. ' ' .. A[9]) end
  local hold_seconds = num(A[7])
  local limit = num(cfg.hold_seconds)
  if hold_seconds and limit > 0 and (hold_seconds == 0 or hold_seconds > limit) then
    return refuse('hold_excess', cfg.hold_seconds)
  end
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
  return done({ view(r) })
end

if OP == 'remove' or OP == 'time_out' or OP == 'disconnect' then
  local r, err = need(A[5])
  if not r then return err end
  if OP == 'remove' then
    if r.st == 'delayed' or r.st == 'waiting' then
      finish(r, 'cancelled', NOW, 'client')
    elseif r.st == 'granted' then
      finish(r, 'released', NOW, nil)
    end
    grant_free()
  elseif OP == 'time_out' then
    time_out(r)
  elseif r.st == 'delayed' or r.st == 'waiting' then
    finish(r, 'cancelled', NOW, 'disconnected')
  end
  return done({ view(r) })
end

if OP == 'visitor' then
  local r, err = need(A[5])
  if not r then return err end
  return done({ view(r) })
end

if OP == 'undo_grant' then
  local r = rec_get(A[5])
  if not r or r.st ~= 'granted' or r.fence ~= A[6] then return done({}) end
  finish(r, 'released', NOW, 'undelivered')
  grant_free()
  return done({ view(r) })
end

if OP == 'state' then
  -- ARGV: limit, cursor kind ('' | 'h' | 'w'), fence or priority, seq.
  local limit = num(A[5])
  local kind = A[6]
  local reply = count_fields()
  local more = false
  local holding, waiting, delayed = {}, {}, {}
  local lists_waiting = true
  if kind ~= 'w' then
    local from = '-inf'
    if kind == 'h' then from = '(' .. A[7] end
    local ids = redis.call('ZRANGEBYSCORE', K_HOLD, from, '+inf', 'LIMIT', 0, limit + 1)
    for i = 1, math.min(limit, #ids) do holding[i] = view(rec_get(ids[i])) end
    if #ids > limit then
      more = true
      lists_waiting = false
    end
  end
  if lists_waiting then
    local from = '-inf'
    if kind == 'w' then
      from = '(' .. string.format('%.0f', (PRIORITY_BIAS - num(A[7])) * SEQ_SPAN + num(A[8]))
    end
    local ids = redis.call('ZRANGEBYSCORE', K_WAIT, from, '+inf', 'LIMIT', 0, limit + 1)
    more = #ids > limit
    local first = 1
    if ids[1] then first = redis.call('ZRANK', K_WAIT, ids[1]) + 1 end
    for i = 1, math.min(limit, #ids) do
      local r = rec_get(ids[i])
      waiting[i] = view(r, first + i - 1)
    end
  end
  if kind == '' and limit > 0 then
    for i, member in ipairs(redis.call('ZRANGE', K_DELAYED, 0, limit - 1)) do
      delayed[i] = view(rec_get(member:sub(18)))
    end
  end
  local out = { more and '1' or '0', int_text(#holding), int_text(#waiting), int_text(#delayed) }
  for _, list in ipairs({ reply, config_fields(), holding, waiting, delayed }) do
    for _, x in ipairs(list) do out[#out + 1] = x end
  end
  return done(out)
end

return fail('bad_operation', OP)
