# The project's commands. `make test` is the one CI runs (see .ci/run and README.md).
SWIFT ?= swift
# `make install`: where to (PREFIX), and a staging root prepended to every path (DESTDIR), as packagers expect.
PREFIX ?= /usr/local
DESTDIR ?=
BINDIR = $(PREFIX)/bin
# Where `cloudsync-jq`, the worker that runs jq programs, goes: cloudsync looks in ../libexec/cloudsync from its own binary.
LIBEXECDIR = $(PREFIX)/libexec/cloudsync
MANDIR = $(PREFIX)/share/man
DOCDIR = $(PREFIX)/share/doc/cloudsync
INSTALL ?= install

.PHONY: deps build run emulator docs test stress test-repeat bench bench-compare fuzz format lint clean release install uninstall check-install

deps:
	@scripts/install-deps.sh

build: deps
	$(SWIFT) build

# The demo: runs pipelines/demo.yaml on the embedded default and prints where its report went.
run: build
	.build/debug/cloudsync run pipelines/demo.yaml

# The Google and CloudKit emulators on 127.0.0.1 (docs/emulators.md), their state kept across restarts.
emulator: build
	.build/debug/cloudsync-emulator --data .build/emulator

# The library's documentation as DocC, one static site in .build/docs (scripts/make-docs.sh): a landing page per
# library product from its Sources/<Module>/<Module>.docc, articles made from sections of docs/*.md, symbol graphs
# from the debug build's modules; a link DocC cannot resolve fails it. Then the man pages, in .build/man, each
# checked by groff with every warning on (any output fails).
docs: deps
	@SWIFT=$(SWIFT) scripts/make-docs.sh
	@scripts/install-deps.sh groff-base
	$(SWIFT) build --product cloudsync
	.build/debug/cloudsync man --output .build/man
	@for page in .build/man/man*/*; do \
		warnings=$$(groff -ww -man -Tutf8 -z "$$page" 2>&1); \
		if [ -n "$$warnings" ]; then echo "$$warnings" >&2; echo "make docs: groff warns about $$page" >&2; exit 1; fi; \
	done; echo "make docs: the man pages are in .build/man (MANPATH=.build/man man cloudsync)" >&2

# The documentation site first (`make docs`: the test build's modules serve it, so it costs seconds), then the
# whole suite, then the stress suites (hundreds of processes: the run-lock race, the SIGKILL crash loop, dry runs
# beside a writer) on their own, one at a time, so they do not starve the timing-sensitive tests. Both run under
# scripts/run-tests.py: a test running past CLOUDSYNC_TEST_LIMIT seconds (default 660; a stress test 1200) is stopped
# and named, with every thread's backtrace kept, and each run ends with its ten slowest tests.
# The stress suites run at the size CI's time allows (`make stress` runs their full size). Beside them, at the lowest
# priority, the release build that check-install installs and the package of the documentation's Swift examples build (log:
# .build/beside-stress.log): the stress phase waits on moto, leases and child processes much of the time, so those
# builds take the idle cores instead of adding their minutes after it.
# Then that package runs the documentation's examples against the library products, and check-install checks `make install`.
test: deps
	@scripts/install-deps.sh rclone gdb restic postgresql tzdata prometheus chromium groff-base fish zsh jq
	@scripts/python-env.sh
	$(SWIFT) build --build-tests
	@SWIFT=$(SWIFT) scripts/make-docs.sh
	scripts/run-tests.py
	@binary="$$($(SWIFT) build --show-bin-path)/CloudSyncPackageTests.xctest"; \
	{ nice -n 19 $(MAKE) --no-print-directory release && SWIFT=$(SWIFT) nice -n 19 scripts/check-consumer.sh --build-only; } \
		>.build/beside-stress.log 2>&1 & beside=$$!; \
	CLOUDSYNC_STRESS=1 scripts/run-tests.py --binary "$$binary" --label stress --limit 1200 -- --no-parallel --filter StressTests; stress=$$?; \
	if ! wait $$beside; then \
		cat .build/beside-stress.log >&2; echo "make test: the builds beside the stress phase failed" >&2; exit 1; \
	fi; \
	grep -h "complete!" .build/beside-stress.log | sed 's/^/make test: built beside the stress phase: /' >&2; \
	exit $$stress
	@SWIFT=$(SWIFT) scripts/check-consumer.sh
	@$(MAKE) --no-print-directory check-install

# The stress suites alone at their full size (CLOUDSYNC_STRESS=full: 200 run-lock races a kind, 100 crash rounds,
# 10,000 outbox entries, 40 key-identity seeds, 2,000 sync-determinism seeds, a 100 MiB value and 1,000 files through
# three providers' backups), for hunting a rare interleaving after changing the code they cover.
stress: deps
	@scripts/install-deps.sh rclone gdb restic postgresql tzdata prometheus chromium groff-base fish zsh jq
	@scripts/python-env.sh
	$(SWIFT) build --build-tests
	CLOUDSYNC_STRESS=full scripts/run-tests.py --label stress --limit 2400 -- --no-parallel --filter StressTests

# `make test-repeat N=10`: the main suite N times (default 10), stopping at the first failure, for finding flakes.
N ?= 10
test-repeat: deps
	@scripts/install-deps.sh rclone gdb restic postgresql tzdata prometheus chromium groff-base fish zsh jq
	@scripts/python-env.sh
	$(SWIFT) build --build-tests
	scripts/run-tests.py --runs $(N) --label repeat

# `make bench`: one table of our figures beside their peers (sqlite3 shell, libsodium, rclone, restic, the protocol minimum of
# requests per key on the emulators and moto), medians of BENCH_RUNS
# runs, also written to bench.json. `make bench-compare OLD=old.json` sets an earlier bench.json beside the current one.
BENCH_RUNS ?= 3
bench:
	@scripts/install-deps.sh sqlite3 rclone restic postgresql
	@scripts/python-env.sh
	$(SWIFT) run -c release cloudsync-bench --runs $(BENCH_RUNS) --json bench.json
	$(SWIFT) run -c release cloudsync-bench --sync 1000000,10000000 --runs $(BENCH_RUNS)

bench-compare:
	@test -n "$(OLD)" || { echo "usage: make bench-compare OLD=old.json [NEW=bench.json]" >&2; exit 64; }
	$(SWIFT) run -c release cloudsync-bench compare "$(OLD)" "$(or $(NEW),bench.json)"

# libFuzzer on the YAML face, the pipeline loader, the envelope decoder, the export reader and the backup
# decompressors, FUZZ_SECONDS each (default 10 minutes; FUZZ_TARGETS picks some), growing the corpus in Tests/Fuzz/ that
# `make test` replays (scripts/fuzz.sh). Its own build directory, so the ordinary build is untouched.
FUZZ_SECONDS ?= 600
fuzz: deps
	CLOUDSYNC_FUZZ=1 $(SWIFT) build --sanitize=fuzzer --build-path .build/fuzz --product cloudsync-fuzz
	FUZZ_SECONDS=$(FUZZ_SECONDS) scripts/fuzz.sh

format:
	$(SWIFT) format --in-place --recursive --parallel Package.swift Sources Tests

lint:
	$(SWIFT) format lint --strict --recursive Package.swift Sources Tests

# What `cloudsync version` says the release binary was built from (Package.swift hands them to Sources/CBuildInfo):
# the commit, with -dirty when tracked files differ from it; the commit's date in UTC, not the time of the build, so
# two builds of one commit are the same bytes; and the compiler's version. The commit and its date come only from a
# git checkout of this very directory (not from a repository a tarball was unpacked in); without one they stay empty
# and the binary says `unknown`. A packager may set any of them (`make install CLOUDSYNC_COMMIT=...`).
checkout = $(filter $(CURDIR),$(shell git rev-parse --show-toplevel 2>/dev/null))
CLOUDSYNC_COMMIT ?= $(if $(checkout),$(shell git rev-parse HEAD 2>/dev/null)$(if \
	$(shell git status --porcelain --untracked-files=no 2>/dev/null),-dirty))
CLOUDSYNC_COMMIT_DATE ?= $(if $(checkout),$(shell TZ=UTC0 git log -1 --format=%cd \
	--date=format-local:%Y-%m-%dT%H:%M:%SZ 2>/dev/null))
CLOUDSYNC_SWIFT_VERSION ?= $(shell $(SWIFT) --version 2>/dev/null | sed -n 's/.*Swift version \([^ ]*\).*/\1/p' | head -n 1)

# The executable as installed: release mode, the Swift runtime and Foundation linked statically, so it needs only
# the C libraries of the system and the Debian runtime packages docs/install.md lists.
release: deps
	CLOUDSYNC_COMMIT="$(CLOUDSYNC_COMMIT)" CLOUDSYNC_COMMIT_DATE="$(CLOUDSYNC_COMMIT_DATE)" \
		CLOUDSYNC_SWIFT_VERSION="$(CLOUDSYNC_SWIFT_VERSION)" \
		$(SWIFT) build -c release --static-swift-stdlib --product cloudsync
	$(SWIFT) build -c release --static-swift-stdlib --product cloudsync-jq

# The man pages come from the binary (`cloudsync man`: cloudsync(1), a page per subcommand, cloudsync-pipeline(5));
# the units are rewritten for PREFIX's binary.
install: release
	$(INSTALL) -d "$(DESTDIR)$(BINDIR)" "$(DESTDIR)$(MANDIR)/man1" "$(DESTDIR)$(MANDIR)/man5" \
		"$(DESTDIR)$(DOCDIR)/schemas" "$(DESTDIR)$(DOCDIR)/docs" "$(DESTDIR)$(DOCDIR)/systemd"
	$(INSTALL) -m 0755 .build/release/cloudsync "$(DESTDIR)$(BINDIR)/cloudsync"
	$(INSTALL) -d "$(DESTDIR)$(LIBEXECDIR)"
	$(INSTALL) -m 0755 .build/release/cloudsync-jq "$(DESTDIR)$(LIBEXECDIR)/cloudsync-jq"
	.build/release/cloudsync man --output "$(DESTDIR)$(MANDIR)" --doc-dir "$(DOCDIR)"
	chmod 0644 "$(DESTDIR)$(MANDIR)"/man1/cloudsync*.1 "$(DESTDIR)$(MANDIR)/man5/cloudsync-pipeline.5"
	.build/release/cloudsync --help > "$(DESTDIR)$(DOCDIR)/cloudsync-help.txt"
	$(INSTALL) -m 0644 README.md LICENSE "$(DESTDIR)$(DOCDIR)/"
	$(INSTALL) -m 0644 docs/*.md "$(DESTDIR)$(DOCDIR)/docs/"
	$(INSTALL) -m 0644 schemas/*.json "$(DESTDIR)$(DOCDIR)/schemas/"
	for unit in contrib/systemd/*; do \
		sed -e 's|/usr/local/bin/cloudsync|$(BINDIR)/cloudsync|g' -e 's|/usr/local/share/doc/cloudsync|$(DOCDIR)|g' \
			"$$unit" > "$(DESTDIR)$(DOCDIR)/systemd/$${unit##*/}" && chmod 0644 "$(DESTDIR)$(DOCDIR)/systemd/$${unit##*/}"; \
	done

uninstall:
	rm -f "$(DESTDIR)$(BINDIR)/cloudsync" "$(DESTDIR)$(MANDIR)"/man1/cloudsync.1 "$(DESTDIR)$(MANDIR)"/man1/cloudsync-*.1 \
		"$(DESTDIR)$(MANDIR)/man5/cloudsync-pipeline.5"
	rm -rf "$(DESTDIR)$(DOCDIR)" "$(DESTDIR)$(LIBEXECDIR)"

# Installs into a temporary DESTDIR and checks the result stands alone (scripts/check-install.sh); `make test` runs it.
check-install:
	@SWIFT=$(SWIFT) scripts/check-install.sh

clean:
	rm -rf .build
