#!/usr/bin/env python3
"""Signs requests with botocore's S3 SigV4 signer, an independent implementation to compare CloudSync's with.

    sigv4_botocore.py < requests.json > signatures.json

Input: a JSON list of {"method", "url", "headers": [[name, value], ...], "body" (base64), "accessKeyId",
"secretAccessKey", "sessionToken" (or null), "region", "time" (epoch seconds)}. Output: a JSON list of
{"authorization", "canonicalRequest", "headers": {lower-case name: value}} in the same order. The URL is used as
given (already encoded); botocore's S3 signer does not normalise it.
"""
import base64
import datetime
import json
import sys
from unittest import mock

import botocore.auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials


def sign(spec):
    credentials = Credentials(spec["accessKeyId"], spec["secretAccessKey"], spec.get("sessionToken"))
    signer = botocore.auth.S3SigV4Auth(credentials, "s3", spec["region"])
    request = AWSRequest(
        method=spec["method"], url=spec["url"], headers=dict(spec["headers"]),
        data=base64.b64decode(spec["body"]))
    moment = datetime.datetime.fromtimestamp(spec["time"], datetime.timezone.utc).replace(tzinfo=None)
    with mock.patch.object(botocore.auth, "get_current_datetime", return_value=moment):
        signer.add_auth(request)
        authorization = request.headers["Authorization"]
        del request.headers["Authorization"]
        canonical = signer.canonical_request(request)
        request.headers["Authorization"] = authorization
    return {
        "authorization": authorization,
        "canonicalRequest": canonical,
        "headers": {name.lower(): value for name, value in request.headers.items()},
    }


def main():
    specs = json.load(sys.stdin)
    json.dump([sign(spec) for spec in specs], sys.stdout)


if __name__ == "__main__":
    main()
