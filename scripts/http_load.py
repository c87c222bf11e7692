#!/usr/bin/env python3
"""Sends GET requests at a steady rate for a while and says how it went, for the `serve` load test.

    http_load.py BASE_URL --rate 1000 --seconds 10 --path /metrics --path / [--connections 8] [--header NAME:VALUE]

Requests go round-robin over the paths, spread evenly over `--connections` kept-alive HTTP/1.1 connections, each
paced to its share of the rate (a late request is sent at once, never skipped). Prints one JSON object: requests
sent, how many per second were achieved, statuses by count, connection errors, and latency percentiles in ms.
Exits 0 however the server answered; the test judges the figures.
"""

import argparse
import http.client
import json
import threading
import time
import urllib.parse


def worker(base, paths, headers, interval, deadline, offset, results, lock):
    parsed = urllib.parse.urlsplit(base)
    connection = None
    statuses, latencies, errors = {}, [], 0
    next_at = time.monotonic() + offset
    index = 0
    while True:
        now = time.monotonic()
        if now >= deadline:
            break
        if next_at > now:
            time.sleep(next_at - now)
        next_at += interval
        path = paths[index % len(paths)]
        index += 1
        started = time.monotonic()
        try:
            if connection is None:
                connection = http.client.HTTPConnection(parsed.hostname, parsed.port, timeout=10)
            connection.request("GET", path, headers=headers)
            response = connection.getresponse()
            response.read()
            statuses[response.status] = statuses.get(response.status, 0) + 1
            if response.getheader("Connection", "").lower() == "close":
                connection.close()
                connection = None
        except (OSError, http.client.HTTPException):
            errors += 1
            if connection is not None:
                connection.close()
            connection = None
        latencies.append((time.monotonic() - started) * 1000)
    if connection is not None:
        connection.close()
    with lock:
        for status, count in statuses.items():
            results["statuses"][status] = results["statuses"].get(status, 0) + count
        results["latencies"].extend(latencies)
        results["errors"] += errors


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("base")
    parser.add_argument("--rate", type=float, required=True)
    parser.add_argument("--seconds", type=float, required=True)
    parser.add_argument("--path", action="append", required=True)
    parser.add_argument("--connections", type=int, default=8)
    parser.add_argument("--header", action="append", default=[])
    arguments = parser.parse_args()
    headers = dict(item.split(":", 1) for item in arguments.header)
    interval = arguments.connections / arguments.rate
    results = {"statuses": {}, "latencies": [], "errors": 0}
    lock = threading.Lock()
    start = time.monotonic()
    deadline = start + arguments.seconds
    threads = [
        threading.Thread(
            target=worker,
            args=(arguments.base, arguments.path, headers, interval, deadline, interval * n / arguments.connections,
                  results, lock))
        for n in range(arguments.connections)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    elapsed = time.monotonic() - start
    latencies = sorted(results["latencies"])

    def percentile(p):
        return round(latencies[min(len(latencies) - 1, int(len(latencies) * p))], 2) if latencies else None

    sent = len(latencies)
    print(json.dumps({
        "sent": sent,
        "perSecond": round(sent / elapsed, 1),
        "statuses": {str(k): v for k, v in sorted(results["statuses"].items())},
        "errors": results["errors"],
        "p50Ms": percentile(0.5),
        "p99Ms": percentile(0.99),
        "maxMs": round(latencies[-1], 2) if latencies else None,
    }, sort_keys=True))


if __name__ == "__main__":
    main()
