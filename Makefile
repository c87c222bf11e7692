# The project's commands. `make test` is the one CI runs (see .ci/run and README.md).
SWIFT ?= swift

.PHONY: deps build run test bench format lint clean

deps:
	@scripts/install-deps.sh

build: deps
	$(SWIFT) build

# The demo: runs pipelines/demo.yaml on the embedded default and prints where its report went.
run: build
	.build/debug/cloudsync run pipelines/demo.yaml

# Then a separate package builds README.md's examples against the library products and runs them.
test: deps
	@scripts/python-env.sh
	$(SWIFT) build --build-tests
	$(SWIFT) test
	@SWIFT=$(SWIFT) scripts/check-consumer.sh

bench:
	@scripts/install-deps.sh sqlite3
	$(SWIFT) run -c release cloudsync-bench

format:
	$(SWIFT) format --in-place --recursive --parallel Package.swift Sources Tests

lint:
	$(SWIFT) format lint --strict --recursive Package.swift Sources Tests

clean:
	rm -rf .build
