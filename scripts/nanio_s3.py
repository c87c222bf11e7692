#!/usr/bin/env python3
"""Serves nanio, a second S3 implementation that checks every request's SigV4 signature, on 127.0.0.1 and a free
port, for the s3 provider's tests.

    nanio_s3.py ACCESS_KEY SECRET_KEY [BUCKET...]

Makes the buckets in a temporary data directory, prints the port on one line once nanio answers, and serves until
its standard input closes (the test that started it exited), so it never outlives its parent.
"""
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time


def free_port():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def main():
    # A test process may start this with signals blocked (its thread's mask is inherited): nanio, started below,
    # would never see the SIGTERM that stops it.
    signal.pthread_sigmask(signal.SIG_SETMASK, [])
    access_key, secret_key, buckets = sys.argv[1], sys.argv[2], sys.argv[3:]
    with tempfile.TemporaryDirectory(prefix="nanio-") as data:
        for bucket in buckets:
            os.makedirs(os.path.join(data, bucket))
        port = free_port()
        environment = dict(os.environ, NANIO_ACCESS_KEY=access_key, NANIO_SECRET_KEY=secret_key)
        nanio = os.path.join(os.path.dirname(sys.executable), "nanio")
        server = subprocess.Popen(
            [nanio, "serve", "--data-dir", data, "--host", "127.0.0.1", "--port", str(port), "--no-access-log",
             "--log-level", "error"], env=environment, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL)
        try:
            for _ in range(300):
                try:
                    socket.create_connection(("127.0.0.1", port), timeout=1).close()
                    break
                except OSError:
                    if server.poll() is not None:
                        sys.exit(f"nanio exited with status {server.returncode}")
                    time.sleep(0.1)
            print(port, flush=True)
            sys.stdin.read()
        finally:
            server.terminate()
            try:
                server.wait(timeout=10)
            except subprocess.TimeoutExpired:
                server.kill()
                server.wait()


if __name__ == "__main__":
    main()
