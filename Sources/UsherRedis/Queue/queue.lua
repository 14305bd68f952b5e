-- The queue kind: every operation of QueueEngine (Sources/UsherCore/Line),
-- one EVALSHA each, on the line of line.lua (which comes first in the script).

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
  redis.call('UNLINK', unpack(KEYS))  -- what an eviction of the meta key left
  redis.call('HSET', K_META, 'capacity', A[5], 'max_waiting', A[6], 'hold_seconds', A[7], 'hold_us', A[8],
    'dedup', A[9], 'opposites', A[10], 'history', A[11], 'idle_seconds', A[12], 'idle_us', A[13],
    'claim_seconds', A[14], 'claim_us', A[15], 'dedup_keep', A[16], 'dedup_seconds', A[17],
    'dedup_us', A[18], 'created', int_text(NOW), 'fence', int_text(NOW - 1),
    'lastid', int_text(NOW), 'seq', '0', 'dseq', '0', 'fseq', '0', 'wseq', '0', 'hsum', '0')
  return { '', '1', A[5], A[6], A[7], A[9], A[10], A[11], A[12], A[14], A[16], A[17] }
end

if OP == 'delete' then return delete_line(publish_changes) end

if not load_config() then return fail('gone', '') end

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
  reply[#reply + 1] = oldest_entry()
  return done(reply)
end

if OP == 'patch' then
  -- ARGV: capacity, max_waiting, hold_seconds, hold_us, dedup, opposites, history, idle_seconds,
  -- idle_us, claim_seconds, claim_us, dedup_keep, dedup_seconds, dedup_us ('' = unchanged).
  local before = config_fields()
  local was_idle = cfg.idle_us
  local names = { 'capacity', 'max_waiting', 'hold_seconds', 'hold_us', 'dedup', 'opposites', 'history',
    'idle_seconds', 'idle_us', 'claim_seconds', 'claim_us', 'dedup_keep', 'dedup_seconds', 'dedup_us' }
  for i, field in ipairs(names) do
    if A[4 + i] ~= '' then redis.call('HSET', K_META, field, A[4 + i]) end
  end
  load_config()
  rewatch(was_idle)
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
  if r then
    note_retry(r)
    hear(r)
  end
  if not r then
    if A[13] ~= '' then return refuse('invalid', A[13] .. ' ' .. A[14]) end
    local hold_seconds = num(A[11])
    local limit = num(cfg.hold_seconds)
    if hold_seconds and limit > 0 and (hold_seconds == 0 or hold_seconds > limit) then
      return refuse('hold_excess', cfg.hold_seconds)
    end
    local err
    r, err = admit({ id = id, key = key, action = action, payload = payload, pri = A[9], hold = A[10] }, action,
      num(A[12]))
    if not r then return err end
    created = '1'
  end
  if try_once then time_out(r) end
  return done({ view(r), created })
end

if OP == 'complete' or OP == 'extend' then
  local r, err = need(A[5])
  if not r then return err end
  if OP == 'extend' then hear(r) end
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
      finish(r, 'released', NOW, 'client')
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
  -- ARGV: id, heard of until (µs: a long-poll parked on it until then; '' = now).
  local r, err = need(A[5])
  if not r then return err end
  hear(r, num(A[6]))
  return done({ view(r) })
end

if OP == 'undo_grant' then
  local r = rec_get(A[5])
  if not r or r.st ~= 'granted' or r.fence ~= A[6] or r.rt then return done({}) end
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
    -- Holders count towards the limit: the waiting line gets the room they leave.
    local room = limit - #holding
    local ids = redis.call('ZRANGEBYSCORE', K_WAIT, from, '+inf', 'LIMIT', 0, room + 1)
    more = #ids > room
    local first = 1
    if ids[1] then first = redis.call('ZRANK', K_WAIT, ids[1]) + 1 end
    for i = 1, math.min(room, #ids) do
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
