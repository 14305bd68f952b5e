-- POST {"payload":{"n":1}} to /v1/queues/<queue>/visitors, over and over.
--   wrk -t2 -c64 -d10s --latency -s enqueue.lua http://127.0.0.1:PORT [-- queue=q]
-- Queue: "queue=..." script argument, else $QUEUE, else q. Every request
-- adds a visitor that is never completed, so the queue only grows: give it
-- a large capacity/max_waiting and run this scenario last (or on its own queue).
-- The request is static; statuses > 399 show as "Non-2xx or 3xx responses".

local dir = debug.getinfo(1, "S").source:match("^@(.*/)") or "./"
local common = dofile(dir .. "common.lua")

function init(args)
   local queue = common.opt(args, "queue", "QUEUE", "q")
   wrk.method = "POST"
   wrk.path = "/v1/queues/" .. queue .. "/visitors"
   wrk.headers["Content-Type"] = "application/json"
   wrk.body = '{"payload":{"n":1}}'
end

setup = common.setup

function done(summary, latency, requests)
   common.report(summary, latency)
end
