-- Machine events: POST /v1/machines/<m>/events/<event>, empty body, over and over.
--   wrk -t2 -c64 -d5s --latency -s machine.lua http://127.0.0.1:PORT [-- machine=m event=tick]
-- Machine: "machine=..." (else $MACHINE, else m); event: "event=..." (else
-- $EVENT, else tick). Give the machine a definition with a self-loop, e.g.
--   {"initial":"idle","states":["idle"],"transitions":[{"event":"tick","from":"idle","to":"idle"}]}
-- so that every event is a valid transition. The request is static; a 409
-- (event not allowed) shows as a status error.

local dir = debug.getinfo(1, "S").source:match("^@(.*/)") or "./"
local common = dofile(dir .. "common.lua")

function init(args)
   local name = common.opt(args, "machine", "MACHINE", "m")
   local event = common.opt(args, "event", "EVENT", "tick")
   wrk.method = "POST"
   wrk.path = "/v1/machines/" .. name .. "/events/" .. event
   wrk.body = nil
end

setup = common.setup

function done(summary, latency, requests)
   common.report(summary, latency)
end
