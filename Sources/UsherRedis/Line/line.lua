-- The line every kind built on QueueEngine shares (queues, windows, pools):
-- its records, waiting order, holds, delays, dedup and opposites, views and
-- notices. The kind's script follows it and sets LINE.kind. KEYS[1..12] are
-- the line's keys, in RedisQueueStore.parts order; a kind's own keys follow.
local K_META, K_WAIT, K_ARR, K_HOLD, K_EXP, K_DELAYED, K_VIS, K_LK, K_LP, K_FIN, K_HOLDS, K_WATCH =
  KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6], KEYS[7], KEYS[8], KEYS[9], KEYS[10], KEYS[11], KEYS[12]
-- meta: config fields, totals, `fence` (the last one; the first grant gets
-- the creation time, as in memory), `lastid`, `seq`, `dseq`, `fseq`, `wseq`, `hsum`, `created`.
-- wait: waiting ids by (PRIORITY_BIAS - priority) * 2^32 + arrival seq (grant order).
-- arr: waiting ids by arrival seq (the most recent arrival, the oldest waiter).
-- hold: holders' ids by fence (grant order). exp: "<fence %020>:<id>" by expiry.
-- delayed: "<dseq %016>:<id>" by delay end. vis: id -> record (cjson, numbers as text).
-- lk: key -> most recent waiting id with it; lp: key+action -> the same.
-- fin: finished ids in finish order. holds: the last 100 finished holds in µs.
-- watch: "<wo %020>:<id>" by when its idle check (waiting) or claim deadline
-- (granted) is due (QueueEngine+Abandon).
-- A record (VisitorRecord): id, key, action, payload (JSON text), pri, st
-- (status), rs (reason), enq, gat, dl (VisitorRecord.deadline), fat, fence,
-- hold (µs asked for, -1 none), seq (arrival number while waiting), dm (its
-- `delayed` member), kp/kn and pp/pn (the key and key+action chains), rel
-- (merged_into or cancelled_with), rt ('1': a retry named it, so no undo
-- takes its grant back; VisitorRecord.retried), hd (heard of until, µs), wo
-- (its watch order, from `wseq` at creation), wm (its `watch` member while it has one).

-- What the kind's script sets: the `kind` its notices carry.
local LINE = { kind = 'queue', unclaimed_status = 'released' }
-- The id the current operation names: a grant it gets in this operation is claimed.
local NAMED = nil

local PRIORITY_BIAS = 1000000
local SEQ_SPAN = 4294967296
local HOLD_WINDOW = 100

local function num(text) return tonumber(text) end

-- An integer as exact decimal text ('%d' is C's integer formatting: much
-- cheaper than common.lua's '%.0f', and the same text for integers).
local function int_text(n) return string.format('%d', n) end

-- meta, read once per script by load_config (HGETALL). The line's counters
-- change here and are written back in one HSET by `meta_flush` (at the end
-- of begin and by flush): a kind's script that reads a field the line
-- changes calls meta_flush first, or reads `meta` itself.
local meta, meta_dirty = {}, {}
-- Before load_config found the line (a kind's create), counters go straight to Redis.
local meta_loaded = false

local function meta_set(field, text)
  meta[field] = text
  meta_dirty[field] = true
end

local function meta_flush()
  local args = {}
  for field in pairs(meta_dirty) do
    args[#args + 1] = field
    args[#args + 1] = meta[field]
  end
  if #args > 0 then redis.call('HSET', K_META, unpack(args)) end
  meta_dirty = {}
end

-- next_after_time on a meta field: max(last + 1, now in µs).
local function meta_next_after(field)
  if not meta_loaded then return next_after_time(K_META, field) end
  local value = math.max(num(meta[field] or '0') + 1, NOW)
  meta_set(field, int_text(value))
  return value
end

-- Records: loaded once per script, written back by `flush`.
local cache, dirty, dirty_list = {}, {}, {}
-- Views already encoded by this script (id -> JSON text), until the record changes.
local view_texts = {}

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
  view_texts[r.id] = nil
  if not dirty[r.id] then
    dirty[r.id] = true
    dirty_list[#dirty_list + 1] = r.id
  end
end

-- A request named the live record `r` again (a retry): no undo takes its
-- grant back from now on (QueueEngine.noteRetry). Writes only the first time.
local function note_retry(r)
  if r.rt or not (r.st == 'granted' or r.st == 'waiting' or r.st == 'delayed') then return end
  r.rt = '1'
  rec_put(r)
end

local function rec_drop(id)
  cache[id] = false
  dirty[id] = nil
  redis.call('HDEL', K_VIS, id)
end

local function flush()
  local args = {}
  for _, id in ipairs(dirty_list) do
    if dirty[id] and cache[id] then
      args[#args + 1] = id
      args[#args + 1] = cjson.encode(cache[id])
    end
  end
  if #args > 0 then redis.call('HSET', K_VIS, unpack(args)) end
  dirty, dirty_list = {}, {}
  meta_flush()
end

-- Config, read with the rest of meta (again after a change); false when the line does not exist.
local cfg = {}
local function load_config()
  local all = redis.call('HGETALL', K_META)
  if #all == 0 then return false end
  meta_loaded = true
  for i = 1, #all, 2 do
    if not meta_dirty[all[i]] then meta[all[i]] = all[i + 1] end
  end
  cfg.capacity = num(meta.capacity)
  cfg.max_waiting = num(meta.max_waiting)
  cfg.hold_seconds = meta.hold_seconds
  cfg.hold_us = num(meta.hold_us)
  cfg.dedup = meta.dedup
  cfg.dedup_keep = meta.dedup_keep or 'first'  -- a line made before dedup_keep keeps the first
  cfg.dedup_seconds = meta.dedup_seconds or '0'
  cfg.dedup_us = num(meta.dedup_us or '0')
  cfg.opposites_text = meta.opposites
  cfg.history = num(meta.history)
  -- A line made before idle and claim checks has neither.
  cfg.idle_seconds = meta.idle_seconds or '0'
  cfg.claim_seconds = meta.claim_seconds or '0'
  cfg.idle_us = num(meta.idle_us or '0')
  cfg.claim_us = num(meta.claim_us or '0')
  cfg.opposite_of = {}
  local pairs_list = {}
  if meta.opposites ~= '[]' then pairs_list = cjson.decode(meta.opposites) end
  for _, pair in ipairs(pairs_list) do
    if #pair == 2 then
      local a, b = pair[1], pair[2]
      cfg.opposite_of[a] = cfg.opposite_of[a] or {}
      cfg.opposite_of[b] = cfg.opposite_of[b] or {}
      table.insert(cfg.opposite_of[a], b)
      table.insert(cfg.opposite_of[b], a)
    end
  end
  return true
end

local function config_fields()
  return { int_text(cfg.capacity), int_text(cfg.max_waiting), cfg.hold_seconds, cfg.dedup, cfg.opposites_text,
    int_text(cfg.history), cfg.idle_seconds, cfg.claim_seconds, cfg.dedup_keep, cfg.dedup_seconds }
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

local function incr(field, by)
  if not meta_loaded then
    redis.call('HINCRBY', K_META, field, int_text((by or 1) + 0))
    return
  end
  meta_set(field, int_text(num(meta[field] or '0') + (by or 1) + 0))
end

local function next_counter(field)
  if not meta_loaded then return redis.call('HINCRBY', K_META, field, 1) - 1 end
  local value = num(meta[field] or '0')
  meta_set(field, int_text(value + 1))
  return value
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
  meta_set('seq', int_text(#ids))
end

-- The arrival number of a newcomer to the line.
local function take_seq(r)
  if num(meta.seq) >= SEQ_SPAN then renumber_line() end
  local seq = next_counter('seq')
  r.seq = int_text(seq)
  return seq
end

local function link_waiting(r)
  local seq = take_seq(r)
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

local function exp_member(r) return string.format('%020d', num(r.fence)) .. ':' .. r.id end

local function unlink_holder(r)
  redis.call('ZREM', K_HOLD, r.id)
  -- A holder with a deadline (dl) is in exp, one without is not.
  if r.dl then redis.call('ZREM', K_EXP, exp_member(r)) end
end

local function record_hold(micros)
  local d = math.max(0, micros)
  incr('hsum', d)
  if redis.call('RPUSH', K_HOLDS, int_text(d)) > HOLD_WINDOW then
    incr('hsum', -num(redis.call('LPOP', K_HOLDS)))
  end
end

local function mean_hold()
  local n = redis.call('LLEN', K_HOLDS)
  if n == 0 then return nil end
  return num(meta.hsum) / n
end

-- Idle and claim checks (QueueEngine+Abandon) ------------------------------

local function watch_set(r, due)
  if not r.wm then r.wm = string.format('%020d', num(r.wo or '0')) .. ':' .. r.id end
  redis.call('ZADD', K_WATCH, due, r.wm)
  rec_put(r)
end

local function watch_clear(r)
  if not r.wm then return end
  redis.call('ZREM', K_WATCH, r.wm)
  r.wm = nil
  rec_put(r)
end

-- `r` entered the line: its idle check is due idle_seconds after it was last heard of.
local function watch_idle(r)
  if cfg.idle_us > 0 then
    watch_set(r, num(r.hd or r.enq) + cfg.idle_us)
  else
    watch_clear(r)
  end
end

-- `r` was just granted: unless the operation names it, it has claim_seconds to be claimed.
local function watch_claim(r)
  if cfg.claim_us > 0 and r.id ~= NAMED then
    watch_set(r, NOW + cfg.claim_us)
  else
    watch_clear(r)
  end
end

-- After a patch: when idle checks were off (`was_idle` µs), every waiting
-- record gets one, counted from now (QueueEngine.rewatch).
local function rewatch(was_idle)
  if was_idle ~= 0 or cfg.idle_us == 0 then return end
  for _, id in ipairs(redis.call('ZRANGE', K_WAIT, 0, -1)) do
    local r = rec_get(id)
    if NOW > num(r.hd or r.enq) then r.hd = int_text(NOW) end
    watch_idle(r)
  end
end

-- A call named the live record `r` (a wait parked on it: until `until_us`):
-- its client is heard of, and a grant waiting for its claim is claimed.
local function hear(r, until_us)
  if r.st == 'granted' then
    watch_clear(r)
  elseif r.st == 'waiting' or r.st == 'delayed' then
    local t = math.max(NOW, until_us or NOW)
    if t > num(r.hd or r.enq) then
      r.hd = int_text(t)
      rec_put(r)
    end
  end
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
  watch_clear(r)
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

-- Meeting a waiting duplicate: dedup_keep says which one stays.
local function duplicate(other)
  if cfg.dedup_keep == 'latest' then return 'replace', other end
  return 'merge', other
end

-- 'enter', or 'merge'/'replace'/'cancel' with the waiting visitor it meets (docs/api.md, Queues).
local function dedup(key, action)
  if not key or cfg.dedup == 'off' then return 'enter' end
  if cfg.dedup == 'key' then
    local t = redis.call('HGET', K_LP, pair_key(key, action))
    if t then return duplicate(rec_get(t)) end
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
  if other.action == action then return duplicate(other) end
  if is_opposite(action, other.action) then return 'cancel', other end
  return 'enter'
end

-- In a chain (`pf`/`nf` fields, last element indexed under `index_key` in
-- `index`), `r` takes `old`'s place.
local function take_chain_place(r, old, pf, nf, index, index_key)
  r[pf], r[nf] = old[pf], old[nf]
  if old[pf] then
    local p = rec_get(old[pf])
    p[nf] = r.id
    rec_put(p)
  end
  if old[nf] then
    local n = rec_get(old[nf])
    n[pf] = r.id
    rec_put(n)
  else
    redis.call('HSET', index, index_key, r.id)
  end
  old[pf], old[nf] = nil, nil
end

-- `r` (same key and action, in no list) takes waiting `old`'s place: its
-- priority, arrival number, line entry time and chains (QueueEngine.replaceWaiting).
local function replace_waiting(old, r)
  r.pri, r.seq, r.dl = old.pri, old.seq, old.dl
  redis.call('ZREM', K_WAIT, old.id)
  redis.call('ZREM', K_ARR, old.id)
  redis.call('ZADD', K_WAIT, wait_score(r), r.id)
  redis.call('ZADD', K_ARR, num(r.seq), r.id)
  take_chain_place(r, old, 'kp', 'kn', K_LK, r.key)
  take_chain_place(r, old, 'pp', 'pn', K_LP, pair_key(r.key, r.action))
  rec_put(r)
end

local function enter_line(r, t, outcome, other)
  r.dl = int_text(t)
  if outcome == 'enter' then
    link_waiting(r)
  elseif outcome == 'merge' then
    r.rel = other.id
    settle(r, 'merged', t, nil)
  elseif outcome == 'replace' then
    replace_waiting(other, r)
    watch_clear(other)
    other.rel = r.id
    settle(other, 'merged', t, 'replaced')
  else
    r.rel = other.id
    other.rel = r.id
    finish(other, 'cancelled', t, 'opposite')
    settle(r, 'cancelled', t, 'opposite')
  end
end

-- The hold a grant gives in µs (0 = no limit): the queue's rule, or with
-- LINE.own_overrides (windows) the visitor's own hold whenever it asked one.
local function effective_hold(r)
  local own = num(r.hold)
  if LINE.own_overrides and own >= 0 then return own end
  if cfg.hold_us == 0 then return math.max(0, own) end
  if own > 0 then return math.min(own, cfg.hold_us) end
  return cfg.hold_us
end

-- Grants `r`, out of every list now (the first waiter, or a newcomer to an empty line).
local function grant(r)
  local id = r.id
  waits[#waits + 1] = int_text(NOW - num(r.dl))  -- while waiting, dl is the line entry
  r.st = 'granted'
  r.gat = int_text(NOW)
  local fence = meta_next_after('fence')
  r.fence = int_text(fence)
  local hold = effective_hold(r)
  if hold > 0 then
    r.dl = int_text(NOW + hold)
    redis.call('ZADD', K_EXP, NOW + hold, exp_member(r))
  else
    r.dl = nil
  end
  redis.call('ZADD', K_HOLD, fence, id)
  watch_claim(r)
  incr('granted_total')
  rec_put(r)
  note(id)
end

local function grant_free()
  local holding = redis.call('ZCARD', K_HOLD)
  while holding < cfg.capacity do
    local id = redis.call('ZRANGE', K_WAIT, 0, 0)[1]
    if not id then return end
    local r = rec_get(id)
    unlink_waiting(r)
    grant(r)
    holding = holding + 1
  end
end

-- Operation frame -----------------------------------------------------------

local function first_score(key)
  local top = redis.call('ZRANGE', key, 0, 0, 'WITHSCORES')
  if top[2] then return num(top[2]) end
  return nil
end

-- The oldest `excess` finished ids, less those `dedup_seconds` still keeps
-- (from the first one finished too recently on: finish order is time order).
local function forgettable(excess)
  if cfg.dedup_us == 0 then return excess end
  for i = 0, excess - 1 do
    local id = redis.call('ZRANGE', K_FIN, i, i)[1]
    if num(rec_get(id).fat) + cfg.dedup_us > NOW then return i end
  end
  return excess
end

-- Forgets finished visitors beyond `history` whose `dedup_seconds` have
-- passed, then applies every delay end and hold expiry due by NOW, one
-- instant at a time, granting after each.
local function begin()
  if not cfg.capacity then load_config() end
  local excess = redis.call('ZCARD', K_FIN) - cfg.history
  if excess > 0 then excess = forgettable(excess) end
  if excess > 0 then
    local popped = redis.call('ZPOPMIN', K_FIN, excess)
    local ids = {}
    for i = 1, #popped, 2 do
      local id = popped[i]
      cache[id] = false
      dirty[id] = nil
      ids[#ids + 1] = id
    end
    redis.call('HDEL', K_VIS, unpack(ids))
  end
  while true do
    local d, e, w = first_score(K_DELAYED), first_score(K_EXP), first_score(K_WATCH)
    local t = d
    if not t or (e and e < t) then t = e end
    if not t or (w and w < t) then t = w end
    if not t or t > NOW then break end
    touched = true
    if d == t then
      for _, member in ipairs(redis.call('ZRANGEBYSCORE', K_DELAYED, t, t)) do
        redis.call('ZREM', K_DELAYED, member)
        local r = rec_get(member:sub(18))
        r.dm = nil
        r.st = 'waiting'
        -- Idle time counts from the line entry: a delay is not silence.
        if t > num(r.hd or r.enq) then r.hd = int_text(t) end
        note(r.id)
        enter_line(r, t, dedup(r.key, r.action))
        if r.st == 'waiting' then watch_idle(r) end
      end
    end
    if w == t then
      for _, member in ipairs(redis.call('ZRANGEBYSCORE', K_WATCH, t, t)) do
        local r = rec_get(member:sub(22))
        if r.st == 'granted' then
          watch_clear(r)
          if cfg.claim_us > 0 then  -- else claim_seconds was patched to 0
            finish(r, LINE.unclaimed_status, t, 'unclaimed')
            incr('unclaimed_total')
          end
        elseif cfg.idle_us > 0 and num(r.hd or r.enq) + cfg.idle_us <= t then
          finish(r, 'cancelled', t, 'abandoned')
          incr('abandoned_total')
        else
          -- Heard of since the check was set (or idle_seconds changed): check again later.
          watch_idle(r)
        end
      end
    end
    if e == t then
      for _, member in ipairs(redis.call('ZRANGEBYSCORE', K_EXP, t, t)) do
        finish(rec_get(member:sub(22)), 'expired', t, nil)
      end
    end
    grant_free()
  end
  meta_flush()
end

local function next_deadline()
  local d, e, w = first_score(K_DELAYED), first_score(K_EXP), first_score(K_WATCH)
  if not d or (e and e < d) then d = e end
  if not d or (w and w < d) then d = w end
  if d then return int_text(d) end
  return ''
end

-- Views -----------------------------------------------------------------

-- When the first holder in grant order was granted (NOW when none holds).
local function first_holder_grant()
  local id = redis.call('ZRANGE', K_HOLD, 0, 0)[1]
  if not id then return NOW end
  return num(rec_get(id).gat)
end

-- The estimate's µs as QueueEngine.estimatedWait computes it before
-- rounding, or nil and why there is none (WaitUnknown).
local function estimated_wait(position)
  local capacity = cfg.capacity
  if capacity <= 0 or position <= 0 then return nil, 'closed' end
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
  elseif mean and NOW - first_holder_grant() <= mean then
    first = slot * mean / capacity
  else
    return nil, 'no_hold_limit'
  end
  local micros = first
  if round > 0 then
    if not mean then return nil, 'no_hold_limit' end
    micros = micros + round * mean
  end
  return micros
end

-- A view (VisitorView) as JSON text with every number as text; encoded once
-- per script unless the record changes (the reply and the notice share it).
local function view(r, position)
  if not position and view_texts[r.id] then return view_texts[r.id] end
  local v = {
    id = r.id, key = r.key, action = r.action, payload = r.payload, priority = r.pri, status = r.st,
    enqueued_at = r.enq, reason = r.rs,
  }
  if r.st == 'waiting' then
    position = position or (redis.call('ZRANK', K_WAIT, r.id) + 1)
    v.position = int_text(position)
    v.seq = r.seq
    local wait, unknown = estimated_wait(position)
    if wait then v.wait_micros = string.format('%.17g', wait) else v.wait_reason = unknown end
  end
  if r.gat then
    v.granted_at = r.gat
    v.fence = r.fence
    v.expires_at = r.dl
  end
  v.finished_at = r.fat
  if r.st == 'merged' then v.merged_into = r.rel end
  if r.rs == 'opposite' then v.cancelled_with = r.rel end
  local text = cjson.encode(v)
  if not position then view_texts[r.id] = text end
  return text
end

-- `nd`: next_deadline(), when the caller has it already.
local function publish_changes(extra, nd)
  if #changed == 0 and not touched and not extra then return end
  local views = {}
  for i, id in ipairs(changed) do views[i] = view(cache[id]) end
  local notice = { kind = LINE.kind, name = ARGV[4], time = int_text(NOW), changed = views, waits = waits }
  nd = nd or next_deadline()
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
  local nd = next_deadline()
  publish_changes(extra, nd)
  table.insert(reply, 1, nd)
  return reply
end

-- Refuses after applying what was due: what changed is kept and told.
local function refuse(code, detail)
  flush()
  publish_changes(nil)
  return fail(code, detail)
end

local function count_fields()
  local out = {
    int_text(redis.call('ZCARD', K_WAIT)), int_text(redis.call('ZCARD', K_HOLD)),
    int_text(redis.call('ZCARD', K_DELAYED)),
  }
  for _, field in ipairs({ 'enqueued_total', 'granted_total', 'completed_total', 'released_total', 'expired_total',
    'cancelled_total', 'merged_total', 'timed_out_total', 'abandoned_total', 'unclaimed_total' }) do
    out[#out + 1] = meta[field] or '0'
  end
  return out
end

-- When the longest waiter entered the line, in µs ('' when none waits): while
-- waiting, a record's dl is its line entry.
local function oldest_entry()
  local first = redis.call('ZRANGE', K_ARR, 0, 0)[1]
  return first and rec_get(first).dl or ''
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

-- A generated id: 16 digits, time-ordered (IDGenerator's scheme), not in use.
local function new_id()
  local id
  repeat
    id = string.format('%016d', meta_next_after('lastid'))
  until redis.call('HEXISTS', K_VIS, id) == 0
  return id
end

-- A newcomer asks to enter (`r`: its own fields; `r.id` nil for a generated
-- one): refused `full` when there is no room to wait, else recorded and
-- delayed until NOW + `delay`, or put in line (merged or cancelled by dedup
-- and opposites, granted when there is room). Answers the record, or nil
-- and the refusal.
local function admit(r, action, delay)
  local in_line = redis.call('ZCARD', K_WAIT)
  local waiting_count = in_line + redis.call('ZCARD', K_DELAYED)
  local outcome, other, room
  if delay > 0 then
    if waiting_count >= cfg.max_waiting then return nil, full() end
  else
    outcome, other = dedup(r.key, action)
    room = redis.call('ZCARD', K_HOLD) < cfg.capacity
    if outcome == 'enter' and not room and waiting_count >= cfg.max_waiting then return nil, full() end
  end
  r.id = r.id or new_id()
  r.enq = int_text(NOW)
  r.hd = r.enq
  r.wo = int_text(next_counter('wseq'))
  NAMED = r.id
  incr('enqueued_total')
  if delay > 0 then
    r.st = 'delayed'
    r.dl = int_text(NOW + delay)
    r.dm = string.format('%016d', next_counter('dseq')) .. ':' .. r.id
    redis.call('ZADD', K_DELAYED, NOW + delay, r.dm)
    rec_put(r)
    note(r.id)
  elseif outcome == 'enter' and room and in_line == 0 then
    -- An empty line with room: granted at once, as if it had entered and been first.
    r.dl = int_text(NOW)
    take_seq(r)
    grant(r)
  else
    r.st = 'waiting'
    enter_line(r, NOW, outcome, other)
    grant_free()
    if r.st == 'waiting' then
      watch_idle(r)
      note(r.id)
    end
  end
  return r
end

-- `delete` (ARGV[4]: the name): every holder ends `released`, reason
-- `deleted`, told by `tell` (the kind's publish of changes) in notices of at
-- most 500 holders; then every key goes, and every instance hears it.
local function delete_line(tell)
  local existed = redis.call('EXISTS', K_META)
  if existed == 1 then
    load_config()
    while true do
      local ids = redis.call('ZRANGE', K_HOLD, 0, 499)
      if #ids == 0 then break end
      for _, id in ipairs(ids) do
        local r = rec_get(id)
        if r then finish(r, 'released', NOW, 'deleted') else redis.call('ZREM', K_HOLD, id) end
      end
      tell()
      changed, changed_seen = {}, {}
    end
  end
  redis.call('UNLINK', unpack(KEYS))  -- frees a big line's memory off the main thread
  if existed == 1 then publish({ kind = LINE.kind, name = ARGV[4], time = int_text(NOW), deleted = true }) end
  return { '', int_text(existed) }
end
