# Usher: `make run` serves the demo config, `make test` runs every test.
# Both install the system packages they need on Debian when missing.

SWIFT ?= swift
CONFIG ?= Config/usher.json
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)
# libhiredis-dev: the Redis client (RedisClient); redis-server: started by its tests.
APT_PACKAGES := libmicrohttpd-dev libhiredis-dev redis-server pkg-config curl jq

.PHONY: deps build release run test soak lint format bench clean

## deps: install libmicrohttpd-dev, libhiredis-dev, redis-server (and pkg-config, curl, jq) with apt-get when missing
deps:
	@command -v $(SWIFT) >/dev/null || { echo "Swift 6 is needed: install a toolchain from swift.org and put swift on PATH"; exit 1; }
	@missing=""; for p in $(APT_PACKAGES); do dpkg -s $$p >/dev/null 2>&1 || missing="$$missing $$p"; done; \
	if [ -n "$$missing" ]; then \
	  echo "installing:$$missing"; \
	  command -v apt-get >/dev/null || { echo "not Debian: install$$missing (libmicrohttpd and hiredis with headers, redis-server, pkg-config, curl, jq) yourself"; exit 1; }; \
	  $(SUDO) apt-get update -qq && DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq $$missing; \
	fi

build: deps
	$(SWIFT) build

## release: Swift's own libraries (Foundation included) linked statically, as in
## the Dockerfile: about 6 MiB less resident memory and 5x faster start-up
release: deps
	$(SWIFT) build -c release --static-swift-stdlib --product usher

## run: serve with the demo config on 127.0.0.1:8080 (Ctrl-C stops it gracefully)
run: release
	.build/release/usher --config $(CONFIG)

## test: build with warnings as errors, then run every test but the soak drills
## in parallel: first all but the OneAtATime suites, then those, which the
## suite trait runs one at a time (Tests/*/OneAtATime.swift says why). Route
## tests call the app in-process (AppTester, BackendApp); live tests run
## blocking socket calls on threads of their own, and deferred answers are
## computed off Swift's cooperative pool.
test: deps lint
	$(SWIFT) build --build-tests -Xswiftc -warnings-as-errors
	$(SWIFT) test --skip-build --skip UsherSoakTests --skip '\.OneAtATime/'
	$(SWIFT) test --skip-build --filter '\.OneAtATime/'

## soak: the long drills (three usher processes on one Redis with faults
## injected: paused, restarted, subscribers killed), one at a time
soak: deps
	$(SWIFT) build --build-tests -Xswiftc -warnings-as-errors
	$(SWIFT) test --skip-build --no-parallel --filter UsherSoakTests

## lint: the checked-in swift-format configuration (.swift-format), strictly
FORMATTED := Sources Tests Benchmarks/EngineBench Package.swift
lint:
	$(SWIFT) format lint --strict --recursive --parallel $(FORMATTED)

## format: rewrite the tree in the house format
format:
	$(SWIFT) format format --in-place --recursive --parallel $(FORMATTED)

## bench: C baseline, Usher, Redis and beanstalkd under the same load, one table
## (Benchmarks/README.md; knobs such as DURATION=10 ROUNDS=3 pass through the environment)
bench: deps
	Benchmarks/run

clean:
	rm -rf .build
