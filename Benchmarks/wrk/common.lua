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

-- Prints the machine-readable result line read by Benchmarks/run-queue:
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

return M
