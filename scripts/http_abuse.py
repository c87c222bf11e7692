#!/usr/bin/env python3
"""Treats an HTTP server on this machine as an attacker would, for the tests of `cloudsync serve` and the emulator.

    http_abuse.py cases URL [--health PATH]
        Sends each hostile request below on a connection of its own, then asks PATH (default /healthz) on a fresh
        connection. Prints {"cases": [{"name", "answer", "closed", "health"}]}: the status the server answered
        (0 for none), whether it closed the connection after answering, and the status PATH got afterwards.

    http_abuse.py bodies URL --count 20 --bytes 1073741824 [--chunked] [--path PATH]
        Opens COUNT connections at once; each declares (or, chunked, streams) BYTES of body to PATH and sends until
        the server answers or closes. Prints {"answers": {status: count}, "sentMax": bytes, "sentTotal": bytes}: how
        far any client got before the server stopped reading. A status is "reset" where the connection was reset
        before the client read the answer (a server that closes with unread bytes resets it), 0 where none came.

    http_abuse.py flood URL --idle 3000 --slow 400 --second-source 127.0.0.2 [--hold SECONDS]
        Opens SLOW connections that send a request head a byte a second, then IDLE ones that send nothing, all from
        the URL's own address, and holds them for HOLD seconds (default: until the server has closed every one, or
        60 s). Meanwhile it asks /healthz once a second from SECOND_SOURCE. Prints how many stayed open each second,
        when the last was closed, what the second address got, and how long /healthz took once they were gone.

Only loopback addresses are ever contacted: the URL's host must be one. Exits 0 however the server answered; the
test judges the figures.
"""

import argparse
import ipaddress
import json
import resource
import select
import socket
import sys
import threading
import time
import urllib.parse

CHUNK = b"x" * 65536


def target(url):
    parsed = urllib.parse.urlsplit(url)
    host = parsed.hostname
    if not ipaddress.ip_address(host).is_loopback:
        sys.exit("http_abuse: %s is not a loopback address; this tool sends only to this machine" % host)
    return host, parsed.port


def connect(host, port, source=None, timeout=10):
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    connection = socket.socket(family, socket.SOCK_STREAM)
    connection.settimeout(timeout)
    if source:
        connection.bind((source, 0))
    connection.connect((host, port))
    return connection


def read_answer(connection, limit=10):
    """(status or 0, closed afterwards): reads one answer, then waits briefly to see whether the server closes."""
    data = b""
    deadline = time.monotonic() + limit
    try:
        while b"\r\n\r\n" not in data and time.monotonic() < deadline:
            connection.settimeout(max(0.05, deadline - time.monotonic()))
            piece = connection.recv(65536)
            if not piece:
                break
            data += piece
    except OSError:
        pass
    status = 0
    if data.startswith(b"HTTP/1."):
        try:
            status = int(data.split(b" ", 2)[1])
        except ValueError:
            status = 0
    # Whatever body follows, then either the close or a quiet open connection.
    closed = False
    try:
        connection.settimeout(1.5)
        while True:
            piece = connection.recv(65536)
            if not piece:
                closed = True
                break
    except socket.timeout:
        closed = False
    except OSError:
        closed = True
    return status, closed


def authority(host, port):
    """The Host header a client of host:port sends."""
    return ("[%s]:%d" % (host, port) if ":" in host else "%s:%d" % (host, port)).encode()


def ask(host, port, path, source=None, timeout=10):
    try:
        connection = connect(host, port, source, timeout)
        connection.sendall(
            b"GET %s HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n\r\n" % (path.encode(), authority(host, port)))
        status, _ = read_answer(connection, timeout)
        connection.close()
        return status
    except OSError:
        return 0


CASES = [
    ("issue-chunk-7fffffffffffffff", b"POST /api/pipelines/x/run HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n7fffffffffffffff\r\nabc"),
    ("chunk-7ffffffffffffffe", b"POST /api/pipelines/x/run HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n7ffffffffffffffe\r\nabc"),
    ("chunk-ffffffffffffffffff", b"POST /api/pipelines/x/run HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\nffffffffffffffffff\r\nabc"),
    ("chunk-negative", b"POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n-1\r\nabc"),
    ("chunk-plus", b"POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n+5\r\nabcde\r\n0\r\n\r\n"),
    ("chunk-size-line-10k", b"POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n" + b"0" * 10000 + b"1\r\na\r\n0\r\n\r\n"),
    ("chunk-no-crlf", b"POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabcXY0\r\n\r\n"),
    ("chunks-past-64k", b"POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n" + b"8000\r\n" + b"a" * 0x8000 + b"\r\n" + b"8000\r\n" + b"a" * 0x8000 + b"\r\n" + b"8000\r\n" + b"a" * 0x8000 + b"\r\n0\r\n\r\n"),
    ("content-length-1.5g", b"POST /api/pipelines/x/run HTTP/1.1\r\nHost: x\r\nContent-Length: 1610612736\r\n\r\nabc"),
    ("content-length-overflow", b"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 99999999999999999999999999\r\n\r\n"),
    ("content-length-negative", b"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: -1\r\n\r\n"),
    ("content-length-plus", b"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: +3\r\n\r\nabc"),
    ("content-length-twice-differing", b"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\nContent-Length: 4\r\n\r\nabcd"),
    ("content-length-and-chunked", b"POST /api/pipelines/x/run HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n"),
    ("transfer-encoding-gzip", b"POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: gzip\r\n\r\nabc"),
    ("head-17k", b"GET / HTTP/1.1\r\nHost: x\r\nX-Pad: " + b"a" * 17000 + b"\r\n\r\n"),
    ("head-70k", b"GET / HTTP/1.1\r\nHost: x\r\nX-Pad: " + b"a" * 70000 + b"\r\n\r\n"),
    ("head-1m-no-end", b"GET / HTTP/1.1\r\nHost: x\r\nX-Pad: " + b"a" * 1048576),
    ("many-headers", b"GET / HTTP/1.1\r\nHost: x\r\n" + b"X: y\r\n" * 5000 + b"\r\n"),
    ("target-20k", b"GET /" + b"a" * 20000 + b" HTTP/1.1\r\nHost: x\r\n\r\n"),
    ("not-http", b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03" + b"\x00" * 64),
    ("bad-request-line", b"GET\r\n\r\n"),
    ("http-2-preface", b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"),
    ("http-9", b"GET / HTTP/9.9\r\nHost: x\r\n\r\n"),
    ("nul-in-header", b"GET / HTTP/1.1\r\nHost: x\r\nX-A: a\x00b\r\n\r\n"),
    ("header-without-colon", b"GET / HTTP/1.1\r\nHost: x\r\nno colon here\r\n\r\n"),
    ("bare-lf", b"GET / HTTP/1.1\nHost: x\n\n"),
    ("expect-continue-huge", b"POST / HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\nContent-Length: 1073741824\r\n\r\n"),
    ("pipelined-100", b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n" * 100),
    ("empty", b""),
]


def cases(args):
    host, port = target(args.url)
    results = []
    for name, payload in CASES:
        answer, closed = 0, True
        try:
            connection = connect(host, port)
            try:
                # Addressed as a client of this server would, so only what the case is about can refuse it.
                connection.sendall(payload.replace(b"Host: x\r\n", b"Host: " + authority(host, port) + b"\r\n", 1))
            except OSError:
                pass
            answer, closed = read_answer(connection, 3)
            connection.close()
        except OSError:
            pass
        results.append({"name": name, "answer": answer, "closed": closed, "health": ask(host, port, args.health)})
    print(json.dumps({"cases": results}))


def bodies(args):
    host, port = target(args.url)
    answers, sent = {}, []
    lock = threading.Lock()

    def one():
        total, status = 0, 0
        try:
            connection = connect(host, port, timeout=30)
            if args.chunked:
                head = b"POST %s HTTP/1.1\r\nHost: %s\r\nTransfer-Encoding: chunked\r\n\r\n" % (
                    args.path.encode(), authority(host, port))
            else:
                head = b"POST %s HTTP/1.1\r\nHost: %s\r\nContent-Length: %d\r\n\r\n" % (
                    args.path.encode(), authority(host, port), args.bytes)
            connection.sendall(head)
            connection.setblocking(False)
            piece = (b"10000\r\n" + CHUNK + b"\r\n") if args.chunked else CHUNK
            data = b""
            while total < args.bytes:
                readable, writable, _ = select.select([connection], [connection], [], 10)
                if readable:
                    got = connection.recv(65536)
                    if not got:
                        break
                    data += got
                    if b"\r\n" in data:
                        break
                if writable:
                    try:
                        total += connection.send(piece)
                    except BlockingIOError:
                        pass
                if not readable and not writable:
                    break
            if data.startswith(b"HTTP/1."):
                status = int(data.split(b" ", 2)[1])
            connection.close()
        except (ConnectionResetError, BrokenPipeError):
            # The server answered and closed with body bytes still unread, so its kernel reset the connection, and
            # a reset throws away what the client had not read yet: the answer too, when the client was busy sending.
            status = "reset"
        except OSError:
            pass
        with lock:
            answers[str(status)] = answers.get(str(status), 0) + 1
            sent.append(total)

    threads = [threading.Thread(target=one) for _ in range(args.count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    print(json.dumps({"answers": answers, "sentMax": max(sent), "sentTotal": sum(sent)}))


def flood(args):
    host, port = target(args.url)
    _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, 65536), hard))
    slow, idle, refused = [], [], 0
    # The slow ones first, so they hold whatever the server lets one address hold; then the idle ones.
    for count, into in ((args.slow, slow), (args.idle, idle)):
        for _ in range(count):
            try:
                into.append(connect(host, port, timeout=2))
            except OSError:
                refused += 1
    head = b"GET /healthz HTTP/1.1\r\nHost: " + authority(host, port) + b"\r\nX-Slow: " + b"a" * 100000
    second = {"asked": 0, "ok": 0, "slowestMs": 0}
    started = time.monotonic()
    deadline = started + (args.hold or 60)
    open_counts, byte = [], 0

    def still_open(connection):
        if connection.fileno() < 0:
            return False
        poller = select.poll()
        poller.register(connection, select.POLLIN | select.POLLHUP | select.POLLERR)
        if poller.poll(0):
            try:
                if connection.recv(65536):
                    return True
            except OSError:
                pass
            connection.close()
            return False
        return True

    while time.monotonic() < deadline:
        for connection in slow:
            if connection.fileno() >= 0:
                try:
                    connection.send(head[byte:byte + 1])
                except OSError:
                    connection.close()
        byte += 1
        open_counts.append(sum(1 for c in slow + idle if still_open(c)))
        asked = time.monotonic()
        status = ask(host, port, "/healthz", source=args.second_source, timeout=10)
        second["asked"] += 1
        second["ok"] += status == 200
        second["slowestMs"] = max(second["slowestMs"], int((time.monotonic() - asked) * 1000))
        if not args.hold and open_counts[-1] == 0:
            break
        time.sleep(1)
    held = round(time.monotonic() - started, 1)
    for connection in idle + slow:
        connection.close()
    time.sleep(0.5)
    asked = time.monotonic()
    after = ask(host, port, "/healthz")
    print(json.dumps({
        "opened": len(idle) + len(slow), "refusedAtConnect": refused, "openEachSecond": open_counts,
        "allClosedAfterSeconds": held if open_counts and open_counts[-1] == 0 else None,
        "secondSource": second, "afterStatus": after, "afterMs": int((time.monotonic() - asked) * 1000),
    }))


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    commands = parser.add_subparsers(dest="command", required=True)
    one = commands.add_parser("cases")
    one.add_argument("url")
    one.add_argument("--health", default="/healthz")
    two = commands.add_parser("bodies")
    two.add_argument("url")
    two.add_argument("--count", type=int, default=20)
    two.add_argument("--bytes", type=int, default=1 << 30)
    two.add_argument("--chunked", action="store_true")
    two.add_argument("--path", default="/api/pipelines/x/run")
    three = commands.add_parser("flood")
    three.add_argument("url")
    three.add_argument("--idle", type=int, default=3000)
    three.add_argument("--slow", type=int, default=400)
    three.add_argument("--second-source", default="127.0.0.2")
    three.add_argument("--hold", type=float, default=0)
    args = parser.parse_args()
    {"cases": cases, "bodies": bodies, "flood": flood}[args.command](args)


if __name__ == "__main__":
    main()
