-- Pool fetch + recycle cycles.
--   wrk -t2 -c64 -d5s --latency -s pool.lua http://127.0.0.1:PORT [-- pool=pl]
-- Pool: "pool=..." script argument, else $POOL, else pl. It needs more free
-- elements than connections (a fetch never waits here: no ?wait).
--
-- One cycle is two requests:
--   POST /v1/pools/<p>/fetch (empty body)        -> 201 {"element":{..,"id":"<element>"},..,"id":"<lease>",..}
--   POST /v1/pools/<p>/recycle {"lease":"<lease>"} -> 200 {..,"status":"recycled",..}
-- Per thread (see common.lua): a recycle is sent for every lease this thread
-- got. done() prints the LAT and CYCLE lines; cycles = recycles answered 200.

local dir = debug.getinfo(1, "S").source:match("^@(.*/)") or "./"
local common = dofile(dir .. "common.lua")

local fetch_req, recycle_path
local leases                 -- FIFO of lease ids
fetched = 0

function init(args)
   local name = common.opt(args, "pool", "POOL", "pl")
   fetch_req = common.post("/v1/pools/" .. name .. "/fetch", nil)
   recycle_path = "/v1/pools/" .. name .. "/recycle"
   leases = common.fifo()
end

function request()
   local id = common.fifo_pop(leases)
   if id then
      return common.post(recycle_path, '{"lease":"' .. id .. '"}')
   end
   return fetch_req
end

function response(status, headers, body)
   if status == 200 or status == 201 then
      common.answer(body, '"status":"active"', function(b)
         -- Lease ids are names ([A-Za-z0-9._:-]): safe inside a JSON string as they are.
         -- Members are sorted: the element object (with its own "id") comes first.
         local id = (b:gsub('"element":%b{}', '')):match('"id":"([^"]+)"')
         if not id then return false end
         fetched = fetched + 1
         common.fifo_push(leases, id)
         return true
      end, '"status":"recycled"')
   else
      common.fail("failed", status, body)
   end
end

setup = common.setup

function done(summary, latency, requests)
   common.report(summary, latency)
   common.cycle_report(summary, { "fetched" })
end
