-- Removes an entry of the index of resources (RedisBackend+Index.swift)
-- whose resource a master lost (it came back empty), unless the resource was
-- made again since it was found gone: each creation writes a new token, so
-- the entry still holding the token read before the check is the lost one.
-- Tells every instance the resource is deleted, as a deletion does, and lost
-- (an instance that declares it makes it again).
--
-- KEYS[1] the index hash. ARGV[1] the time in µs ("" = Redis TIME), ARGV[2]
-- the notice channel, ARGV[3] the kind, ARGV[4] the name, ARGV[5] the token.
-- Answers 1 (removed), 0 (made again meanwhile) or -1 (no entry: removed already).

local field = ARGV[3] .. ':' .. ARGV[4]
local token = redis.call('HGET', KEYS[1], field)
if not token then return -1 end
if token ~= ARGV[5] then return 0 end
redis.call('HDEL', KEYS[1], field)
local now = ARGV[1]
if now == '' then
  local t = redis.call('TIME')
  now = t[1] .. string.format('%06d', tonumber(t[2]))
end
redis.call('PUBLISH', ARGV[2], cjson.encode({ kind = ARGV[3], name = ARGV[4], time = now, deleted = true, lost = true }))
return 1
