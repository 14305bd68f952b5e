#!/usr/bin/env python3
"""Start-up to ready: how long from exec to the first 200 on GET /readyz.

    startup-time.py RUNS FIRST_PORT COMMAND...

COMMAND is run RUNS times; "{port}" in any of its words (or in any
environment variable, e.g. USHER_PORT={port}) is replaced by a different
port for each start: the next port from FIRST_PORT up that can be bound
without SO_REUSEADDR, so that no TIME_WAIT socket is in the way (pick
FIRST_PORT below the ephemeral range, /proc/sys/net/ipv4/ip_local_port_range). After each start the script connects to
127.0.0.1:port in a tight loop (sleeping 0.2 ms after a refused connection)
and sends GET /readyz; the time is taken when a 200 status line arrives. It
then reads VmRSS of the process, sends SIGTERM and waits for it to exit.

Prints one line:
    STARTUP runs=N median_ms=.. min_ms=.. max_ms=.. rss_kib_at_ready=.. (median)
The times include fork/exec from Python (~1 ms), the same for every server.
"""
import os
import socket
import statistics
import subprocess
import sys
import time


def ready(port):
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1) as s:
            s.sendall(b"GET /readyz HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
            data = s.recv(64)
            return data.startswith(b"HTTP/1.1 200") or data.startswith(b"HTTP/1.0 200")
    except OSError:
        return False


def bindable(port):
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
            return True
        except OSError:
            return False


def rss_kib(pid):
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


def main():
    if len(sys.argv) < 4:
        print(__doc__, file=sys.stderr)
        return 2
    runs, first_port, command = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3:]
    times, rss = [], []
    port = first_port - 1
    for i in range(runs):
        port += 1
        while not bindable(port):
            port += 1
        argv = [w.replace("{port}", str(port)) for w in command]
        env = dict(os.environ)
        for k, v in env.items():
            env[k] = v.replace("{port}", str(port))
        t0 = time.monotonic()
        proc = subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            while not ready(port):
                if proc.poll() is not None:
                    print(f"startup-time: {argv[0]} exited with {proc.returncode} before it was ready", file=sys.stderr)
                    return 1
                if time.monotonic() - t0 > 10:
                    print(f"startup-time: {argv[0]} not ready within 10 s", file=sys.stderr)
                    return 1
                time.sleep(0.0002)
            times.append((time.monotonic() - t0) * 1000)
            rss.append(rss_kib(proc.pid))
        finally:
            proc.terminate()
            try:
                proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
    print(f"STARTUP runs={runs} median_ms={statistics.median(times):.1f} min_ms={min(times):.1f} "
          f"max_ms={max(times):.1f} rss_kib_at_ready={int(statistics.median(rss))}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
