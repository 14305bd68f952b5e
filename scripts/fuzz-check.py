"""fuzz-check: a raw-socket HTTP fuzzer for usher, driven by Hypothesis.

Started by scripts/fuzz-check, which installs Hypothesis and builds usher.
This file starts usher itself (so that it can restart it after a crash),
sends generated requests over plain sockets (no client library, so nothing
is normalised on the way) and judges every answer:

- crash: the process is gone;
- hang: no answer within --hang-seconds to a request that is not a stream
  (long-polls are capped by the config's max_wait_seconds);
- 5xx: any, except 507, 501 for a Transfer-Encoding other than chunked,
  and 505 for an HTTP version other than 1.0/1.1;
- desync: the bytes after the request are read as another request (a
  smuggled request answered, or the canary request that follows every
  request not answered as itself);
- framing: conflicting or invalid Content-Length, or an unknown
  Transfer-Encoding, answered as if the request were fine; a connection kept
  after Content-Length with Transfer-Encoding (RFC 9112 section 6);
- control: a NUL or control byte in the decoded path (or in the query of a
  route that reads it), or (token run) a NUL in the Authorization header,
  and still 2xx: the value was cut at the NUL (RFC 9110 section 5.5);
- auth (token run): 2xx without the token on a path that is not one of the
  open routes after the normalisation a lenient server might do;
- strict: a head RFC 9110/9112 refuse answered 2xx (two Host, Origin or
  Authorization headers, HTTP/1.1 without Host, a Host with userinfo,
  whitespace before a colon, more query parameters than the server takes),
  a Host with whitespace around it answered 421, or (token run) 100
  Continue sent before a refusal.

Each failure is reduced (mutations, query, body and earlier requests are
dropped while the failure stays) and printed once per distinct kind and set
of remaining mutations, with a printf|nc repro.
"""

import argparse
import collections
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.parse

from hypothesis import HealthCheck, Phase, given, settings, seed as hypothesis_seed, strategies as st

CONFIG = {
    "host": "127.0.0.1",
    "port": 0,
    "max_wait_seconds": 0.25,
    "shutdown_grace_seconds": 1,
    "queues": {"printer": {"capacity": 1, "hold_seconds": 60}},
    "windows": {"alerts": {"display_seconds": 0}},
    "pools": {"licences": {"elements": ["seat-1", {"id": "seat-2", "data": {"key": "K-2"}}], "lease_seconds": 60}},
    "pipelines": {"gifts": {"capacity": 1000, "max_in_flight": 100, "filters": {
        "no-heartbeats": {"priority": 10, "when": {"field": "/type", "equals": "heartbeat"}, "action": "drop"}}}},
    "machines": {"player": {"definition": "player"}},
}
LIVE_NAMES = {"queues": "printer", "windows": "alerts", "pools": "licences", "pipelines": "gifts", "machines": "player"}
LIVE_IDS = ["job-1", "alert-1", "lease-1", "seat-1", "seat-3", "toy-1", "no-heartbeats", "prepare", "play", "stop"]
# Routes that need no token, ever (docs/api.md, Operations).
OPEN_PATHS = {"/", "/healthz", "/readyz", "/metrics", "/openapi.json", "/dashboard.js", "/dashboard.css"}
HOST = b"Host: 127.0.0.1"
# Follows every request on the same connection: its answer must be the next
# one, and the last.
CANARY = b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n"
CANARY_BODY = b'"ok"'
# A request hidden in a body: answered only when framing went wrong.
SMUGGLED = b"GET /readyz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"
SMUGGLED_BODY = b'"ready"'


# --- the server ---------------------------------------------------------------

class Server:
    """usher on a free loopback port, restartable."""

    def __init__(self, binary, workdir, token):
        self.binary, self.workdir, self.token = binary, workdir, token
        self.proc = None
        self.port = None
        self.starts = 0
        self.config = os.path.join(workdir, "usher.json")
        with open(self.config, "w") as f:
            json.dump(CONFIG, f)

    def start(self):
        self.stop()
        self.starts += 1
        self.log = os.path.join(self.workdir, f"usher-{self.starts}.log")
        env = {k: v for k, v in os.environ.items() if not k.startswith("USHER_")}
        env["USHER_LOG_LEVEL"] = "info"
        if self.token:
            env["USHER_TOKEN"] = self.token
        with open(self.log, "wb") as out:
            self.proc = subprocess.Popen([self.binary, "--config", self.config], cwd=self.workdir, env=env,
                                         stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            m = re.search(rb"http://127\.0\.0\.1:(\d+)", open(self.log, "rb").read())
            if m:
                self.port = int(m.group(1))
                return
            if self.proc.poll() is not None:
                break
            time.sleep(0.02)
        raise SystemExit(f"fuzz-check: usher did not start:\n{self.tail()}")

    def alive(self):
        return self.proc is not None and self.proc.poll() is None

    def death(self):
        code = self.proc.returncode
        reason = f"signal {-code}" if code < 0 else f"exit status {code}"
        lines = [l for l in self.tail(40).splitlines() if re.search(r"Fatal|fatal|error|Crash|Abort|overflow", l)]
        return reason + (f": {lines[0].strip()[:200]}" if lines else "")

    def tail(self, n=20):
        try:
            return "\n".join(open(self.log, errors="replace").read().splitlines()[-n:])
        except OSError:
            return ""

    def stop(self):
        if self.alive():
            self.proc.terminate()
            try:
                self.proc.wait(5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.proc = None


# --- one exchange over a raw socket -----------------------------------------

class Exchange:
    """What came back for one request (plus the canary) on one connection."""

    def __init__(self):
        self.responses = []  # (status, headers {lower name: [values]}, body)
        self.closed = False  # the server closed (or reset) the connection
        self.timed_out = False
        self.stream = False  # an event stream: left open on purpose
        self.error = None
        self.seconds = 0.0
        self.interim = False  # a 1xx came before the first final answer


def parse_responses(buf, first_is_head):
    """Complete responses at the start of buf; 1xx are skipped. Returns
    (responses, rest, stream) where stream is True when a response is an
    open text/event-stream."""
    out, i = [], 0
    while True:
        end = buf.find(b"\r\n\r\n", i)
        if end < 0:
            return out, buf[i:], False
        lines = buf[i:end].split(b"\r\n")
        m = re.match(rb"HTTP/\d\.\d (\d{3})", lines[0])
        if not m:
            out.append((0, {}, buf[i:]))
            return out, b"", False
        status = int(m.group(1))
        headers = collections.defaultdict(list)
        for line in lines[1:]:
            name, _, value = line.partition(b":")
            headers[name.strip().lower().decode("latin-1")].append(value.strip().decode("latin-1"))
        j = end + 4
        if 100 <= status < 200:
            i = j
            continue
        if "text/event-stream" in ",".join(headers.get("content-type", [])):
            out.append((status, dict(headers), b""))
            return out, b"", True
        if (not out and first_is_head) or status in (204, 304):
            body = b""
        elif "chunked" in ",".join(headers.get("transfer-encoding", [])).lower():
            body, k = b"", j
            while True:
                eol = buf.find(b"\r\n", k)
                if eol < 0:
                    return out, buf[i:], False
                size = int(buf[k:eol].split(b";")[0] or b"0", 16)
                if len(buf) < eol + 2 + size + 2:
                    return out, buf[i:], False
                body += buf[eol + 2:eol + 2 + size]
                k = eol + 2 + size + 2
                if size == 0:
                    break
            j = k
        elif headers.get("content-length"):
            n = int(headers["content-length"][0])
            if len(buf) < j + n:
                return out, buf[i:], False
            body = buf[j:j + n]
            j += n
        else:
            return out, buf[i:], False  # until close: complete only at EOF
        out.append((status, dict(headers), body))
        i = j


def exchange(port, data, first_is_head, timeout):
    ex = Exchange()
    started = time.monotonic()
    deadline = started + timeout
    buf = b""
    try:
        sock = socket.create_connection(("127.0.0.1", port), timeout=2)
    except OSError as e:
        ex.error, ex.closed = f"connect: {e}", True
        return ex
    with sock:
        try:
            sock.sendall(data)
        except OSError:
            pass  # the server answered early and closed; read what it sent
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                ex.timed_out = True
                break
            sock.settimeout(left)
            try:
                chunk = sock.recv(65536)
            except socket.timeout:
                ex.timed_out = True
                break
            except OSError:
                ex.closed = True
                break
            if not chunk:
                ex.closed = True
                break
            buf += chunk
            _, _, stream = parse_responses(buf, first_is_head)
            if stream:
                ex.stream = True
                break
    responses, rest, _ = parse_responses(buf, first_is_head)
    if ex.closed and rest:
        # A body delimited by the close.
        m = re.match(rb"HTTP/\d\.\d (\d{3})", rest)
        if m:
            responses.append((int(m.group(1)), {}, rest))
    ex.responses = responses
    ex.interim = re.match(rb"HTTP/\d\.\d 1\d\d ", buf) is not None
    ex.seconds = time.monotonic() - started
    return ex


# --- requests: a base from the OpenAPI document plus mutations ------------------

class Request:
    """A route's request and the mutations applied to it when rendered.
    Mutations are data, so that the reducer can drop them one at a time."""

    def __init__(self, method, template, segments, query, body, mutations, auth):
        self.method = method
        self.template = template
        self.segments = segments  # decoded path segments
        self.query = query  # [(name, value)]
        self.body = body  # a JSON value, or None for no body
        self.mutations = mutations  # [(tag, *args)]
        self.auth = auth  # True: the correct Authorization header

    def replace(self, **changes):
        fields = dict(method=self.method, template=self.template, segments=self.segments, query=self.query,
                      body=self.body, mutations=self.mutations, auth=self.auth)
        fields.update(changes)
        return Request(**fields)


class Rendered:
    """A request's bytes (with the canary after them) and what the judge needs to know of them."""

    def __init__(self, data, tags, head, has_token, control, framing, version, te_values, cl_te):
        self.data, self.tags, self.head = data, tags, head
        self.has_token, self.control, self.framing = has_token, control, framing
        self.version, self.te_values, self.cl_te = version, te_values, cl_te


SENTINEL = "\u0001fuzz{}\u0001"


def pct(text, safe="-._~:@!$&'()*+,;="):
    return urllib.parse.quote(text, safe=safe).encode()


def set_field(value, pick, make):
    """Replaces one member (chosen by pick) of the top object; returns the new value."""
    if isinstance(value, dict) and value:
        keys = sorted(value)
        key = keys[pick % len(keys)]
        out = dict(value)
        out[key] = make(out[key])
        return out
    return make(value)


def find_pointer_fields(value, n):
    """Sets every "field" member (a JSON Pointer in filters) to n levels."""
    if isinstance(value, dict):
        return {k: ("/a" * n if k == "field" else find_pointer_fields(v, n)) for k, v in value.items()}
    if isinstance(value, list):
        return [find_pointer_fields(v, n) for v in value]
    return value


def render_body(req, tags):
    """JSON text of the body after the body mutations, or None."""
    if req.body is None and not any(m[0].startswith("json-") for m in req.mutations):
        return None
    value = {} if req.body is None else req.body
    raw = {}

    def splice(text):
        key = SENTINEL.format(len(raw))
        raw[key] = text
        return key

    for m in req.mutations:
        tag = m[0]
        if tag == "json-deep":
            _, depth, opener, where = m
            closer = {"[": "]", "{": "}"}[opener]
            text = ('{"a":' * depth + "1" + "}" * depth) if opener == "{" else (opener * depth + closer * depth)
            value = splice(text) if where == 0 else set_field(value, where, lambda _: splice(text))
        elif tag == "json-number":
            _, text, where = m
            value = set_field(value, where, lambda _: splice(text))
        elif tag == "json-wrong-type":
            _, replacement, where = m
            value = set_field(value, where, lambda _: replacement)
        elif tag == "json-unknown-member":
            if not isinstance(value, dict):
                continue
            value = dict(value, **{m[1]: m[2]})
        elif tag == "json-duplicate-key":
            if not (isinstance(value, dict) and value):
                continue
            key = sorted(value)[m[1] % len(value)]
            value = {k: (splice(json.dumps(v) + "," + json.dumps(key) + ":" + json.dumps(m[2])) if k == key else v)
                     for k, v in value.items()}
        elif tag == "json-deep-pointer":
            deeper = find_pointer_fields(value, m[1])
            if deeper == value:
                continue
            value = deeper
        elif tag == "json-long-string":
            value = set_field(value, m[2], lambda _: "x" * m[1])
        elif tag == "json-text":
            value = splice(m[1])
        else:
            continue
        tags.append(tag)
    text = json.dumps(value, ensure_ascii=False)
    for key, replacement in raw.items():
        text = text.replace(json.dumps(key, ensure_ascii=False), replacement)
    return text.encode("utf-8", "surrogatepass")


def chunked(body, style):
    """body in chunked coding, odd chunk-size spellings by style."""
    if style == "plain":
        return b"%x\r\n%s\r\n0\r\n\r\n" % (len(body), body) if body else b"0\r\n\r\n"
    if style == "upper-zeros":
        return (b"%08X\r\n%s\r\n" % (len(body), body) if body else b"") + b"000\r\n\r\n"
    if style == "extensions":
        return (b'%x;a=b;c="d"\r\n%s\r\n' % (len(body), body) if body else b"") + b"0;e\r\nX-Trailer: t\r\n\r\n"
    if style == "one-byte":
        return b"".join(b"1\r\n%s\r\n" % body[i:i + 1] for i in range(len(body))) + b"0\r\n\r\n"
    # Invalid spellings: must be refused, never read some other way.
    data = body if len(body) >= 2 else b"{}"
    if style == "bare-lf":
        return b"%x\n%s\r\n0\r\n\r\n" % (len(data), data) + SMUGGLED
    if style == "bare-lf-data":
        return b"1\r\n%s\n%x\r\n%s\r\n0\r\n\r\n" % (data[:1], len(data) - 1, data[1:]) + SMUGGLED
    if style == "huge":
        # Larger than any max_body_bytes: 413 when the line arrives.
        return b"FFFFFFFFFFFFFFFF\r\n" + body + b"\r\n0\r\n\r\n" + SMUGGLED
    size = {"negative": b"-%x" % len(body), "hex-prefix": b"0x%x" % len(body), "plus": b"+%x" % len(body),
            "not-hex": b"g", "overflow": b"1" + b"0" * 16, "space-inside": b"%x %x" % (len(body), 1)}[style]
    return size + b"\r\n" + body + b"\r\n0\r\n\r\n" + SMUGGLED


INVALID_CHUNK_STYLES = ["negative", "hex-prefix", "plus", "not-hex", "overflow", "space-inside", "bare-lf",
                        "bare-lf-data", "huge"]
# The server's max_query_parameters (the default).
MAX_QUERY_PARAMETERS = 100
VALID_CHUNK_STYLES = ["plain", "upper-zeros", "extensions", "one-byte"]


def render(req, token):
    tags = []
    head = False
    # Method.
    method = req.method.encode()
    for m in req.mutations:
        if m[0] == "method":
            method = m[1]
            tags.append("method:" + m[2])
    head = method == b"HEAD"
    # Path.
    segs = [pct(s, safe="-._~:@!$&'()*+,;=") for s in req.segments]
    trailing, absolute, no_slash, fragment, prefix = False, False, False, b"", b""
    for m in req.mutations:
        tag = m[0]
        if not tag.startswith("path-"):
            continue
        i = m[1] % (len(segs) + 1) if segs else 0
        j = min(i, len(segs) - 1) if segs else 0
        if tag == "path-empty-segment":
            segs.insert(i, b"")
        elif tag == "path-dot":
            segs.insert(i, m[2])
        elif tag == "path-dotdot":
            segs[i:i] = [b"fuzz", m[2]]
        elif tag == "path-encode-char" and segs and segs[j]:
            k = m[2] % len(segs[j])
            enc = (b"%%%02x" if m[3] else b"%%%02X") % segs[j][k]
            segs[j] = segs[j][:k] + enc + segs[j][k + 1:]
        elif tag == "path-encoded-slash" and len(segs) >= 2:
            j = min(j, len(segs) - 2)
            segs[j:j + 2] = [segs[j] + m[2] + segs[j + 1]]
        elif tag in ("path-nul", "path-control") and segs:
            segs[j] = segs[j] + m[2] + m[3]
        elif tag == "path-overlong" and segs:
            segs[j] = b"a" * m[2]
        elif tag == "path-unicode" and segs:
            segs[j] = segs[j] + (pct(m[2], safe="") if m[3] else m[2].encode())
        elif tag == "path-bad-utf8" and segs:
            segs[j] = segs[j] + m[2]
        elif tag == "path-case" and segs:
            segs[j] = segs[j].upper()
        elif tag == "path-backslash" and len(segs) >= 2:
            j = min(j, len(segs) - 2)
            segs[j:j + 2] = [segs[j] + m[2] + segs[j + 1]]
        elif tag == "path-prefix":
            prefix = m[2]
        elif tag == "path-trailing-slash":
            trailing = True
        elif tag == "path-absolute":
            absolute = True
        elif tag == "path-no-leading-slash":
            no_slash = True
        elif tag == "path-fragment":
            fragment = b"#" + m[2]
        else:
            continue
        tags.append(tag)
    target = b"/".join(segs)
    target = prefix + (b"" if no_slash else b"/") + target + (b"/" if trailing and segs else b"")
    if absolute:
        target = b"http://127.0.0.1" + (target if target.startswith(b"/") else b"/" + target)
    query = b"&".join(pct(k, safe="") + b"=" + pct(v, safe="") for k, v in req.query)
    for m in req.mutations:
        if m[0] == "query-raw":
            query = (query + b"&" if query else b"") + m[1]
            tags.append("query-raw")
        elif m[0] == "many-query":
            query = (query + b"&" if query else b"") + b"&".join(b"fz%d=1" % k for k in range(m[1]))
    if any(m[0] == "many-query" for m in req.mutations):
        count = len(query.split(b"&"))
        tags.append("many-query:" + ("over" if count > MAX_QUERY_PARAMETERS else "within"))
    if query:
        target += b"?" + query
    target += fragment
    # Version.
    version = b"HTTP/1.1"
    for m in req.mutations:
        if m[0] == "version":
            version = m[1]
            tags.append("version")
    # Body and framing.
    body = render_body(req, tags)
    body_bytes = body or b""
    framing = None
    for m in req.mutations:
        if m[0] == "framing":
            framing = m[1:]
            tags.append("framing:" + m[1])
            break
    headers = [HOST]
    has_token = False
    if req.auth and token:
        headers.append(b"Authorization: Bearer " + token.encode())
        has_token = True
    extra = []
    for m in req.mutations:
        tag = m[0]
        if tag == "auth":
            headers = [h for h in headers if not h.lower().startswith(b"authorization:")]
            has_token = False
            for line in m[2]:
                line = line.replace(b"TOKEN", (token or "t0ken").encode())
                headers.append(line)
                if token and token.encode() in line and line.lower().startswith(b"authorization"):
                    has_token = True
            tags.append("auth:" + m[1])
        elif tag == "host":
            headers = [h for h in headers if h != HOST] + list(m[2])
            tags.append("host:" + m[1])
        elif tag == "header":
            extra += list(m[2])
            tags.append("header:" + m[1])
        elif tag == "huge-header":
            extra.append(b"X-Fuzz: " + b"a" * m[1])
            tags.append(tag)
        elif tag == "many-headers":
            extra += [b"X-Fuzz-%d: %d" % (k, k) for k in range(m[1])]
            tags.append(tag)
        elif tag == "many-cookies":
            extra.append(b"Cookie: " + b"; ".join(b"c%d=%d" % (k, k) for k in range(m[1])))
            tags.append(tag)
    headers += extra
    te_values, cl_te = [], False
    if framing is None:
        if body is not None or method in (b"POST", b"PUT", b"PATCH"):
            headers.append(b"Content-Length: %d" % len(body_bytes))
        payload = body_bytes
    else:
        kind = framing[0]
        if kind == "cl-duplicate-same":
            headers += [b"Content-Length: %d" % len(body_bytes)] * 2
            payload = body_bytes
        elif kind == "cl-duplicate-different":
            short, long_ = b"Content-Length: %d" % len(body_bytes), b"Content-Length: %d" % (len(body_bytes) + len(SMUGGLED))
            headers += [short, long_] if framing[1] else [long_, short]
            payload = body_bytes + SMUGGLED
        elif kind == "cl-list":
            headers.append(b"Content-Length: %d, %d" % (len(body_bytes), len(body_bytes) + len(SMUGGLED)))
            payload = body_bytes + SMUGGLED
        elif kind == "cl-invalid":
            headers.append(b"Content-Length: " + framing[1].replace(b"N", b"%d" % len(body_bytes)))
            payload = body_bytes
        elif kind == "cl-te":
            # The classic smuggle: CL covers the chunked body and a request.
            coded = chunked(body_bytes, "plain") + SMUGGLED
            lines = [b"Content-Length: %d" % len(coded), b"Transfer-Encoding: " + framing[2]]
            headers += lines if framing[1] else lines[::-1]
            te_values.append(framing[2])
            payload, cl_te = coded, True
        elif kind == "te-unknown":
            headers.append(b"Transfer-Encoding: " + framing[1])
            te_values.append(framing[1])
            if framing[2]:
                headers.append(b"Content-Length: %d" % len(body_bytes))
                cl_te = True
            payload = chunked(body_bytes, "plain") if b"chunked" in framing[1].lower() else body_bytes
        elif kind == "chunked":
            headers.append(b"Transfer-Encoding: chunked")
            te_values.append(b"chunked")
            payload = chunked(body_bytes, framing[1])
        else:
            raise AssertionError(kind)
    eol = b"\r\n"
    for m in req.mutations:
        if m[0] == "line-endings":
            eol = b"\n"
            tags.append("line-endings")
    head_bytes = method + b" " + target + b" " + version + eol + b"".join(h + eol for h in headers) + eol
    data = head_bytes + payload
    path, _, query = target.split(b"#")[0].partition(b"?")
    control = set()
    if re.search(rb"[\x00-\x1f\x7f]", urllib.parse.unquote_to_bytes(path)):
        control.add("path")
    if re.search(rb"[\x00-\x1f\x7f]", urllib.parse.unquote_to_bytes(query)):
        control.add("query")
    if any(b"\x00" in h for h in headers if h.lower().startswith(b"authorization")):
        control.add("authorization")
    return Rendered(data + CANARY, tags, head, has_token, control, framing, version, te_values, cl_te)


# --- judging --------------------------------------------------------------------

def normalised_paths(target):
    """Where a lenient server might route a request target."""
    raw = target.split(b"#")[0].split(b"?")[0]
    m = re.match(rb"[A-Za-z]+://[^/]*", raw)
    if m:
        raw = raw[m.end():]
    out = set()
    for decoded in (raw, urllib.parse.unquote_to_bytes(raw), urllib.parse.unquote_to_bytes(urllib.parse.unquote_to_bytes(raw))):
        text = decoded.replace(b"\\", b"/").decode("latin-1")
        parts = []
        for seg in text.split("/"):
            if seg in ("", "."):
                continue
            if seg == "..":
                if parts:
                    parts.pop()
                continue
            parts.append(seg)
        out.add("/" + "/".join(parts))
        out.add("/" + "/".join(p.lower() for p in parts))
    return out


def request_target(data):
    line = data.split(b"\n", 1)[0]
    parts = line.split(b" ")
    return parts[1] if len(parts) >= 3 else b""


def judge(rendered, ex, alive, token_run, hang_seconds):
    """The failure kind and a one-line detail, or None."""
    if not alive:
        return "crash", None
    first = ex.responses[0] if ex.responses else None
    if first is None:
        if ex.timed_out and not ex.stream:
            return "hang", f"no answer within {hang_seconds:g} s"
        return None
    status = first[0]
    if status >= 500:
        allowed = status == 507 or (status == 501 and any(
            v.strip().lower() != b"chunked" for v in rendered.te_values)) or (
            status == 505 and rendered.version not in (b"HTTP/1.0", b"HTTP/1.1"))
        if not allowed:
            return "5xx", f"answered {status}"
    # Desync: the next answer must be the canary's, and the last.
    later = ex.responses[1:]
    for status_n, _, body in later:
        if SMUGGLED_BODY in body:
            return "desync", f"a request hidden in the body was answered ({status}, then {status_n} from /readyz)"
    # libmicrohttpd 0.9.75 answers a Content-Length it cannot parse itself,
    # before any handler runs, and sends that 400's head twice before it
    # closes the connection; nothing after it is served (docs/operations.md).
    if (status == 400 and ex.closed and rendered.framing and rendered.framing[0] in ("cl-invalid", "cl-list")
            and all(CANARY_BODY not in body for _, _, body in later)):
        return None
    if later and CANARY_BODY not in later[0][2]:
        if later[0][:2] == first[:2]:
            return "desync", f"the head of the {status} answer was sent twice"
        return "desync", f"the request after it was answered {later[0][0]}, not as itself"
    if len(later) > 1:
        return "desync", f"{len(ex.responses)} answers to 2 requests"
    if ex.timed_out and not ex.stream and not later and first[1].get("connection", [""])[0].lower() != "close":
        return "hang", f"answered {status}, then the canary request after it got no answer within {hang_seconds:g} s"
    framing = rendered.framing
    if framing:
        kind = framing[0]
        refused = status in (400, 411, 413, 414, 431, 505)
        if kind in ("cl-duplicate-different", "cl-list", "cl-invalid") and not refused:
            return "framing", f"conflicting or invalid Content-Length answered {status} (RFC 9112 6.3: 400)"
        if kind == "te-unknown" and b"identity" not in framing[1].lower() and not refused and status != 501:
            tes = framing[1].lower().replace(b" ", b"").split(b",")
            if tes != [b"chunked"]:
                return "framing", f"Transfer-Encoding {framing[1].decode('latin-1')!r} answered {status} (RFC 9112 6.1: 501, or 400)"
        if kind == "chunked" and framing[1] in INVALID_CHUNK_STYLES and not refused:
            return "framing", f"invalid chunk size ({framing[1]}) answered {status} (RFC 9112 7.1: 400)"
        if rendered.cl_te and later:
            return "framing", "connection kept open after Content-Length with Transfer-Encoding (RFC 9112 6.1: close it)"
    # "host:missing" counts only when no other host mutation (origin-same, ...) put a Host back.
    head = rendered.data.split(b"\r\n\r\n", 1)[0].lower()
    strict = sorted(t for t in rendered.tags if t in STRICT_TAGS or (
        t == "host:missing" and rendered.version == b"HTTP/1.1" and b"\r\nhost:" not in head))
    if strict and 200 <= status < 300:
        return "strict", f"{strict[0]} answered {status} (RFC 9110/9112: 400)"
    if "many-query:over" in rendered.tags and 200 <= status < 300:
        return "strict", f"more than {MAX_QUERY_PARAMETERS} query parameters answered {status} (414)"
    if status == 421 and any(t in ("host:padded", "host:padded-tab") for t in rendered.tags):
        return "strict", "a Host with whitespace around it answered 421 (RFC 9110 5.5: the whitespace is not the value)"
    if token_run and ex.interim and status in (401, 403, 421):
        return "strict", f"100 Continue came before the {status}: the body was asked for, then refused"
    if not 200 <= status < 300:
        return None
    # Open routes ignore queries and tokens: a NUL there changes nothing.
    is_open = bool(normalised_paths(request_target(rendered.data)) & OPEN_PATHS)
    if "path" in rendered.control:
        return "control", f"NUL or control byte in the decoded path answered {status}"
    if "query" in rendered.control and not is_open:
        return "control", f"NUL or control byte in the decoded query answered {status}"
    if token_run and "authorization" in rendered.control and not is_open:
        return "control", f"NUL in the Authorization header answered {status}"
    if token_run and not rendered.has_token and not is_open:
        return "auth", f"{status} without the token"
    return None


# Heads RFC 9110/9112 refuse: never 2xx.
STRICT_TAGS = {"host:duplicate", "host:duplicate-same", "host:at", "host:userinfo", "host:space-inside",
               "host:space-before-colon", "host:origin-duplicate", "auth:wrong-then-right", "auth:right-then-wrong",
               "auth:space-before-colon", "header:space-in-name", "header:space-before-colon",
               "header:tab-before-colon", "header:te-space-before-colon", "header:if-match-duplicate"}


# --- repros ---------------------------------------------------------------------

def bytes_literal(data):
    """A b"..." literal with no single quote in it (for a single-quoted shell word)."""
    out = []
    for b in data:
        c = chr(b)
        out.append({"\r": "\\r", "\n": "\\n", "\\": "\\\\", '"': "\\x22", "'": "\\x27"}.get(c) or (
            c if 32 <= b < 127 else f"\\x{b:02x}"))
    return 'b"' + "".join(out) + '"'


def py_bytes(data):
    """A Python expression for data with long runs folded."""
    parts, lit, i = [], bytearray(), 0
    while i < len(data):
        for unit in (1, 2, 3, 4, 5):
            u = data[i:i + unit]
            n = 1
            while data[i + n * unit:i + (n + 1) * unit] == u and len(u) == unit:
                n += 1
            if n * unit >= 32 and n >= 8:
                if lit:
                    parts.append(bytes_literal(bytes(lit)))
                    lit = bytearray()
                parts.append(f"{bytes_literal(bytes(u))}*{n}")
                i += n * unit
                break
        else:
            lit.append(data[i])
            i += 1
    if lit:
        parts.append(bytes_literal(bytes(lit)))
    return "+".join(parts) or "b''"


def repro_line(data):
    expr = py_bytes(data)
    if "*" not in expr and len(data) < 400:
        out = []
        for b in data:
            c = chr(b)
            out.append({"\r": "\\r", "\n": "\\n", "%": "%%", "\\": "\\\\", "'": "\\x27"}.get(c) or (
                c if 32 <= b < 127 else f"\\x{b:02x}"))
        return f"printf '{''.join(out)}' | nc 127.0.0.1 $PORT"
    return f"python3 -c 'import sys; sys.stdout.buffer.write({expr})' | nc 127.0.0.1 $PORT"


# --- generation -------------------------------------------------------------------

class Grammar:
    def __init__(self, document, token_run):
        self.doc = document
        self.token_run = token_run
        self.ops = []
        for path, item in document["paths"].items():
            for method, op in item.items():
                if method not in ("get", "put", "post", "patch", "delete"):
                    continue
                if path == "/v1/events":
                    continue  # a stream, never a hang; covered by the path mutations
                schema = None
                body = op.get("requestBody", {}).get("content", {}).get("application/json")
                if body:
                    schema = body.get("schema")
                params = [p for p in op.get("parameters", []) if p.get("in") == "query"]
                self.ops.append((method.upper(), path, schema, params))
        self.cache = {}

    def resolve(self, schema):
        while isinstance(schema, dict) and "$ref" in schema:
            node = self.doc
            for part in schema["$ref"].lstrip("#/").split("/"):
                node = node[part]
            schema = node
        return schema

    def any_json(self):
        return st.recursive(
            st.none() | st.booleans() | st.integers(-10, 10) | st.text(max_size=8),
            lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3),
            max_leaves=6)

    def value(self, schema, depth=0):
        schema = self.resolve(schema) or {}
        if depth > 6:
            return self.any_json()
        if "const" in schema:
            return st.just(schema["const"])
        if "enum" in schema:
            return st.sampled_from(schema["enum"])
        for key in ("oneOf", "anyOf"):
            if key in schema:
                base = {k: v for k, v in schema.items() if k not in ("oneOf", "anyOf", "description")}
                return st.one_of([self.value({**base, **self.resolve(sub)}, depth + 1) for sub in schema[key]])
        types = schema.get("type")
        if types is None:
            types = "object" if "properties" in schema else None
        if types is None:
            return self.any_json()
        if isinstance(types, list):
            return st.one_of([self.value({**schema, "type": t}, depth) for t in types])
        if types == "null":
            return st.none()
        if types == "boolean":
            return st.booleans()
        if types in ("integer", "number"):
            lo, hi = schema.get("minimum"), schema.get("maximum")
            if "exclusiveMinimum" in schema:
                lo = schema["exclusiveMinimum"] + (1 if types == "integer" else 0.001)
            lo = -10**6 if lo is None else lo
            hi = 10**6 if hi is None else hi
            ints = st.integers(int(-(-lo // 1)), int(hi // 1))
            if types == "integer":
                return ints
            return ints | st.floats(lo, hi, allow_nan=False, allow_infinity=False)
        if types == "string":
            if "pattern" in schema:
                return st.from_regex(schema["pattern"], fullmatch=True).filter(
                    lambda s: len(s) <= schema.get("maxLength", 10**6))
            return st.text(min_size=schema.get("minLength", 0), max_size=min(schema.get("maxLength", 12), 12))
        if types == "array":
            return st.lists(self.value(schema.get("items", {}), depth + 1), min_size=schema.get("minItems", 0),
                            max_size=max(schema.get("minItems", 0), min(schema.get("maxItems", 3), 3)))
        if types == "object":
            props = schema.get("properties", {})
            required = [k for k in schema.get("required", []) if k in props]
            return st.fixed_dictionaries(
                {k: self.value(props[k], depth + 1) for k in required},
                optional={k: self.value(v, depth + 1) for k, v in props.items() if k not in required})
        return self.any_json()

    def body(self, schema):
        key = json.dumps(schema, sort_keys=True)
        if key not in self.cache:
            self.cache[key] = self.value(schema)
        return self.cache[key]


NAMES = st.from_regex(r"\A[A-Za-z0-9][A-Za-z0-9._:-]{0,12}\Z")
WAITS = ["0", "0.01", "0.1", "0.25", "1", "-1", "1e999", "nan", "inf", "abc", "", "0x1", "1_0", " 0"]
QUERY_RAW = [b"&", b"==", b"=", b"wait", b"wait=0&wait=0.1", b"%zz", b"%", b"%0", b"wait=0%00", b"wait=%30",
             b"a+b=c+d", b"%00=%00", b"wait=0;x", b"\xff=\xfe", b"%ff%fe=1", b"x=%E2%82%AC", b"unknown=1",
             b"limit=-1", b"limit=99999999999999999999", b"max=0", b"kind=queue%0a", b"wait=0#x", b"?", b"a" * 9000]


@st.composite
def mutation(draw):
    kind = draw(st.sampled_from([
        "method", "path-empty-segment", "path-empty-segment", "path-dot", "path-dotdot", "path-encode-char",
        "path-encode-char", "path-encoded-slash", "path-nul", "path-control", "path-overlong", "path-unicode",
        "path-bad-utf8", "path-case", "path-backslash", "path-trailing-slash", "path-absolute",
        "path-no-leading-slash", "path-fragment", "path-prefix", "path-prefix", "query-raw", "version", "framing", "framing", "framing",
        "auth", "auth", "host", "host", "header", "huge-header", "many-headers", "many-cookies", "many-query",
        "line-endings",
        "json-deep", "json-number", "json-wrong-type", "json-unknown-member", "json-duplicate-key",
        "json-deep-pointer", "json-long-string", "json-text"]))
    at = draw(st.integers(0, 6))
    if kind == "method":
        name, value = draw(st.sampled_from([
            ("lowercase", b"get"), ("lowercase", b"post"), ("mixed-case", b"Put"), ("unknown", b"FOO"),
            ("unknown", b"BREW"), ("options", b"OPTIONS"), ("trace", b"TRACE"), ("connect", b"CONNECT"),
            ("head", b"HEAD"), ("overlong", b"G" * 10000), ("control", b"GE\x00T"), ("empty", b""),
            ("unicode", "ГЕТ".encode()), ("patch", b"PATCH"), ("delete", b"DELETE")]))
        return (kind, value, name)
    if kind == "path-dot":
        return (kind, at, draw(st.sampled_from([b".", b"%2e", b"%2E"])))
    if kind == "path-dotdot":
        return (kind, at, draw(st.sampled_from([b"..", b"%2e%2e", b".%2e", b"%2E%2E"])))
    if kind == "path-encode-char":
        return (kind, at, draw(st.integers(0, 20)), draw(st.booleans()))
    if kind == "path-encoded-slash":
        return (kind, at, draw(st.sampled_from([b"%2F", b"%2f", b"%252F"])))
    if kind == "path-nul":
        return (kind, at, draw(st.sampled_from([b"%00", b"\x00"])), draw(st.sampled_from([b"", b"junk", b"x"])))
    if kind == "path-control":
        return (kind, at, draw(st.sampled_from([b"%0a", b"%0d%0a", b"%09", b"%1b", b"%7f", b"\x01", b"\t", b"\x7f"])),
                draw(st.sampled_from([b"", b"x"])))
    if kind == "path-overlong":
        return (kind, at, draw(st.sampled_from([200, 1000, 5000, 20000, 70000])))
    if kind == "path-unicode":
        return (kind, at, draw(st.sampled_from(["é", "名前", "\u202e", "\ufeff", "😀", "\u0301", "ｖ1"])),
                draw(st.booleans()))
    if kind == "path-bad-utf8":
        return (kind, at, draw(st.sampled_from([b"%ff", b"%c0%af", b"%ed%a0%80", b"\xff", b"\xc0\xaf"])))
    if kind == "path-prefix":
        return (kind, at, draw(st.sampled_from([b"/", b"%2F", b"%2f", b"/.", b"/%2e", b"/..", b"/x/..", b"%5c",
                                                b"\\", b"/%00", b"%252F", b"//"])))
    if kind == "path-backslash":
        return (kind, at, draw(st.sampled_from([b"\\", b"%5c"])))
    if kind == "path-fragment":
        return (kind, at, draw(st.sampled_from([b"x", b"/../v1", b""])))
    if kind == "query-raw":
        return (kind, draw(st.sampled_from(QUERY_RAW)))
    if kind == "version":
        return (kind, draw(st.sampled_from([b"HTTP/1.0", b"HTTP/2.0", b"HTTP/1.2", b"http/1.1", b"HTTP/1.10",
                                             b"HTTP/0.9", b"HTTP/1.1 ", b"", b"HTTP/11"])))
    if kind == "framing":
        f = draw(st.sampled_from(["cl-duplicate-same", "cl-duplicate-different", "cl-list", "cl-invalid", "cl-te",
                                  "te-unknown", "te-unknown", "chunked", "chunked"]))
        if f == "cl-duplicate-different":
            return (kind, f, draw(st.booleans()))
        if f == "cl-invalid":
            return (kind, f, draw(st.sampled_from([b"+N", b"-1", b"0xN", b"N N", b"abc", b"", b"N.0", b"1e1"])))
        if f == "cl-te":
            return (kind, f, draw(st.booleans()), draw(st.sampled_from([b"chunked", b"Chunked", b" chunked", b"chunked "])))
        if f == "te-unknown":
            return (kind, f, draw(st.sampled_from([b"gzip", b"chunked, gzip", b"gzip, chunked", b"identity",
                                                   b"xchunked", b"chunked, chunked", b"deflate", b"\x00chunked"])),
                    draw(st.booleans()))
        if f == "chunked":
            return (kind, f, draw(st.sampled_from(VALID_CHUNK_STYLES + INVALID_CHUNK_STYLES)))
        return (kind, f)
    if kind == "auth":
        name, lines = draw(st.sampled_from([
            ("missing", []), ("wrong", [b"Authorization: Bearer nope"]), ("lowercase-scheme", [b"Authorization: bearer TOKEN"]),
            ("double-space", [b"Authorization: Bearer  TOKEN"]), ("trailing-nul", [b"Authorization: Bearer TOKEN\x00"]),
            ("trailing-%00", [b"Authorization: Bearer TOKEN%00"]), ("nul-truncated", [b"Authorization: Bearer TOK\x00EN"]),
            ("prefix", [b"Authorization: Bearer TOKE"]), ("longer", [b"Authorization: Bearer TOKENx"]),
            ("basic", [b"Authorization: Basic dXNlcjpwYXNz"]), ("bare-scheme", [b"Authorization: Bearer"]),
            ("empty", [b"Authorization:"]), ("trailing-tab", [b"Authorization: Bearer TOKEN\t"]),
            ("wrong-then-right", [b"Authorization: Bearer nope", b"Authorization: Bearer TOKEN"]),
            ("right-then-wrong", [b"Authorization: Bearer TOKEN", b"Authorization: Bearer nope"]),
            ("space-before-colon", [b"Authorization : Bearer TOKEN"]), ("upper-name", [b"AUTHORIZATION: Bearer TOKEN"]),
            ("obs-fold", [b"Authorization: Bearer", b" TOKEN"]), ("nul-only", [b"Authorization: \x00"]),
            ("token-only", [b"Authorization: TOKEN"]), ("x-header", [b"X-Authorization: Bearer TOKEN"]),
        ]))
        return (kind, name, lines)
    if kind == "host":
        name, lines = draw(st.sampled_from([
            ("missing", []), ("empty", [b"Host:"]), ("duplicate", [HOST, b"Host: evil.example"]),
            ("evil", [b"Host: evil.example"]), ("port", [b"Host: 127.0.0.1:1"]), ("ipv6", [b"Host: [::1]"]),
            ("long", [b"Host: " + b"h" * 5000]), ("control", [b"Host: 127.0.0.1\x01"]), ("at", [b"Host: a@b"]),
            ("origin-evil", [HOST, b"Origin: http://evil.example"]), ("origin-null", [HOST, b"Origin: null"]),
            ("origin-same", [HOST, b"Origin: http://127.0.0.1"]), ("forwarded", [HOST, b"X-Forwarded-Host: evil"]),
            ("userinfo", [b"Host: 127.0.0.1:80@evil.example"]), ("padded", [b"Host:  127.0.0.1 "]),
            ("padded-tab", [b"Host:\t127.0.0.1\t"]), ("space-inside", [b"Host: 127.0.0.1 evil.example"]),
            ("duplicate-same", [HOST, HOST]), ("space-before-colon", [b"Host : 127.0.0.1"]),
            ("origin-duplicate", [HOST, b"Origin: http://127.0.0.1", b"Origin: http://evil.example"]),
        ]))
        return (kind, name, lines)
    if kind == "header":
        name, lines = draw(st.sampled_from([
            ("no-colon", [b"X-Fuzz"]), ("space-in-name", [b"X Fuzz: 1"]), ("obs-fold", [b"X-Fuzz: a", b"\tb"]),
            ("nul-value", [b"X-Fuzz: a\x00b"]), ("control-name", [b"X-F\x01zz: 1"]), ("empty-name", [b": x"]),
            ("expect-continue", [b"Expect: 100-continue"]), ("expect-unknown", [b"Expect: fuzz"]),
            ("connection-close", [b"Connection: close"]), ("connection-upgrade", [b"Connection: Upgrade", b"Upgrade: h2c"]),
            ("content-type-odd", [b"Content-Type: text/plain; charset=utf-16"]), ("if-match", [b"If-Match: \"x\""]),
            ("last-event-id", [b"Last-Event-ID: -1"]), ("utf8-value", ["X-Fuzz: é😀".encode()]),
            ("latin1-value", [b"X-Fuzz: \xe9"]), ("keep-alive-10", [b"Connection: keep-alive"]),
            ("space-before-colon", [b"X-Fuzz : 1"]), ("tab-before-colon", [b"X-Fuzz\t: 1"]),
            ("te-space-before-colon", [b"Transfer-Encoding : chunked"]),
            ("if-match-duplicate", [b"If-Match: \"1\"", b"If-Match: \"2\""]),
        ]))
        return (kind, name, lines)
    if kind == "huge-header":
        return (kind, draw(st.sampled_from([4000, 16000, 40000, 100000])))
    if kind == "many-headers":
        return (kind, draw(st.sampled_from([100, 500, 3000])))
    if kind == "many-cookies":
        return (kind, draw(st.sampled_from([10, 200, 800, 3000])))
    if kind == "many-query":
        return (kind, draw(st.sampled_from([50, 100, 116, 200, 600, 1500, 3000])))
    if kind == "line-endings":
        return (kind,)
    if kind == "json-deep":
        return (kind, draw(st.sampled_from([64, 256, 1000, 5000, 10000, 30000])), draw(st.sampled_from(["[", "{"])),
                draw(st.integers(0, 4)))
    if kind == "json-number":
        return (kind, draw(st.sampled_from(["1e999", "-1e999", "1e-999", "123456789012345678901234567890", "-0",
                                            "9223372036854775808", "-9223372036854775809", "0.0000001", "1E+2",
                                            "4.9e-324", "1.7976931348623157e308", "NaN", "Infinity", "01", "1."])),
                draw(st.integers(0, 6)))
    if kind == "json-wrong-type":
        return (kind, draw(st.sampled_from([None, True, 1, -1, 1.5, "x", "", [], {}, [1], {"a": 1}])),
                draw(st.integers(0, 6)))
    if kind == "json-unknown-member":
        return (kind, draw(st.sampled_from(["fuzz", "", "\u0000", "__proto__", "a" * 300])), 1)
    if kind == "json-duplicate-key":
        return (kind, draw(st.integers(0, 6)), draw(st.sampled_from([None, 1, "x", {"a": 1}])))
    if kind == "json-deep-pointer":
        return (kind, draw(st.sampled_from([100, 1000, 10000, 30000])))
    if kind == "json-long-string":
        return (kind, draw(st.sampled_from([300, 5000, 60000])), draw(st.integers(0, 6)))
    if kind == "json-text":
        return (kind, draw(st.sampled_from([
            "{", "}", "[1,]", '{"a":1,}', "\ufeff{}", "/* */{}", "nul", "\x00", '"\\ud800"', '{"id":"\\u0000"}',
            '{"id":"a\\u0000b"}', "{} {}", "[" * 40000, '"' + "\\" * 3 + '"', "1" * 5000, "{\"a\":tru}"])))
    return (kind, at)


def param_value(draw, name, live):
    if name == "name":
        return draw(st.sampled_from([live, live, live, live, live, "nope", "a" * 128, "..", ".", "-x"]) | NAMES)
    return draw(st.sampled_from(LIVE_IDS) | NAMES)


@st.composite
def requests(draw, grammar):
    method, template, schema, params = draw(st.sampled_from(grammar.ops))
    kind = template.split("/")[2] if template.startswith("/v1/") else ""
    live = LIVE_NAMES.get(kind, "printer")
    segments = []
    for seg in template.strip("/").split("/"):
        if seg.startswith("{"):
            segments.append(param_value(draw, seg[1:-1], live))
        elif seg:
            segments.append(seg)
    query = []
    for p in params:
        if draw(st.integers(0, 2)) == 0:
            values = WAITS if p["name"] in ("wait", "after") else ["0", "1", "2", "-1", "x", "true", "", "1000000000"]
            query.append((p["name"], draw(st.sampled_from(values))))
    body = None
    if schema is not None and draw(st.integers(0, 5)) > 0:
        body = draw(grammar.body(schema))
    mutations = draw(st.lists(mutation(), max_size=4))
    auth = grammar.token_run and draw(st.integers(0, 2)) > 0
    return Request(method, template, segments, query, body, mutations, auth)


def corpus():
    """Known attacks, run before the generated requests in every run."""
    def r(method, path, body=None, mutations=(), auth=False, query=()):
        segs = [s for s in path.strip("/").split("/") if s]
        return Request(method, path, segs, list(query), body, list(mutations), auth)
    deep_filter = r("PUT", "/v1/pipelines/gifts/filters/fuzz-deep", {"action": "set", "field": "/a" * 20000, "value": 1},
                    auth=True)
    push = r("POST", "/v1/pipelines/gifts/items", {"payload": {}}, auth=True)
    take = r("POST", "/v1/pipelines/gifts/take", {}, auth=True)
    return [
        [r("GET", "/v1/queues", mutations=[("path-empty-segment", 0)])],
        [r("GET", "/v1/queues", mutations=[("path-encoded-slash", 0, b"%2F")])],
        [r("GET", "/v1/queues", mutations=[("path-prefix", 0, b"%2F")])],
        [r("GET", "/v1/queues", mutations=[("path-prefix", 0, b"/.")])],
        [r("GET", "/v1/queues", mutations=[("path-dot", 1, b".")])],
        [r("GET", "/v1/queues", mutations=[("path-encode-char", 0, 0, True)])],
        [r("GET", "/v1/queues", mutations=[("path-dotdot", 0, b"..")])],
        [r("GET", "/v1/queues", mutations=[("path-absolute", 0)])],
        [r("PATCH", "/v1/windows/alerts", {}, mutations=[("path-no-leading-slash", 0)])],
        [r("GET", "/v1/queues", mutations=[("path-prefix", 0, b"/%00")])],
        [r("GET", "/v1/queues", mutations=[("auth", "trailing-nul", [b"Authorization: Bearer TOKEN\x00"])])],
        [r("PUT", "/v1/queues/fuzz", {"capacity": 1}, auth=True, mutations=[("path-nul", 2, b"%00", b"junk")])],
        [r("GET", "/v1/queues/printer", auth=True, mutations=[("query-raw", b"limit=1%00x")])],
        [r("POST", "/v1/queues/printer/visitors", {"id": "cl-dup"}, auth=True,
           mutations=[("framing", "cl-duplicate-different", True)])],
        [r("POST", "/v1/queues/printer/visitors", {"id": "cl-te"}, auth=True,
           mutations=[("framing", "cl-te", True, b"chunked")])],
        [r("POST", "/v1/queues/printer/visitors", {"id": "te-gzip"}, auth=True,
           mutations=[("framing", "te-unknown", b"gzip", False)])],
        [r("POST", "/v1/queues/printer/visitors", {"id": "chunk-neg"}, auth=True,
           mutations=[("framing", "chunked", "negative")])],
        [r("PUT", "/v1/queues/fuzz-empty-name", {"capacity": 2}, auth=True,
           mutations=[("header", "empty-name", [b": x"])])],
        [r("POST", "/v1/pipelines/gifts/items", None, auth=True, mutations=[("json-deep", 30000, "[", 0)])],
        [deep_filter, push, take],
        # Issue 25: many query parameters, and the strict HTTP edge.
        [r("GET", "/healthz", mutations=[("many-query", 116)])],
        [r("GET", "/v1/queues", auth=True, mutations=[("many-query", 1500)])],
        [r("GET", "/v1/queues", auth=True, mutations=[("path-nul", 1, b"\x00", b"x"), ("many-query", 600)])],
        [r("GET", "/v1/queues", auth=True, mutations=[("many-cookies", 800)])],
        [r("GET", "/v1/queues", auth=True, mutations=[("host", "duplicate", [HOST, b"Host: evil.example"])])],
        [r("GET", "/v1/queues", auth=True, mutations=[("host", "missing", [])])],
        [r("GET", "/v1/queues", auth=True, mutations=[("host", "userinfo", [b"Host: 127.0.0.1:80@evil.example"])])],
        [r("GET", "/v1/queues", auth=True, mutations=[("host", "padded", [b"Host:  127.0.0.1 "])])],
        [r("GET", "/v1/queues", auth=True, mutations=[
            ("host", "origin-duplicate", [HOST, b"Origin: http://127.0.0.1", b"Origin: http://evil.example"])])],
        [r("GET", "/v1/queues", mutations=[
            ("auth", "right-then-wrong", [b"Authorization: Bearer TOKEN", b"Authorization: Bearer nope"])])],
        [r("POST", "/v1/queues/printer/visitors", {"id": "te-space"}, auth=True,
           mutations=[("header", "te-space-before-colon", [b"Transfer-Encoding : chunked"])])],
        [r("POST", "/v1/queues/printer/visitors", {"id": "chunk-lf"}, auth=True,
           mutations=[("framing", "chunked", "bare-lf")])],
        [r("POST", "/v1/queues/printer/visitors", {"id": "chunk-huge"}, auth=True,
           mutations=[("framing", "chunked", "huge")])],
        [r("POST", "/v1/queues/printer/visitors", {"id": "expect"},
           mutations=[("header", "expect-continue", [b"Expect: 100-continue"])])],
    ]


# --- the run ------------------------------------------------------------------------

class Run:
    def __init__(self, args, name, token):
        self.args, self.name, self.token = args, name, token
        self.workdir = tempfile.mkdtemp(prefix=f"fuzz-{name}-")
        self.server = Server(args.usher, self.workdir, token)
        self.history = []  # requests sent to the current server process
        self.statuses = collections.Counter()
        self.sent = 0
        self.failures = {}  # signature -> (kind, detail, repro requests, rendered tags)
        self.hang_features = set()
        self.reduced = set()  # (kind, tags) of failures already reduced
        self.reduce_until = None
        self.seeds = self.seed_requests()

    def seed_requests(self):
        def r(method, path, body):
            return Request(method, path, [s for s in path.strip("/").split("/")], [], body, [], True)
        return [
            r("PUT", "/v1/queues/printer", CONFIG["queues"]["printer"]),
            r("PUT", "/v1/windows/alerts", CONFIG["windows"]["alerts"]),
            r("PUT", "/v1/pools/licences", CONFIG["pools"]["licences"]),
            r("PUT", "/v1/pipelines/gifts", CONFIG["pipelines"]["gifts"]),
            r("PUT", "/v1/machines/player", CONFIG["machines"]["player"]),
            r("POST", "/v1/queues/printer/visitors", {"id": "job-1"}),
            r("POST", "/v1/windows/alerts/show", {"id": "alert-1", "title": "t"}),
            r("POST", "/v1/pools/licences/fetch", {"id": "lease-1", "holder": "fuzz"}),
            r("PUT", "/v1/pools/licences/elements/seat-3", {"data": {"seat": 3}}),
            r("POST", "/v1/pipelines/gifts/items", {"id": "toy-1", "payload": {"gift": "kite"}}),
            r("POST", "/v1/pipelines/gifts/take", {}),
        ]

    @staticmethod
    def hang_key(rendered):
        """What a hang is filed under: the framing, which is what makes a server wait."""
        return tuple(sorted(t for t in rendered.tags if t.startswith(("framing", "line-endings"))))

    def timeout_for(self, rendered):
        return 0.3 if self.hang_key(rendered) in self.hang_features else self.args.hang_seconds

    def send(self, req, timeout=None):
        """Sends one request; returns (rendered, exchange, failure kind and detail)."""
        if not self.server.alive():
            self.server.start()
            self.history = []
        rendered = render(req, self.token)
        timeout = timeout or self.timeout_for(rendered)
        ex = exchange(self.server.port, rendered.data, rendered.head, timeout)
        self.history.append(req)
        self.sent += 1

        if ex.responses:
            self.statuses[str(ex.responses[0][0])] += 1
        else:
            self.statuses["stream" if ex.stream else "timeout" if ex.timed_out else "closed"] += 1
        if not ex.responses and not ex.stream:
            # A crash closes the socket a moment before the process can be reaped.
            for _ in range(6):
                if not self.server.alive():
                    break
                time.sleep(0.05)
        verdict = judge(rendered, ex, self.server.alive(), self.token is not None, timeout)
        if verdict and verdict[0] == "hang":
            self.hang_features.add(self.hang_key(rendered))
        return rendered, ex, verdict

    def seed(self):
        for req in self.seeds:
            _, _, verdict = self.send(req)
            if verdict and verdict[0] == "crash":
                return verdict
        return None

    def fresh(self):
        self.server.start()
        self.history = []
        self.seed()

    def record(self, kind, detail, steps, tags, log=None):
        signature = (kind, tuple(sorted(set(tags))))
        if kind in ("crash", "5xx"):
            signature += (steps[-1].template, detail)
        if signature in self.failures:
            return
        self.failures[signature] = (kind, detail, [render(s, self.token).data for s in steps], sorted(set(tags)), log)
        print(f"fuzz-check[{self.name}]: FAIL {kind}: {detail}; {' '.join(sorted(set(tags))) or '(no mutation)'}",
              flush=True)

    # Reduction: drop what the failure does not need.

    def still_fails(self, req, kind):
        _, _, verdict = self.send(req, timeout=1.0 if kind == "hang" else None)
        return verdict is not None and verdict[0] == kind

    def candidates(self, req):
        for i in range(len(req.mutations)):
            yield req.replace(mutations=req.mutations[:i] + req.mutations[i + 1:])
        if req.query:
            yield req.replace(query=[])
        if req.body is not None:
            yield req.replace(body=None)
            if isinstance(req.body, dict) and len(req.body) > 1:
                for key in list(req.body):
                    yield req.replace(body={k: v for k, v in req.body.items() if k != key})
        if req.auth and self.token:
            yield req.replace(auth=False)

    def reduce(self, req, kind, check):
        changed = True
        while changed and time.monotonic() < self.reduce_until:
            changed = False
            for candidate in self.candidates(req):
                if time.monotonic() >= self.reduce_until:
                    break
                if check(candidate):
                    req, changed = candidate, True
                    break
        return req

    def handle(self, req, rendered, verdict):
        kind, detail = verdict
        if kind == "crash":
            self.handle_crash(req)
            return
        if time.monotonic() >= self.reduce_until:
            self.record(kind, detail, [req], rendered.tags)
            return
        raw = (kind, self.hang_key(rendered) if kind == "hang" else tuple(sorted(set(rendered.tags))),
               req.template if kind == "5xx" else None)
        if raw in self.reduced:
            return
        self.reduced.add(raw)
        small = self.reduce(req, kind, lambda c: self.still_fails(c, kind))
        if kind == "hang":
            # Reduced with a shorter timeout: each step still got no answer.
            self.record(kind, detail, [small], render(small, self.token).tags)
            return
        r2, _, v2 = self.send(small)
        if v2 and v2[0] == kind:
            self.record(kind, v2[1], [small], r2.tags)
        else:
            self.record(kind, detail, [req], rendered.tags)

    def crashes(self, steps):
        """Sends steps to a fresh server, then the seed requests; the steps
        (plus the seed requests up to the crash) when it crashed, else None."""
        self.fresh()
        if not self.server.alive():
            return None
        for i, req in enumerate(steps):
            self.send(req)
            if not self.server.alive():
                return steps[:i + 1]
        for req in self.seeds:
            self.send(req)
            if not self.server.alive():
                return steps + [req]
        return None

    def handle_crash(self, req):
        history = list(self.history)
        death = self.server.death()
        tail = self.server.tail(40)
        found = None
        for k in (1, 2, 4, 8, 16, len(history)):
            if time.monotonic() >= self.reduce_until or k > len(history):
                break
            found = self.crashes(history[-k:])
            if found:
                break
        if found:
            i = 0
            while i < len(found) - 1 and time.monotonic() < self.reduce_until:
                shorter = self.crashes(found[:i] + found[i + 1:])
                if shorter and len(shorter) < len(found):
                    found = shorter
                else:
                    i += 1
            last = found[-1]
            if last in history:
                small = self.reduce(last, "crash", lambda c: len(self.crashes(found[:-1] + [c]) or []) == len(found))
                found = found[:-1] + [small]
        steps = found or history[-3:]
        tags = [t for s in steps for t in render(s, self.token).tags]
        detail = death + ("" if found else " (not reproduced from the last requests alone)")
        self.record("crash", detail, steps, tags, log=tail)
        self.fresh()

    def run(self):
        args = self.args
        started = time.monotonic()
        stop_at = started + args.seconds
        self.reduce_until = stop_at + args.reduce_seconds
        self.server.start()
        print(f"fuzz-check[{self.name}]: usher on 127.0.0.1:{self.server.port}"
              f"{' with USHER_TOKEN set' if self.token else ' without a token'}", flush=True)
        self.seed()
        doc = json.loads(exchange(self.server.port, b"GET /openapi.json HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n",
                                  False, 10).responses[0][2])
        grammar = Grammar(doc, self.token is not None)

        for steps in corpus():
            for req in steps:
                rendered, _, verdict = self.send(req)
                if verdict:
                    self.handle(req, rendered, verdict)
            self.seed()

        count = [0]

        @settings(max_examples=args.examples, deadline=None, database=None, derandomize=False,
                  phases=[Phase.generate], suppress_health_check=list(HealthCheck), print_blob=False)
        @hypothesis_seed(args.seed)
        @given(requests(grammar))
        def fuzz(req):
            if time.monotonic() >= stop_at:
                return
            count[0] += 1
            if count[0] % 100 == 0:
                self.seed()
            rendered, _, verdict = self.send(req)
            if verdict:
                self.handle(req, rendered, verdict)

        fuzz()
        self.server.stop()
        shutil.rmtree(self.workdir, ignore_errors=True)
        took = time.monotonic() - started
        print(f"fuzz-check[{self.name}]: {self.sent} requests ({count[0]} generated, {len(corpus())} corpus) "
              f"in {took:.0f} s, {self.server.starts} server start(s)")
        print(f"fuzz-check[{self.name}]: statuses " + " ".join(f"{k}:{v}" for k, v in sorted(self.statuses.items())))
        return self.failures


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--usher", required=True)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--examples", type=int, default=3000, help="generated requests per run at most")
    parser.add_argument("--seconds", type=float, default=55, help="wall-clock cap on generation per run")
    parser.add_argument("--reduce-seconds", type=float, default=15, help="extra time per run for reducing failures")
    parser.add_argument("--hang-seconds", type=float, default=5)
    parser.add_argument("--token", default="fuzz-token-1234")
    parser.add_argument("--out", default=None, help="directory for the raw repro files")
    parser.add_argument("--runs", default="open,token")
    args = parser.parse_args()
    print(f"fuzz-check: seed {args.seed}, at most {args.examples} generated requests and {args.seconds:g} s per run "
          f"(+{args.reduce_seconds:g} s reducing), hang after {args.hang_seconds:g} s", flush=True)
    failures = []
    for name in args.runs.split(","):
        run = Run(args, name, args.token if name == "token" else None)
        failures += [(name, *f) for f in run.run().values()]
    print()
    if not failures:
        print("fuzz-check: no failures")
        return 0
    config = "a config like the script's CONFIG"
    if args.out:
        os.makedirs(args.out, exist_ok=True)
        config = os.path.join(args.out, "usher.json")
        with open(config, "w") as f:
            json.dump(CONFIG, f, indent=2)
    print(f"fuzz-check: {len(failures)} distinct failure(s). To replay one, start `usher --config {config}` "
          f"(with USHER_TOKEN={args.token} for the token run) and set PORT to the port it logs.")
    for n, (name, kind, detail, steps, tags, log) in enumerate(failures, 1):
        print(f"\n{n}. [{name}] {kind}: {detail}")
        print(f"   mutations: {' '.join(tags) or '(none)'}")
        for k, data in enumerate(steps):
            line = repro_line(data)
            print(f"   {'then ' if k else ''}{line if len(line) < 600 else line[:600] + ' …'}")
            if args.out:
                path = os.path.join(args.out, f"{n:02d}-{name}-{kind}-{k}.bin")
                with open(path, "wb") as f:
                    f.write(data)
                print(f"   {' ' * 5 if k else ''}(exact bytes: nc 127.0.0.1 $PORT < {path})")
        if log and args.out:
            path = os.path.join(args.out, f"{n:02d}-{name}-{kind}-usher.log")
            with open(path, "w") as f:
                f.write(log)
            print(f"   (the server's last log lines: {path})")
    return 1


if __name__ == "__main__":
    sys.exit(main())
