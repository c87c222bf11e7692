#!/usr/bin/env python3
"""Validates YAML files against a JSON Schema, one line per file: "PASS path" or "FAIL path: reason".

    check_schema.py SCHEMA FILE...

Uses jsonschema and ruamel.yaml, which check-jsonschema brings into the tests' virtual environment. A file that is
not even valid YAML counts as FAIL.
"""
import json
import sys

import jsonschema
from ruamel.yaml import YAML

schema = json.load(open(sys.argv[1]))
validator = jsonschema.Draft202012Validator(schema)
yaml = YAML(typ="safe", pure=True)
for path in sys.argv[2:]:
    try:
        with open(path) as handle:
            document = yaml.load(handle)
        errors = sorted(validator.iter_errors(document), key=lambda error: list(error.path))
        if errors:
            print("FAIL %s: %s" % (path, errors[0].message.replace("\n", " ")[:200]))
        else:
            print("PASS %s" % path)
    except Exception as error:  # a YAML error is a failure of the file, not of this script
        print("FAIL %s: %s" % (path, str(error).replace("\n", " ")[:200]))
