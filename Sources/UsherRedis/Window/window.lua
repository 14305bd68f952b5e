-- The window kind: WindowSlot's operations (Sources/UsherCore/Window), one
-- EVALSHA each, on the line of line.lua with capacity 1: the holder is the
-- item shown, its hold is the display time, its expiry the auto-dismiss.
-- KEYS are the line's 12; a window keeps nothing else. Config in meta: the
-- line's fields (capacity 1, no opposites, history 1000) with hold_seconds
-- standing for display_seconds.

LINE.kind = 'window'
-- An item's own display_seconds replaces the window's, 0 (pinned) included.
LINE.own_overrides = true

local A = ARGV

-- max_waiting, display_seconds, dedup, dedup_keep.
local function window_config()
  return { int_text(cfg.max_waiting), cfg.hold_seconds, cfg.dedup, cfg.dedup_keep }
end

if OP == 'create' then
  -- ARGV: max_waiting, display seconds, display µs, dedup, history, dedup_keep.
  if redis.call('EXISTS', K_META) == 1 then
    load_config()
    local reply = window_config()
    table.insert(reply, 1, '0')
    table.insert(reply, 1, next_deadline())
    return reply
  end
  redis.call('UNLINK', unpack(KEYS))  -- what an eviction of the meta key left
  redis.call('HSET', K_META, 'capacity', '1', 'max_waiting', A[5], 'hold_seconds', A[6], 'hold_us', A[7],
    'dedup', A[8], 'dedup_keep', A[10], 'opposites', '[]', 'history', A[9], 'created', int_text(NOW), 'fence', int_text(NOW - 1),
    'lastid', int_text(NOW), 'seq', '0', 'dseq', '0', 'fseq', '0', 'hsum', '0')
  return { '', '1', A[5], A[6], A[8], A[10] }
end

if OP == 'delete' then return delete_line(publish_changes) end

if redis.call('EXISTS', K_META) == 0 then return fail('gone', '') end

begin()

-- The item shown now as a view, or '' when none.
local function showing_view()
  local id = redis.call('ZRANGE', K_HOLD, 0, 0)[1]
  if not id then return '' end
  return view(rec_get(id))
end

if OP == 'tick' then
  return done({})
end

if OP == 'config' then
  return done(window_config())
end

if OP == 'counts' then
  -- Counts, the id of the item shown ('' none), when the longest queued item entered the line.
  local reply = count_fields()
  reply[#reply + 1] = redis.call('ZRANGE', K_HOLD, 0, 0)[1] or ''
  reply[#reply + 1] = oldest_entry()
  return done(reply)
end

if OP == 'patch' then
  -- ARGV: max_waiting, display seconds, display µs, dedup, dedup_keep ('' = unchanged).
  local before = window_config()
  local names = { 'max_waiting', 'hold_seconds', 'hold_us', 'dedup', 'dedup_keep' }
  for i, field in ipairs(names) do
    if A[4 + i] ~= '' then redis.call('HSET', K_META, field, A[4 + i]) end
  end
  load_config()
  local after = window_config()
  return done(after, { config_before = before, config = after })
end

if OP == 'show' then
  -- ARGV: id, key, payload (the shown content), priority, display µs (-1 none),
  -- delay µs, problem field, problem message.
  local id, key, payload = A[5], A[6], A[7]
  if id == '' then id = nil end
  if key == '' then key = nil end
  local r
  if id then r = rec_get(id) end
  local created = '0'
  if not r then
    if A[11] ~= '' then return refuse('invalid', A[11] .. ' ' .. A[12]) end
    local err
    r, err = admit({ id = id, key = key, payload = payload, pri = A[8], hold = A[9] }, nil, num(A[10]))
    if not r then return err end
    created = '1'
  end
  return done({ view(r), created })
end

if OP == 'dismiss' then
  -- ARGV: id ('' = the item shown). Reply: the item dismissed, the one shown after ('' none).
  local r
  if A[5] ~= '' then
    r = rec_get(A[5])
    if not r then return refuse('not_found', A[5]) end
    if r.st == 'delayed' or r.st == 'waiting' then
      finish(r, 'cancelled', NOW, 'client')
    elseif r.st == 'granted' then
      finish(r, 'released', NOW, nil)
    end
  else
    local id = redis.call('ZRANGE', K_HOLD, 0, 0)[1]
    if not id then return refuse('nothing_showing', '') end
    r = rec_get(id)
    finish(r, 'released', NOW, nil)
  end
  grant_free()
  return done({ view(r), showing_view() })
end

if OP == 'showing' then
  return done({ showing_view() })
end

if OP == 'item' then
  local r = rec_get(A[5])
  if not r then return refuse('not_found', A[5]) end
  return done({ view(r) })
end

if OP == 'state' then
  -- ARGV: limit, after ('' = the front, else priority and seq of a queued
  -- item). Reply: more, count of queued, counts, config, the item shown
  -- ('' none), the queued items.
  local limit = num(A[5])
  local from = '-inf'
  if A[6] ~= '' then
    from = '(' .. string.format('%.0f', (PRIORITY_BIAS - num(A[6])) * SEQ_SPAN + num(A[7]))
  end
  local ids = redis.call('ZRANGEBYSCORE', K_WAIT, from, '+inf', 'LIMIT', 0, limit + 1)
  local first = 1
  if ids[1] then first = redis.call('ZRANK', K_WAIT, ids[1]) + 1 end
  local queued = {}
  for i = 1, math.min(limit, #ids) do queued[i] = view(rec_get(ids[i]), first + i - 1) end
  local out = { #ids > limit and '1' or '0', int_text(#queued) }
  for _, list in ipairs({ count_fields(), window_config(), { showing_view() }, queued }) do
    for _, x in ipairs(list) do out[#out + 1] = x end
  end
  return done(out)
end

return fail('bad_operation', OP)
