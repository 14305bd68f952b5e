-- Pipeline push + take + consume cycles.
--   wrk -t2 -c64 -d5s --latency -s pipeline.lua http://127.0.0.1:PORT [-- pipeline=p]
-- Pipeline: "pipeline=..." script argument, else $PIPELINE, else p. It needs
-- room for a few items per connection in flight (capacity, max_in_flight).
--
-- One cycle is three requests:
--   POST /v1/pipelines/<p>/items {"payload":{"n":1}}     -> 201 {"id":..,"status":"ready",..}
--   POST /v1/pipelines/<p>/take?max=1 (empty body)       -> 200 {"items":[{"id":"<id>",..,"fence":<f>}]}
--   POST /v1/pipelines/<p>/items/<id>/consume {"fence":<f>} -> 200 .."status":"consumed"..
-- Per thread (see common.lua): a take is sent for every item this thread
-- pushed, a consume for every item it took. Both wrk threads share the
-- pipeline, so a take may get an item the other thread pushed, and now and
-- then a 204 (nothing ready: counted as "empty", the next request pushes).
-- done() prints the LAT and CYCLE lines; cycles = consumes answered 200.

local dir = debug.getinfo(1, "S").source:match("^@(.*/)") or "./"
local common = dofile(dir .. "common.lua")

local push_req, take_req, items_prefix
local to_take = 0            -- pushes answered, takes not yet sent
local to_consume             -- FIFO of {id, fence}
pushed, taken, empty = 0, 0, 0

function init(args)
   local name = common.opt(args, "pipeline", "PIPELINE", "p")
   local base = "/v1/pipelines/" .. name
   push_req = common.post(base .. "/items", '{"payload":{"n":1}}')
   take_req = common.post(base .. "/take?max=1", nil)
   items_prefix = base .. "/items/"
   to_consume = common.fifo()
end

function request()
   local c = common.fifo_pop(to_consume)
   if c then
      return common.post(items_prefix .. c[1] .. "/consume", '{"fence":' .. c[2] .. '}')
   end
   if to_take > 0 then
      to_take = to_take - 1
      return take_req
   end
   return push_req
end

function response(status, headers, body)
   if status == 201 then
      pushed = pushed + 1
      to_take = to_take + 1
   elseif status == 204 then
      empty = empty + 1
   elseif status == 200 then
      common.answer(body, '"items":[', function(b)
         local id = common.first_id(b)
         local fence = b:match('"fence":(%d+)')
         if not (id and fence) then return false end
         taken = taken + 1
         common.fifo_push(to_consume, { id, fence })
         return true
      end, '"status":"consumed"')
   else
      common.fail("failed", status, body)
   end
end

setup = common.setup

function done(summary, latency, requests)
   common.report(summary, latency)
   common.cycle_report(summary, { "pushed", "taken", "empty" })
end
