#!/usr/bin/env python3
"""Sends a fixed number of requests on one keep-alive connection, for
Benchmarks/callgrind/run: instruction counts need the same requests every time.

  drive.py PORT COUNT cycle   COUNT x (POST /v1/queues/q/visitors, POST .../complete)
  drive.py PORT COUNT get     COUNT x GET /v1/queues/q
  drive.py PORT COUNT fill    COUNT x POST /v1/queues/q/visitors, ids fill-00000000000… (kept)
"""
import http.client
import json
import sys

port, count, mode = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
conn = http.client.HTTPConnection("127.0.0.1", port)


def send(method, path, body=None):
    headers = {"Content-Type": "application/json"} if body else {"Content-Length": "0"}
    conn.request(method, path, body=body, headers=headers)
    response = conn.getresponse()
    return response.status, response.read()


for i in range(count):
    if mode == "get":
        status, _ = send("GET", "/v1/queues/q")
        assert status == 200, status
        continue
    if mode == "fill":
        # Client ids as long as generated ones: builds compare on the same bytes.
        status, body = send("POST", "/v1/queues/q/visitors", '{"id":"fill-%011d"}' % i)
        assert status == 201, (status, body)
        continue
    status, body = send("POST", "/v1/queues/q/visitors", '{"payload":{"n":1}}')
    assert status == 201, (status, body)
    visitor = json.loads(body)["id"]
    status, body = send("POST", f"/v1/queues/q/visitors/{visitor}/complete")
    assert status == 200, (status, body)
