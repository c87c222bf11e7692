#!/usr/bin/env python3
"""Serves moto's S3 on 127.0.0.1, on a free port, for the s3 provider's tests and `make bench`.

    moto_s3.py [BUCKET...]

Creates the buckets, prints the port on one line, and serves until its standard input closes (the test or bench
that started it exited or closed the pipe), so it never outlives its parent.
"""
import logging
import sys

import boto3
from moto.server import ThreadedMotoServer


def main():
    logging.getLogger("werkzeug").setLevel(logging.ERROR)
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    _, port = server.get_host_and_port()
    client = boto3.client(
        "s3", endpoint_url=f"http://127.0.0.1:{port}", region_name="us-east-1", aws_access_key_id="moto",
        aws_secret_access_key="moto")
    for bucket in sys.argv[1:]:
        client.create_bucket(Bucket=bucket)
    print(port, flush=True)
    sys.stdin.read()
    server.stop()


if __name__ == "__main__":
    main()
