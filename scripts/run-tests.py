#!/usr/bin/env python3
"""Runs the Swift Testing suite under a watchdog, so no test can hang the run, and prints the slowest tests.

`make test`, `make test-repeat` and the stress suites run through this. It starts the built test binary with
Swift Testing's event stream (JSON lines: each test's start and end) and watches it:

- a test still running after --limit seconds ends the run: the script names the tests still running, writes every
  thread's backtrace (gdb) beside the run's log, kills the test process and everything it started, and fails;
- at the end it prints the --slowest tests by their own duration, and the run's time;
- --runs N repeats the run N times and stops at the first failure (for finding flakes);
- the pipelines the tests run have no store deadline (CLOUDSYNC_TIMEOUT_MS=none) unless their file sets one, so a
  loaded machine cannot fail a test on a deadline it is not about;
- every run report the tests produced (files left in their temporary directories, and what `cloudsync run --report -`
  printed; see CloudSyncTesting's ReportCollection) is checked against schemas/report.schema.json with
  check-jsonschema, and one that does not validate fails the run.

WIDTH. Swift Testing otherwise starts every test at once, and the Swift concurrency pool has one thread per core.
All those starts queue on the pool ahead of any test's later steps, and synchronous tests hold a thread until they
end, so in the first minute a test's reply from an in-process emulator can wait past its 30-second deadline for a
thread to resume on (21 such timeouts in one run on a 2-core machine, none with the limit). The limit keeps that
queue short; the suite takes as long as before.

Each run keeps its console output and events in .build/test-runs/<time>-<label>-<run>/. Arguments after `--` go to
the test binary as they are (`--filter NAME`, `--skip NAME`, `--no-parallel`).
"""

import argparse
import json
import os
import signal
import subprocess
import sys
import threading
import time
from datetime import datetime

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def test_binary():
    path = subprocess.run(
        ["swift", "build", "--show-bin-path"], cwd=ROOT, check=True, capture_output=True, text=True
    ).stdout.strip()
    binary = os.path.join(path, "CloudSyncPackageTests.xctest")
    if not os.path.exists(binary):
        sys.exit(f"run-tests: error: {binary} does not exist; build the tests first (swift build --build-tests)")
    return binary


def readable(test_id):
    """`Module.Suite/name()/File.swift:12:6` -> `Module.Suite/name()`."""
    head, _, tail = test_id.rpartition("/")
    return head if head and ".swift:" in tail else test_id


class Watch:
    """What the event stream has said so far: which tests are suites, which run, and how long each one took."""

    def __init__(self):
        self.suites = set()
        self.running = {}  # test id -> monotonic time its start was seen
        self.started_at = {}  # test id -> the event's own instant
        self.durations = {}
        self.failed = set()
        self.run_ended = False

    def take(self, record):
        payload = record.get("payload", {})
        if record.get("kind") == "test":
            if payload.get("kind") == "suite":
                self.suites.add(payload.get("id"))
            return
        kind = payload.get("kind")
        test_id = payload.get("testID")
        instant = payload.get("instant", {}).get("absolute")
        if kind == "runEnded":
            self.run_ended = True
        if test_id is None or test_id in self.suites or payload.get("testCaseID") is not None:
            return
        if kind == "testStarted":
            self.running[test_id] = time.monotonic()
            self.started_at[test_id] = instant
        elif kind == "testEnded":
            self.running.pop(test_id, None)
            start = self.started_at.get(test_id)
            if start is not None and instant is not None:
                self.durations[test_id] = instant - start
        elif kind == "issueRecorded" and not payload.get("issue", {}).get("isKnown", False):
            self.failed.add(test_id)


def follow(path, watch, stop):
    """Reads the event stream as the test process writes it, until `stop` is set and nothing more is there."""
    while not os.path.exists(path) and not stop.is_set():
        time.sleep(0.05)
    if not os.path.exists(path):
        return
    with open(path, "r", encoding="utf-8", errors="replace") as stream:
        pending = ""
        while True:
            chunk = stream.readline()
            if chunk:
                pending += chunk
                if pending.endswith("\n"):
                    try:
                        watch.take(json.loads(pending))
                    except json.JSONDecodeError:
                        pass
                    pending = ""
                continue
            if stop.is_set():
                return
            time.sleep(0.1)


def copy_output(source, log):
    for line in iter(source.readline, b""):
        sys.stdout.buffer.write(line)
        sys.stdout.buffer.flush()
        log.write(line)
    log.flush()


def descendants(pid):
    """`pid` and every process below it, from /proc."""
    children = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as stat:
                parent = int(stat.read().rsplit(b")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            continue
        children.setdefault(parent, []).append(int(entry))
    found, queue = [], [pid]
    while queue:
        current = queue.pop()
        found.append(current)
        queue.extend(children.get(current, []))
    return found


def dump_backtraces(pid, path):
    """Every thread's backtrace of the hung test process, through gdb when the machine has it."""
    try:
        with open(path, "wb") as out:
            subprocess.run(
                ["gdb", "-p", str(pid), "-batch", "-nx", "-ex", "set pagination off", "-ex", "thread apply all bt"],
                # gdb reads the whole test binary's debug information first: about a minute on a quiet machine of
                # two cores, and it took more than three under the full suite in CI (the watchdog test then found no
                # backtraces). 420 s, plus the demangling, stays within the test's and the watchdog's own limits.
                stdout=out, stderr=subprocess.STDOUT, timeout=420, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return False
    # Swift's symbols read as names, not mangled ones, where the toolchain can demangle them.
    try:
        with open(path, "rb") as raw:
            demangled = subprocess.run(["swift", "demangle", "--simplified"], stdin=raw, capture_output=True,
                                       timeout=60, check=True).stdout
        with open(path, "wb") as out:
            out.write(demangled)
    except (OSError, subprocess.SubprocessError):
        pass
    return True


def crash_summary(console_log, frames=12):
    """The Swift runtime's crash line and the crashed thread's first `frames` frames from `console_log`: they come
    before pages of other threads and loaded images, so a log cut to its tail would lose them."""
    try:
        with open(console_log, "r", encoding="utf-8", errors="replace") as log:
            lines = log.read().splitlines()
    except OSError:
        return ""
    start = next((i for i, line in enumerate(lines) if "Program crashed" in line), None)
    if start is None:
        return ""
    picked = [lines[start]]
    crashed = next((i for i in range(start, len(lines)) if lines[i].rstrip().endswith("crashed:")), None)
    if crashed is not None:
        for line in lines[crashed:]:
            if line.strip() == "" and len(picked) > 2:
                break
            picked.append(line)
            if len(picked) >= frames + 2:
                break
    return "\n".join("  " + line for line in picked)


def reports_validate(directory):
    """Checks every collected report against the report schema with check-jsonschema; true when all validate."""
    files = sorted(os.path.join(directory, name) for name in os.listdir(directory)
                   if name.endswith(".json")) if os.path.isdir(directory) else []
    if not files:
        return True
    checker = os.path.join(ROOT, ".build", "pyenv", "bin", "check-jsonschema")
    if not os.path.exists(checker):
        print(f"run-tests: error: {checker} is missing, so {len(files)} reports went unchecked; run "
              "scripts/python-env.sh", file=sys.stderr)
        return False
    schema = os.path.join(ROOT, "schemas", "report.schema.json")
    failed = False
    # A few hundred files per call keeps each command line well inside the system's limit.
    for start in range(0, len(files), 400):
        check = subprocess.run([checker, "--schemafile", schema] + files[start:start + 400],
                               capture_output=True, text=True)
        if check.returncode != 0:
            failed = True
            print(check.stdout + check.stderr, file=sys.stderr)
    verdict = "do not all validate" if failed else "validate"
    print(f"run-tests: the {len(files)} run reports the tests produced {verdict} against {schema} "
          "(check-jsonschema)", file=sys.stderr)
    return not failed


def run_once(binary, extra, limit, slowest, directory):
    os.makedirs(directory, exist_ok=True)
    events = os.path.join(directory, "events.jsonl")
    console = open(os.path.join(directory, "console.log"), "wb")
    command = [binary, "--testing-library", "swift-testing", "--event-stream-output-path", events,
               "--event-stream-version", "0"] + extra
    began = time.monotonic()
    reports = os.path.join(directory, "reports")
    environment = dict(os.environ, NO_COLOR="1", CLOUDSYNC_COLLECT_REPORTS=reports)
    # No store deadline for the pipelines the tests run, unless a test's file sets one (the tests about deadlines
    # do): on a loaded machine a deadline a test is not about only fails it at random.
    environment.setdefault("CLOUDSYNC_TIMEOUT_MS", "none")
    process = subprocess.Popen(command, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                               start_new_session=True, env=environment)
    watch, stop = Watch(), threading.Event()
    reader = threading.Thread(target=follow, args=(events, watch, stop), daemon=True)
    reader.start()
    copier = threading.Thread(target=copy_output, args=(process.stdout, console), daemon=True)
    copier.start()
    hung = []
    while process.poll() is None:
        time.sleep(1)
        now = time.monotonic()
        hung = sorted(test for test, seen in list(watch.running.items()) if now - seen > limit)
        if hung:
            break
    if hung:
        still = sorted(watch.running)
        print(f"\nrun-tests: error: {len(hung)} test(s) ran longer than {limit} s and were stopped:", file=sys.stderr)
        for test in hung:
            print(f"  {readable(test)}", file=sys.stderr)
        print(f"run-tests: still running then: {', '.join(readable(t) for t in still)}", file=sys.stderr)
        backtraces = os.path.join(directory, "backtraces.txt")
        if dump_backtraces(process.pid, backtraces):
            print(f"run-tests: every thread's backtrace: {backtraces}", file=sys.stderr)
        for pid in reversed(descendants(process.pid)):
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        try:
            os.killpg(process.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    status = process.wait()
    copier.join(timeout=10)
    stop.set()
    reader.join(timeout=10)
    console.close()
    elapsed = time.monotonic() - began
    if slowest > 0 and watch.durations:
        print(f"\nrun-tests: the {min(slowest, len(watch.durations))} slowest tests (each test's own time; tests run "
              "side by side, so a test's time includes waiting for the machine):", file=sys.stderr)
        for test, seconds in sorted(watch.durations.items(), key=lambda item: -item[1])[:slowest]:
            print(f"  {seconds:8.1f} s  {readable(test)}", file=sys.stderr)
    passed = status == 0 and not hung and reports_validate(reports)
    if status != 0 and not hung and not watch.run_ended:
        print(f"run-tests: error: the test process ended with status {status} before the run ended",
              file=sys.stderr)
        # Printed last and kept short: CI keeps only the tail of the output.
        if watch.running:
            running = sorted(readable(t) for t in watch.running)
            more = f" and {len(running) - 8} more (in events.jsonl)" if len(running) > 8 else ""
            print("run-tests: running then: " + ", ".join(running[:8]) + more, file=sys.stderr)
        crash = crash_summary(os.path.join(directory, "console.log"))
        if crash:
            print("run-tests: where it crashed (the whole backtrace is in console.log):\n" + crash, file=sys.stderr)
    if watch.failed:
        print("run-tests: failed: " + ", ".join(sorted(readable(t) for t in watch.failed)), file=sys.stderr)
    print(f"run-tests: {'passed' if passed else 'FAILED'} in {elapsed:.1f} s (log: {directory})", file=sys.stderr)
    return passed


def main():
    # Started by a test (WatchdogTests runs this script from a test thread through Foundation's Process), the script
    # inherits that thread's blocked signals, and so would every child: gdb with SIGCHLD blocked never hears that the
    # threads it attached to stopped, and waits for good. Children start with nothing blocked.
    signal.pthread_sigmask(signal.SIG_SETMASK, set())
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=int(os.environ.get("CLOUDSYNC_REPEAT", "1")),
                        help="run the suite this many times, stopping at the first failure (default: "
                             "CLOUDSYNC_REPEAT or 1)")
    parser.add_argument("--limit", type=int, default=int(os.environ.get("CLOUDSYNC_TEST_LIMIT", "660")),
                        help="seconds one test may run before the run is stopped (default: CLOUDSYNC_TEST_LIMIT "
                             "or 660, past the 10-minute time limit of the process suites)")
    parser.add_argument("--width", type=int,
                        default=int(os.environ.get("CLOUDSYNC_TEST_WIDTH", str(6 * (os.cpu_count() or 2)))),
                        help="at most this many tests run at once (default: CLOUDSYNC_TEST_WIDTH or six per core; "
                             "0: no limit); see WIDTH below")
    parser.add_argument("--slowest", type=int, default=10, help="how many of the slowest tests to print")
    parser.add_argument("--label", default="main", help="a name for the runs' log folders")
    parser.add_argument("--binary", help="the test binary (default: the one `swift build` built)")
    parser.add_argument("extra", nargs=argparse.REMAINDER, help="-- then arguments for the test binary")
    arguments = parser.parse_args()
    extra = arguments.extra[1:] if arguments.extra[:1] == ["--"] else arguments.extra
    if arguments.width > 0 and "--no-parallel" not in extra:
        extra = ["--experimental-maximum-parallelization-width", str(arguments.width)] + extra
    binary = arguments.binary or test_binary()
    stamp = datetime.now().strftime("%Y%m%d-%H%M%S")
    times = []
    for run in range(1, arguments.runs + 1):
        directory = os.path.join(ROOT, ".build", "test-runs", f"{stamp}-{arguments.label}-{run}")
        began = time.monotonic()
        passed = run_once(binary, extra, arguments.limit, arguments.slowest, directory)
        times.append(time.monotonic() - began)
        if arguments.runs > 1:
            print(f"run-tests: run {run} of {arguments.runs} {'passed' if passed else 'FAILED'} in {times[-1]:.1f} s",
                  file=sys.stderr)
        if not passed:
            return 1
    if arguments.runs > 1:
        print(f"run-tests: {arguments.runs} runs passed; each took " + ", ".join(f"{t:.0f} s" for t in times),
              file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
