#!/usr/bin/env python3
"""Sends a fixed number of requests on one keep-alive connection, for
Benchmarks/callgrind/run: instruction counts need the same requests every time.

  drive.py PORT COUNT cycle   COUNT x (POST /v1/queues/q/visitors, POST .../complete)
  drive.py PORT COUNT get     COUNT x GET /v1/queues/q
  drive.py PORT COUNT get304  the same with If-None-Match naming the state's ETag: every answer 304
  drive.py PORT COUNT minimal the cycle with Prefer: return=minimal (the id read from Location)
  drive.py PORT COUNT fill    COUNT x POST /v1/queues/q/visitors, ids fill-00000000000… (kept)
"""
import http.client
import json
import sys

port, count, mode = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
conn = http.client.HTTPConnection("127.0.0.1", port)


def send(method, path, body=None, headers=None):
    headers = dict(headers or {})
    headers.update({"Content-Type": "application/json"} if body else {"Content-Length": "0"})
    conn.request(method, path, body=body, headers=headers)
    response = conn.getresponse()
    return response.status, response.read(), response


held = {}
if mode == "get304":
    held = {"If-None-Match": send("GET", "/v1/queues/q")[2].getheader("ETag")}
minimal = {"Prefer": "return=minimal"} if mode == "minimal" else {}

for i in range(count):
    if mode in ("get", "get304"):
        status, _, _ = send("GET", "/v1/queues/q", headers=held)
        assert status == (304 if held else 200), status
        continue
    if mode == "fill":
        # Client ids as long as generated ones: builds compare on the same bytes.
        status, body, _ = send("POST", "/v1/queues/q/visitors", '{"id":"fill-%011d"}' % i)
        assert status == 201, (status, body)
        continue
    status, body, response = send("POST", "/v1/queues/q/visitors", '{"payload":{"n":1}}', minimal)
    assert status == 201, (status, body)
    visitor = response.getheader("Location").rsplit("/", 1)[1] if minimal else json.loads(body)["id"]
    status, body, _ = send("POST", f"/v1/queues/q/visitors/{visitor}/complete", headers=minimal)
    assert status == 200, (status, body)
