-- GET a queue's state.
--   wrk -t2 -c64 -d10s --latency -s get-state.lua http://127.0.0.1:PORT [-- path=/v1/queues/q]
-- Path: "path=..." script argument, else $STATE_PATH, else /v1/queues/$QUEUE
-- (QUEUE defaults to q). "inm=TAG" (or $IF_NONE_MATCH) sends If-None-Match:
-- TAG ("*" names whatever tag is current, so every answer is 304 while the
-- server computes the tag as for a real one). The request is static (no
-- request() function), so wrk does not enter Lua per request.

local dir = debug.getinfo(1, "S").source:match("^@(.*/)") or "./"
local common = dofile(dir .. "common.lua")

function init(args)
   local queue = common.opt(args, "queue", "QUEUE", "q")
   wrk.method = "GET"
   wrk.path = common.opt(args, "path", "STATE_PATH", "/v1/queues/" .. queue)
   local inm = common.opt(args, "inm", "IF_NONE_MATCH", nil)
   if inm then wrk.headers["If-None-Match"] = inm end
end

setup = common.setup

function done(summary, latency, requests)
   common.report(summary, latency)
end
