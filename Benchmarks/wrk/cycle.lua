-- Enqueue + complete cycles.
--   wrk -t2 -c64 -d10s --latency -s cycle.lua http://127.0.0.1:PORT [-- queue=q]
-- Queue: "queue=..." script argument, else $QUEUE, else q.
-- "minimal=1" (or $MINIMAL=1): both requests ask Prefer: return=minimal; the
-- id then comes from the 201's Location header and "completed" from its
-- Usher-Status header (Usher only: the baseline ignores it).
--
-- Each wrk request is one HTTP request, so one cycle is two requests:
--   POST /v1/queues/<q>/visitors  {"payload":{"n":1}}   -> 201, body holds "id":"<id>"
--   POST /v1/queues/<q>/visitors/<id>/complete (empty body) -> 2xx
--
-- How it works with wrk's model: each wrk thread has its own Lua state shared
-- by all of that thread's connections, and request()/response() are not told
-- which connection they serve. So the state is a per-thread FIFO of ids:
-- response() pushes the id of every 201, request() pops one and sends its
-- complete, or sends a new enqueue when the FIFO is empty. Any connection may
-- complete a visitor another connection of the same thread enqueued; that is
-- fine for the server. With pipelining off (one request in flight per
-- connection) response() always runs before that connection's next
-- request(), so a thread alternates enqueue/complete and at most about one id
-- per connection is pending.
--
-- wrk also calls request() once on thread 1's state before the run, to check
-- the request parses (script_verify_request); that call finds the FIFO empty,
-- builds an enqueue that is never sent, and changes no counter.
--
-- The id is the FIRST `"id":"..."` in the 201 body: the server must write it
-- with no space around the colon, and it must be the visitor's id.
-- done() prints the LAT line (see common.lua) and a CYCLE line:
--   CYCLE cycles=<completes that succeeded> granted=.. completed=.. failed=.. noid=.. other=.. pending_end=..
-- failed counts statuses >= 300 (enqueue or complete alike); noid counts 201s
-- whose id could not be parsed; other counts 2xx that are neither. A clean run
-- has failed=0 and noid=0 and cycles close to requests/2.

local dir = debug.getinfo(1, "S").source:match("^@(.*/)") or "./"
local common = dofile(dir .. "common.lua")

local pending = common.fifo()   -- ids waiting for their complete (this thread only)
local enqueue_req, complete_prefix, complete_suffix
local minimal = false

-- Per-thread counters: globals so that done() can read them with thread:get().
granted, completed, failed, noid, other, pending_end = 0, 0, 0, 0, 0, 0
first_failure = ""

function init(args)
   local queue = common.opt(args, "queue", "QUEUE", "q")
   local path = "/v1/queues/" .. queue .. "/visitors"
   minimal = common.opt(args, "minimal", "MINIMAL", "0") == "1"
   local headers = { ["Content-Type"] = "application/json" }
   local prefer = ""
   if minimal then
      headers["Prefer"] = "return=minimal"
      prefer = "Prefer: return=minimal\r\n"
   end
   enqueue_req = wrk.format("POST", path, headers, '{"payload":{"n":1}}')
   complete_prefix = "POST " .. path .. "/"
   -- The complete request: no body, "Content-Length: 0", no Content-Type.
   complete_suffix = "/complete HTTP/1.1\r\nHost: " .. wrk.headers["Host"] .. "\r\n" .. prefer
      .. "Content-Length: 0\r\n\r\n"
end

function request()
   local id = common.fifo_pop(pending)
   if id then
      return complete_prefix .. id .. complete_suffix
   end
   return enqueue_req
end

function response(status, headers, body)
   if status == 201 then
      local id
      if minimal then
         id = (headers["Location"] or headers["location"] or ""):match("/visitors/([^/]+)$")
      else
         id = common.first_id(body)
      end
      if id then
         granted = granted + 1
         common.fifo_push(pending, id)
      else
         common.fail("noid", status, body)
      end
   elseif status >= 200 and status < 300 then
      local status_header = headers["Usher-Status"] or headers["usher-status"]
      if status_header == "completed" or body:find('"completed"', 1, true) then
         completed = completed + 1
      else
         other = other + 1
      end
   else
      common.fail("failed", status, body)
   end
   pending_end = common.fifo_len(pending)
end

setup = common.setup

function done(summary, latency, requests)
   common.report(summary, latency)
   io.write(string.format("CYCLE cycles=%d granted=%d completed=%d failed=%d noid=%d other=%d pending_end=%d requests_half=%d\n",
      common.sum("completed"), common.sum("granted"), common.sum("completed"), common.sum("failed"),
      common.sum("noid"), common.sum("other"), common.sum("pending_end"), math.floor(summary.requests / 2)))
   common.first_failures()
end
