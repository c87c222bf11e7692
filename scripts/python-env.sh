#!/usr/bin/env bash
# Creates .build/pyenv, a virtual environment with the Python packages the tests use as independent peers
# (PyNaCl for the envelope interop test, check-jsonschema for the pipeline schema, prometheus-client's parser for
# the metrics textfile, moto's S3 server and botocore's SigV4 signer for the s3 provider, google-api-python-client as
# Google's own Drive client for the googleDrive emulator, croniter for the schedule's cron expressions, nanio as a
# second S3 server that checks every signature, zstandard for the independent backup restore). Does nothing when it is
# already complete.
set -euo pipefail
cd "$(dirname "$0")/.."
environment=.build/pyenv
if "$environment/bin/python3" -c "import nacl, jsonschema, ruamel.yaml, prometheus_client, moto, botocore, flask, googleapiclient, croniter, nanio, zstandard" 2>/dev/null; then
    exit 0
fi
echo "python-env: creating $environment with PyNaCl, check-jsonschema, prometheus-client, moto[server], google-api-python-client, croniter, nanio and zstandard" >&2
python3 -m venv "$environment"
"$environment/bin/pip" install --quiet --disable-pip-version-check "pynacl==1.5.0" "check-jsonschema==0.29.4" \
    "prometheus-client==0.21.1" "moto[server]==5.2.5" "google-api-python-client==2.202.0" \
    "croniter==6.0.0" "nanio==0.1.7" "zstandard==0.23.0"
