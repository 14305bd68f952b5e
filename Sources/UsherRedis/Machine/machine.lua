-- A state machine (MachineEngine's rules), one EVALSHA per operation.
--
-- KEYS[1] meta hash, KEYS[2] history list (the last 50 entries, oldest first,
-- each a cjson object). Meta fields:
--   name, defname, def (the definition as Swift's JSON text, never read here),
--   state, version, entered, timeout_at + timeout_event (the current state
--   entry's earliest timeout), txn (the open transaction, cjson) + txn_expires,
--   txn_seq, committed, aborted, expired;
--   lookups Swift derives from the definition: 'e|<event>' (known),
--   't|<event>|<from>' (the target), 'a|<state>' (allowed events, space
--   separated), 'o|<state>' ('<after µs> <event>': the earliest timeout).
-- Names cannot hold '|' or ' ', so the lookups never collide.
-- Times, versions and ids are µs integers, kept and returned as decimal text.
-- Client `data` is opaque JSON text, stored as a string and never decoded.

local META, HISTORY = KEYS[1], KEYS[2]
local HISTORY_LIMIT = 50
-- Most due steps one call applies (a cycle of short timeouts left alone for
-- long); the rest follow in the next call, which the reply's deadline asks for.
local MAX_STEPS = 1000

local M = {}
local changes = {transitions = {}, transactions = {}}
local changed = false

local function load()
  local v = redis.call('HMGET', META, 'name', 'state', 'version', 'entered', 'timeout_at', 'timeout_event',
    'txn', 'txn_expires')
  if not v[1] then return false end
  M.name, M.state, M.version, M.entered = v[1], v[2], tonumber(v[3]), tonumber(v[4])
  M.timeout_at, M.timeout_event = tonumber(v[5] or ''), v[6]
  M.txn = v[7] and cjson.decode(v[7]) or nil
  M.txn_expires = tonumber(v[8] or '')
  return true
end

local function save()
  redis.call('HSET', META, 'state', M.state, 'version', int_text(M.version), 'entered', int_text(M.entered))
  if M.timeout_at then
    redis.call('HSET', META, 'timeout_at', int_text(M.timeout_at), 'timeout_event', M.timeout_event)
  else
    redis.call('HDEL', META, 'timeout_at', 'timeout_event')
  end
  if M.txn then
    redis.call('HSET', META, 'txn', cjson.encode(M.txn), 'txn_expires', int_text(M.txn_expires))
  else
    redis.call('HDEL', META, 'txn', 'txn_expires')
  end
end

-- Versions are time-based like fences: max(last + 1, now in µs), so after a
-- failover that lost writes a version is not handed out again for other content.
local function bump()
  M.version = math.max(M.version + 1, NOW)
  changed = true
  return int_text(M.version)
end

local function allowed_text()
  if M.txn then return '' end
  return redis.call('HGET', META, 'a|' .. M.state) or ''
end

local function record(entry)
  redis.call('RPUSH', HISTORY, cjson.encode(entry))
  redis.call('LTRIM', HISTORY, -HISTORY_LIMIT, -1)
end

-- The current state entry's earliest timeout, if its state has one.
local function start_timeout()
  local timeout = redis.call('HGET', META, 'o|' .. M.state)
  if timeout then
    local after, event = string.match(timeout, '^(%d+) (.+)$')
    M.timeout_at, M.timeout_event = M.entered + tonumber(after), event
  else
    M.timeout_at, M.timeout_event = nil, nil
  end
end

-- Enters `to` at `at` (µs): a history entry, the version, the new entry's timeout.
local function enter(to, event, cause, data, txn_id, at)
  local entry = {event = event, from = M.state, to = to, version = bump(), at = int_text(at), cause = cause,
    data = data, transaction = txn_id}
  M.state, M.entered = to, at
  start_timeout()
  record(entry)
  table.insert(changes.transitions, entry)
  return entry
end

local function fire_timeout(at)
  local to = redis.call('HGET', META, 't|' .. M.timeout_event .. '|' .. M.state)
  enter(to, M.timeout_event, 'timeout', nil, nil, at)
end

-- Ends the open transaction as 'aborted' or 'expired' at `at`; a state
-- timeout that fell due while it was open fires now, in the same step.
local function end_transaction(outcome, at)
  local txn = M.txn
  M.txn, M.txn_expires = nil, nil
  redis.call('HINCRBY', META, outcome, 1)
  txn.status, txn.version = outcome, bump()
  record({event = txn.event, from = M.state, to = M.state, version = txn.version, at = int_text(at), cause = outcome,
    data = txn.data, transaction = txn.id, attempted = txn.to})
  table.insert(changes.transactions, txn)
  if M.timeout_at and M.timeout_at <= at then fire_timeout(at) end
  return txn
end

-- Applies what fell due up to NOW, in deadline order, at each deadline (as
-- the memory machine's timers do); a due state timeout waits for an open transaction.
local function advance()
  for _ = 1, MAX_STEPS do
    if M.txn then
      if M.txn_expires > NOW then return end
      end_transaction('expired', M.txn_expires)
    elseif M.timeout_at and M.timeout_at <= NOW then
      fire_timeout(M.timeout_at)
    else
      return
    end
  end
end

local function next_deadline()
  if M.txn then return M.txn_expires end
  return M.timeout_at
end

local function next_text()
  local n = next_deadline()
  return n and int_text(n) or ''
end

-- Saves and publishes what this call changed, once.
local function flush()
  if not changed then return end
  save()
  local notice = {kind = 'machine', name = M.name, time = int_text(NOW), version = int_text(M.version)}
  local n = next_deadline()
  if n then notice.next = int_text(n) end
  if #changes.transitions > 0 then notice.transitions = changes.transitions end
  if #changes.transactions > 0 then notice.transactions = changes.transactions end
  publish(notice)
end

-- Fails after saving what `advance` applied.
local function refuse(code, detail)
  flush()
  return fail(code, detail)
end

-- The snapshot: {next, head, definition, history} (history: the stored entries as one JSON array).
local function snapshot_reply(created)
  local head = {name = M.name, state = M.state, version = int_text(M.version), entered = int_text(M.entered),
    allowed = allowed_text(), transaction = M.txn, created = created}
  local fields = redis.call('HMGET', META, 'defname', 'def')
  if fields[1] ~= '' then head.definition_name = fields[1] end
  local history = '[' .. table.concat(redis.call('LRANGE', HISTORY, 0, -1), ',') .. ']'
  return {next_text(), cjson.encode(head), fields[2], history}
end

-- The checks of an event or an opening, in MachineEngine's order; the target or a refusal.
local function target(event, expected)
  if redis.call('HEXISTS', META, 'e|' .. event) == 0 then return nil, refuse('unknown_event', allowed_text()) end
  if expected ~= '' and expected ~= int_text(M.version) then
    return nil, refuse('version_mismatch', int_text(M.version))
  end
  if M.txn then return nil, refuse('transaction_open', cjson.encode(M.txn)) end
  local to = redis.call('HGET', META, 't|' .. event .. '|' .. M.state)
  if not to then return nil, refuse('invalid_transition', M.state .. ' ' .. allowed_text()) end
  return to
end

-- A refusal for transaction `id`, which is not the open one.
local function not_open(id)
  local entries = redis.call('LRANGE', HISTORY, 0, -1)
  for i = #entries, 1, -1 do
    local entry = cjson.decode(entries[i])
    if entry.transaction == id then
      local outcome = entry.cause
      if outcome == 'event' or outcome == 'timeout' then outcome = 'committed' end
      return refuse('transaction_ended', outcome)
    end
  end
  return refuse('unknown_transaction', '')
end

local function data_arg(text)
  if text == '' then return nil end
  return text
end

if OP == 'create' then
  -- ARGV[4] name, [5] definition name or '', [6] definition JSON, [7] initial,
  -- [8..] lookup field/value pairs.
  if load() then
    advance()
    flush()
    return snapshot_reply('0')
  end
  redis.call('UNLINK', unpack(KEYS))  -- what an eviction of the meta key left
  M.name, M.state, M.entered = ARGV[4], ARGV[7], NOW
  M.version = next_after_time(META, 'version')
  redis.call('HSET', META, 'name', M.name, 'defname', ARGV[5], 'def', ARGV[6], 'txn_seq', int_text(NOW),
    'committed', '0', 'aborted', '0', 'expired', '0')
  for i = 8, #ARGV, 2 do redis.call('HSET', META, ARGV[i], ARGV[i + 1]) end
  start_timeout()
  changed = true
  flush()
  return snapshot_reply('1')
end

if OP == 'delete' then
  if redis.call('EXISTS', META) == 0 then return {'', '0'} end
  local name = redis.call('HGET', META, 'name')
  redis.call('DEL', META, HISTORY)
  publish({kind = 'machine', name = name, time = int_text(NOW), deleted = true})
  return {'', '1'}
end

if not load() then return fail('gone', '') end
advance()

if OP == 'snapshot' then
  flush()
  return snapshot_reply(nil)
end

if OP == 'tick' then
  flush()
  return {next_text()}
end

if OP == 'counts' then
  flush()
  local counts = redis.call('HMGET', META, 'committed', 'aborted', 'expired')
  return {next_text(), counts[1], counts[2], counts[3]}
end

if OP == 'fire' then
  -- ARGV[4] event, [5] expected version or '', [6] data or ''.
  local to, refusal = target(ARGV[4], ARGV[5])
  if not to then return refusal end
  local entry = enter(to, ARGV[4], 'event', data_arg(ARGV[6]), nil, NOW)
  flush()
  return {next_text(), cjson.encode(entry)}
end

if OP == 'open' then
  -- ARGV[4] event, [5] expected version or '', [6] data or '', [7] how long in µs.
  local to, refusal = target(ARGV[4], ARGV[5])
  if not to then return refusal end
  local version = bump()
  M.txn_expires = NOW + tonumber(ARGV[7])
  M.txn = {id = int_text(next_after_time(META, 'txn_seq')), event = ARGV[4], from = M.state, to = to,
    data = data_arg(ARGV[6]), opened = int_text(NOW), expires = int_text(M.txn_expires), status = 'open',
    version = version}
  table.insert(changes.transactions, M.txn)
  flush()
  return {next_text(), cjson.encode(M.txn)}
end

if OP == 'commit' then
  -- ARGV[4] the transaction's id.
  local txn = M.txn
  if not txn or txn.id ~= ARGV[4] then return not_open(ARGV[4]) end
  M.txn, M.txn_expires = nil, nil
  redis.call('HINCRBY', META, 'committed', 1)
  local entry = enter(txn.to, txn.event, 'event', txn.data, txn.id, NOW)
  txn.status, txn.version = 'committed', entry.version
  table.insert(changes.transactions, txn)
  flush()
  return {next_text(), cjson.encode(entry)}
end

if OP == 'abort' then
  -- ARGV[4] the transaction's id.
  if not M.txn or M.txn.id ~= ARGV[4] then return not_open(ARGV[4]) end
  local txn = end_transaction('aborted', NOW)
  flush()
  return {next_text(), cjson.encode(txn)}
end

return fail('unknown_operation', OP)
