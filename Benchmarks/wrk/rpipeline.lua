-- pipeline.lua on the Redis-backed pipeline "rp" (Benchmarks/run's rpipeline):
--   wrk -t2 -c64 -d5s --latency -s rpipeline.lua http://127.0.0.1:PORT
-- A "pipeline=..." script argument still wins.

local dir = debug.getinfo(1, "S").source:match("^@(.*/)") or "./"
dofile(dir .. "pipeline.lua")

local pipeline_init = init
function init(args)
   local given = {}
   for _, a in pairs(args or {}) do given[#given + 1] = a end
   given[#given + 1] = "pipeline=rp"
   return pipeline_init(given)
end
