"""The scenario table of Benchmarks/run: which systems exist, how each one
starts, and which client drives each scenario on each system.

Read by `run` (a plain python3 module, standard library only). Adding a
scenario is one entry in SCENARIOS (and its name in DEFAULT_SCENARIOS if it
should run by default); adding a system is one entry in SYSTEMS.

Systems and their scenarios (one row each; "cycle" = several requests):
baseline   the plain-C libmicrohttpd server (baseline/mhd-baseline.c):
           get-state, cycle (enqueue+complete), cycle-c (the same cycle
           driven by opbench, the C client beanstalkd gets), enqueue
usher      .build/release/usher: get-state, get-state-304 (If-None-Match: *, so
           every answer is 304), cycle, cycle-minimal (the cycle with
           Prefer: return=minimal), cycle-c, pipeline (push+take+consume),
           pool (fetch+recycle), machine (one event), enqueue; and, only when
           SCENARIOS names it, cycle-hold (enqueue+complete on a queue with
           hold_seconds 30, so every grant arms the hold timer)
redis      Debian redis-server, no persistence, driven by redis-benchmark:
           lpush-rpop (rows LPUSH, RPOP and the LPUSH+RPOP pair), evalsha
           (EVALSHA of the script "return 1")
usher-redis  one Usher whose queues rq, rq1, rq2, rq3 live in a redis-server of
           its own; usher-redis3: three Usher processes sharing one such
           redis-server. Both driven by opbench: rcycle (enqueue+complete on
           queue rq, the connections spread over the processes), rcycle-3q
           (queues rq1..rq3, connection k on process k mod 3 and queue k mod 3:
           one queue per process with usher-redis3). Their rows add the
           redis-server's CPU per op and EVALSHA's µs per call (INFO commandstats).
           rscale: the same two rows at SCALE_CONNECTIONS connections per Usher process
           (rq on usher-redis; rq1..rq3 on usher-redis3 with three times as many).
           usher-redis also runs rpipeline (wrk/rpipeline.lua on the pipeline "rp"
           it makes in its redis-server), rpool (wrk/pool.lua on the pool "rpl") and
           rmachine (wrk/machine.lua on the machine "rm"), beside the memory rows
beanstalkd Debian beanstalkd, no binlog, driven by opbench/opbench.c:
           put-reserve-delete
"""

# Every system, in the default SYSTEMS order. For each:
#   argv       the server's command line: {port}, {config}, {tmp} and the
#              binaries {baseline}, {usher} are filled in by run
#   ready      how run knows it is up: "http" (200 on GET /readyz),
#              "redis" (PONG), "tcp" (a connection is accepted)
#   config     Usher only: "memory" (usher_config) or "redis" (usher_redis_config)
#   env        extra environment of the server
#   backing    a redis-server of its own, started first (its CPU and EVALSHA
#              time are measured beside the Usher processes')
#   processes  how many Usher processes share that redis-server
#   needs      {tool: the Debian package with it}: run apt-gets what is missing
#              (INSTALL=1), else the system's rows say skipped
USHER_ENV = {"USHER_PORT": "{port}", "USHER_HOST": "127.0.0.1"}
REDIS_NEEDS = {"redis-server": "redis-server", "redis-cli": "redis-tools"}
REDIS_ARGV = ["redis-server", "--port", "{port}", "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
              "--daemonize", "no", "--dir", "{tmp}"]
SYSTEMS = {
    "baseline": dict(argv=["{baseline}", "{port}"], ready="http"),
    "usher": dict(argv=["{usher}", "--config", "{config}"], env=USHER_ENV, ready="http", config="memory"),
    "redis": dict(argv=REDIS_ARGV, ready="redis",
                  needs={"redis-server": "redis-server", "redis-benchmark": "redis-tools"}),
    "beanstalkd": dict(argv=["beanstalkd", "-l", "127.0.0.1", "-p", "{port}"], ready="tcp",
                       needs={"beanstalkd": "beanstalkd"}),
    "usher-redis": dict(argv=["{usher}", "--config", "{config}"], env=USHER_ENV, ready="http", config="redis",
                        backing=REDIS_ARGV, processes=1, needs=REDIS_NEEDS),
    "usher-redis3": dict(argv=["{usher}", "--config", "{config}"], env=USHER_ENV, ready="http", config="redis",
                         backing=REDIS_ARGV, processes=3, needs=REDIS_NEEDS),
}

# Run in this order; enqueue only grows the queue: keep it last. cycle-hold
# runs only when SCENARIOS names it.
DEFAULT_SCENARIOS = ("get-state get-state-304 cycle cycle-minimal cycle-c pipeline pool machine lpush-rpop evalsha put-reserve-delete "
                     "rcycle rcycle-3q rscale rpipeline rpool rmachine enqueue").split()

# scenario -> {system: how it is driven}, systems in the order they run (rounds
# alternate the order of a two-system scenario). Each entry:
#   client  "wrk" (script: a file of wrk/, args: after "--"),
#           "opbench" (protocol; args; connections: "scale" = SCALE_CONNECTIONS,
#           "scale3" = 3 x SCALE_CONNECTIONS, else CONNECTIONS),
#           "redis-list" (rows lpush, rpop and the computed pair),
#           "redis-evalsha" (EVALSHA of the script "return 1")
#   label   the row's name in the table ({scale} and {scale3} filled in)
#   setup   an HTTP request made before the load: (method, path, body)
#   rows    the rows it writes (default: one, named after the scenario)


def _on(systems, **how):
    return {s: how for s in systems}


QUEUE_SYSTEMS = ("baseline", "usher")
REDIS_SYSTEMS = ("usher-redis", "usher-redis3")
SCENARIOS = {
    "get-state": _on(QUEUE_SYSTEMS, client="wrk", script="get-state", label="GET state"),
    "get-state-304": _on(["usher"], client="wrk", script="get-state", args=["inm=*"], label="GET state, 304"),
    "cycle": _on(QUEUE_SYSTEMS, client="wrk", script="cycle", label="enqueue+complete"),
    "cycle-c": _on(QUEUE_SYSTEMS, client="opbench", protocol="http", args=["-q", "q"], label="cycle, C client"),
    "enqueue": _on(QUEUE_SYSTEMS, client="wrk", script="enqueue", label="enqueue"),
    "pipeline": _on(["usher"], client="wrk", script="pipeline", label="push+take+consume"),
    "pool": _on(["usher"], client="wrk", script="pool", label="fetch+recycle"),
    "machine": _on(["usher"], client="wrk", script="machine", label="machine event"),
    "cycle-hold": _on(["usher"], client="wrk", script="cycle", args=["queue=qh"], label="enq+complete hold"),
    "cycle-minimal": _on(["usher"], client="wrk", script="cycle", args=["minimal=1"],
                         label="enq+complete, return=minimal"),
    "lpush-rpop": _on(["redis"], client="redis-list", rows=["lpush", "rpop", "pair"],
                      labels={"lpush": "LPUSH", "rpop": "RPOP", "pair": "LPUSH+RPOP pair"}),
    "evalsha": _on(["redis"], client="redis-evalsha", label="EVALSHA return 1"),
    "put-reserve-delete": _on(["beanstalkd"], client="opbench", protocol="beanstalk", label="put+reserve+delete"),
    "rcycle": _on(REDIS_SYSTEMS, client="opbench", protocol="http", args=["-q", "rq"], label="cycle, 1 queue"),
    "rcycle-3q": _on(REDIS_SYSTEMS, client="opbench", protocol="http", args=["-q", "rq1,rq2,rq3"],
                     label="cycle, 3 queues"),
    "rscale": {
        "usher-redis": dict(client="opbench", protocol="http", args=["-q", "rq"], connections="scale",
                            label="cycle, {scale} conns"),
        "usher-redis3": dict(client="opbench", protocol="http", args=["-q", "rq1,rq2,rq3"], connections="scale3",
                             label="cycle, 3q, {scale3} conns"),
    },
    "rpipeline": _on(["usher-redis"], client="wrk", script="rpipeline", label="push+take+consume",
                     setup=("PUT", "/v1/pipelines/rp",
                            '{"capacity": 1000000, "max_in_flight": 1000000, "ack_seconds": 30, "backend": "redis"}')),
    "rpool": _on(["usher-redis"], client="wrk", script="pool", args=["pool=rpl"], label="fetch+recycle"),
    "rmachine": _on(["usher-redis"], client="wrk", script="machine", args=["machine=rm"], label="machine event"),
}

# The targets of issue 28, printed with met / NOT met after the table. A value
# is ("ratio", row, field, row, field) or ("field", row, field); fields are
# numbered as in the per-round rows (1 req/s, 2 ops/s, 5 p99_us, 6 cpu/req).
TARGETS = [
    ("enqueue+complete, return=minimal: Usher/C requests/s",
     ("ratio", "usher/cycle-minimal", 1, "baseline/cycle", 1), ">=", "0.75"),
    ("enqueue+complete, return=minimal: Usher/C CPU µs per request",
     ("ratio", "usher/cycle-minimal", 6, "baseline/cycle", 6), "<=", "1.8"),
    ("enqueue+complete, full answers: Usher/C requests/s", ("ratio", "usher/cycle", 1, "baseline/cycle", 1), ">=", "0.5"),
    ("GET state answered 304: Usher/C requests/s",
     ("ratio", "usher/get-state-304", 1, "baseline/get-state", 1), ">=", "0.85"),
    ("GET state unchanged, full answer: Usher/C requests/s",
     ("ratio", "usher/get-state", 1, "baseline/get-state", 1), ">=", "0.6"),
]
# The same cycles with both sides driven by opbench, when usher/cycle-c ran.
C_CLIENT_TARGETS = [
    ("C client: Usher cycles/s / Redis LPUSH+RPOP pairs/s", ("ratio", "usher/cycle-c", 2, "redis/pair", 2), ">=", "0.9"),
    ("C client: Usher cycles/s / beanstalkd jobs/s",
     ("ratio", "usher/cycle-c", 2, "beanstalkd/put-reserve-delete", 2), ">=", "1"),
]
# p99 of every Usher row that ran, in this order, against this limit (µs).
P99_ROWS = ["get-state", "cycle", "cycle-c", "enqueue", "pipeline", "pool", "machine", "cycle-hold"]
P99_LIMIT = "5000"
IDLE_RSS_LIMIT_MIB = "16"
STARTUP_LIMIT_MS = "100"

# The Usher-on-Redis summary (issue 17): row -> its name there.
REDIS_CYCLE_ROWS = {
    "usher/cycle-c": "memory, 1 queue, 1 process",
    "usher-redis/rcycle": "Redis, 1 queue, 1 process",
    "usher-redis/rcycle-3q": "Redis, 3 queues, 1 process",
    "usher-redis3/rcycle": "Redis, 1 queue, 3 processes",
    "usher-redis3/rcycle-3q": "Redis, 3 queues, 3 processes",
    "usher-redis/rscale": "Redis, 1q, 1p, {scale} conns",
    "usher-redis3/rscale": "Redis, 3q, 3p, {scale3} conns",
}
# Its targets: cycles/s on one queue, and 3 queues on 3 processes / 1 on 1.
REDIS_MIN_CYCLES = "10000"
REDIS_SCALE_MIN = "2"
# The memory and Redis rows of pipelines, pools and machines side by side.
REDIS_KINDS = ["pipeline", "pool", "machine"]

# Usher's configs. "memory": one resource of each kind the scenarios use;
# "redis" (usher-redis, usher-redis3): only resources kept in Redis: queues
# with the settings of "q" (rq for rcycle, rq1..rq3 for rcycle-3q), the pool
# "rpl" and the machine "rm" with those of "pl" and "m".
TICKER = {"initial": "idle", "states": ["idle"], "transitions": [{"event": "tick", "from": "idle", "to": "idle"}]}


def usher_config(port, capacity, pool_elements):
    queue = {"capacity": capacity, "max_waiting": capacity, "hold_seconds": 0, "dedup": "off", "history": 1000}
    return {"port": port, "max_connections": 10000,
            "queues": {"q": queue, "qh": dict(queue, hold_seconds=30)},
            "pipelines": {"p": {"capacity": 1000000, "max_in_flight": 1000000, "ack_seconds": 30}},
            "pools": {"pl": {"elements": [f"e{i}" for i in range(1, pool_elements + 1)], "lease_seconds": 60}},
            "definitions": {"ticker": TICKER},
            "machines": {"m": {"definition": "ticker"}}}


def usher_redis_config(port, redis_port, capacity, pool_elements):
    queue = {"capacity": capacity, "max_waiting": capacity, "hold_seconds": 0, "dedup": "off", "history": 1000,
             "backend": "redis"}
    return {"port": port, "max_connections": 10000, "redis": {"url": f"redis://127.0.0.1:{redis_port}"},
            "queues": {name: queue for name in ("rq", "rq1", "rq2", "rq3")},
            "pools": {"rpl": {"elements": [f"e{i}" for i in range(1, pool_elements + 1)], "lease_seconds": 60,
                              "backend": "redis"}},
            "definitions": {"ticker": TICKER},
            "machines": {"rm": {"definition": "ticker", "backend": "redis"}}}
