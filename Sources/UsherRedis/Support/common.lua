-- Shared by every kind's script; the kind's source follows it in one script.
--
-- Calling convention (ResourceScript.swift): KEYS are the resource's keys in
-- the kind's fixed order; ARGV[1] is the operation, ARGV[2] the time in µs
-- ("" = Redis TIME), ARGV[3] the notice channel, ARGV[4..] the operation's
-- arguments. Times, fences and ids are integers below 2^53 and leave Lua as
-- strings (cjson keeps 14 significant digits).

local OP = ARGV[1]
local CHANNEL = ARGV[3]

-- The operation's time in µs, the same for the whole script.
local NOW
if ARGV[2] ~= '' then
  NOW = tonumber(ARGV[2])
else
  local t = redis.call('TIME')
  NOW = tonumber(t[1]) * 1000000 + tonumber(t[2])
end

-- An integer as exact decimal text.
local function int_text(n)
  return string.format('%.0f', n)
end

-- Takes the next value of a time-based counter kept in `field` of the hash
-- `key`: max(last + 1, now in µs), so it never goes backwards, also after a
-- failover that lost the last value (fences, generated ids).
local function next_after_time(key, field)
  local last = tonumber(redis.call('HGET', key, field) or '0')
  local value = math.max(last + 1, NOW)
  redis.call('HSET', key, field, int_text(value))
  return value
end

-- An error the Swift side maps to the kind's error: "USHER <code> <detail>".
local function fail(code, detail)
  return redis.error_reply('USHER ' .. code .. ' ' .. (detail or ''))
end

-- Publishes a notice (a JSON object with at least kind and name) for every
-- instance: wake-ups, events, deadlines.
local function publish(notice)
  redis.call('PUBLISH', CHANNEL, cjson.encode(notice))
end
