-- Shared helpers for the wrk scripts in this directory (loaded with dofile).
--
-- wrk runs every script in several independent Lua states: one per wrk
-- thread (init/request/response run there) plus one for setup() and done().
-- Nothing is shared between them except through thread:get()/thread:set().

local M = {}

-- Looks up an option: "name=value" among the script arguments (after "--"
-- on the wrk command line), else the environment variable env, else def.
-- Note: wrk passes the arguments 0-indexed and args[0] is the URL, so the
-- user's arguments start at args[1]; we simply scan every entry.
function M.opt(args, name, env, def)
   if args then
      for _, a in pairs(args) do
         local k, v = tostring(a):match("^([%w_]+)=(.*)$")
         if k == name then return v end
      end
   end
   local e = env and os.getenv(env)
   if e and e ~= "" then return e end
   return def
end

-- Threads seen by setup(), so that done() can read per-thread counters.
M.threads = {}

function M.setup(thread)
   table.insert(M.threads, thread)
end

-- Sums a numeric global over all wrk threads (call from done()).
function M.sum(name)
   local n = 0
   for _, t in ipairs(M.threads) do
      n = n + (tonumber(t:get(name)) or 0)
   end
   return n
end

-- Prints the machine-readable result line read by Benchmarks/run:
--   LAT p50_us=.. p90_us=.. p99_us=.. p999_us=.. max_us=.. requests=.. duration_us=.. rps=..
--       status_errors=.. socket_errors=..
-- status_errors counts HTTP statuses > 399 (the same number wrk prints as
-- "Non-2xx or 3xx responses"); socket_errors is connect+read+write+timeout.
function M.report(summary, latency)
   local e = summary.errors
   local secs = summary.duration / 1e6
   io.write(string.format(
      "LAT p50_us=%d p90_us=%d p99_us=%d p999_us=%d max_us=%d requests=%d duration_us=%d rps=%.1f status_errors=%d socket_errors=%d\n",
      latency:percentile(50), latency:percentile(90), latency:percentile(99), latency:percentile(99.9),
      latency.max, summary.requests, summary.duration, summary.requests / secs,
      e.status, e.connect + e.read + e.write + e.timeout))
end

-- ---------- helpers for the multi-request cycles (cycle, pipeline, pool) ----------
--
-- wrk gives each thread one Lua state shared by all of that thread's
-- connections, and request()/response() are not told which connection they
-- serve. So a cycle's state lives per thread: response() classifies each
-- answer by its status and body, and queues what the next step needs (an id,
-- a fence); request() sends the most advanced step that has something
-- queued, else starts a new cycle. With pipelining off a connection's
-- response() runs before its next request(), so each thread keeps about one
-- cycle per connection in progress. A step may go out over a different
-- connection of the same thread than the step before it: the server does
-- not care.

-- A FIFO: fifo_push(f, v), fifo_pop(f) (nil when empty), fifo_len(f).
function M.fifo() return { head = 1, tail = 0 } end
function M.fifo_push(f, v) f.tail = f.tail + 1; f[f.tail] = v end
function M.fifo_len(f) return f.tail - f.head + 1 end
function M.fifo_pop(f)
   if f.head > f.tail then return nil end
   local v = f[f.head]
   f[f.head] = nil
   f.head = f.head + 1
   return v
end

-- Percent-encodes an id for a path segment (only when it needs it).
function M.escape(id)
   if id:find("[^%w%-%._~]") then
      return (id:gsub("[^%w%-%._~]", function(c) return string.format("%%%02X", c:byte()) end))
   end
   return id
end

-- The first "id":"..." of a body, percent-encoded, or nil.
function M.first_id(body)
   local id = body:match('"id":"([^"]+)"')
   return id and M.escape(id)
end

-- A raw POST request (HTTP/1.1, keep-alive). body nil: "Content-Length: 0",
-- no Content-Type; else a JSON body.
function M.post(path, body)
   local host = wrk.headers["Host"]
   if body == nil then
      return "POST " .. path .. " HTTP/1.1\r\nHost: " .. host .. "\r\nContent-Length: 0\r\n\r\n"
   end
   return "POST " .. path .. " HTTP/1.1\r\nHost: " .. host ..
      "\r\nContent-Type: application/json\r\nContent-Length: " .. #body .. "\r\n\r\n" .. body
end

-- Per-thread cycle counters (globals, so done() reads them with thread:get()):
--   cycles: cycles whose last step succeeded; failed: statuses >= 300 other
--   than the ones a script expects; noid: an answer the next step needs an
--   id from without one; other: an answer no step expects.
cycles, failed, noid, other = 0, 0, 0, 0
first_failure = ""

function M.fail(kind, status, body)
   if kind == "noid" then noid = noid + 1 else failed = failed + 1 end
   if first_failure == "" then
      first_failure = kind .. " " .. tostring(status) .. " " .. body:sub(1, 200)
   end
end

-- Prints the CYCLE line read by Benchmarks/run (extra: "name=value ..." of a
-- script's own counters, summed over the threads), then the first failure of
-- each thread, if any:
--   CYCLE cycles=.. failed=.. noid=.. other=.. requests_per_cycle=.. [extra]
function M.cycle_report(summary, extra_names)
   local c = M.sum("cycles")
   local line = string.format("CYCLE cycles=%d failed=%d noid=%d other=%d requests_per_cycle=%s",
      c, M.sum("failed"), M.sum("noid"), M.sum("other"),
      c > 0 and string.format("%.2f", summary.requests / c) or "-")
   for _, name in ipairs(extra_names or {}) do
      line = line .. string.format(" %s=%d", name, M.sum(name))
   end
   io.write(line .. "\n")
   M.first_failures()
end

-- Prints the first failure each thread recorded (M.fail), if any:
--   CYCLE_FIRST_FAILURE thread=<n> <kind> <status> <start of the body>
function M.first_failures()
   for i, t in ipairs(M.threads) do
      local f = t:get("first_failure")
      if f and f ~= "" then
         io.write(string.format("CYCLE_FIRST_FAILURE thread=%d %s\n", i, (f:gsub("[\r\n]", " "))))
      end
   end
end

-- A 200 answer in a cycle of two kinds of answer: one that starts the next
-- step (`step_marker` in the body; `on_step(body)` records what the next
-- request needs and returns false when it cannot read it, counted as noid),
-- and one that ends a cycle (`done_marker`). Anything else counts as other.
function M.answer(body, step_marker, on_step, done_marker)
   if body:find(step_marker, 1, true) then
      if not on_step(body) then M.fail("noid", 200, body) end
   elseif body:find(done_marker, 1, true) then
      cycles = cycles + 1
   else
      other = other + 1
   end
end

return M
