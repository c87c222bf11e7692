#!/usr/bin/env python3
"""croniter's next five times for each case of a JSON file, as an independent check of CronExpression.

Reads [{"expression": "30 2 * * *", "start": 1796378000, ...}, ...] and prints [[t1, ..., t5], ...] (Unix seconds,
UTC), one list per case, in order.
"""
import json
import sys
from datetime import datetime, timezone

from croniter import croniter


def main():
    with open(sys.argv[1], encoding="utf-8") as handle:
        cases = json.load(handle)
    answers = []
    for case in cases:
        start = datetime.fromtimestamp(case["start"], tz=timezone.utc)
        times = croniter(case["expression"], start)
        answers.append([int(times.get_next(datetime).timestamp()) for _ in range(5)])
    json.dump(answers, sys.stdout)


if __name__ == "__main__":
    main()
