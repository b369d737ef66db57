# rtmon build, demo and test entry points. `make demo` and `make test` do all
# set-up on a fresh Debian machine as root (see README.md).

SHELL := /bin/bash
export PATH := /usr/local/go/bin:$(PATH)
GO ?= go
# Debian packages: libpcap for capture, and the real peers and servers the
# tests drive (nginx, curl, Chromium, ClickHouse) with the tools that build
# and observe the network testbed. Tests that need one also install it
# themselves if missing, so a single `go test` works too.
APT_PACKAGES := libpcap-dev tshark nginx-light nftables tcpdump iproute2 curl \
	clickhouse-server chromium ethtool procps util-linux
FUZZTIME ?= 10s

.PHONY: all deps ui build demo test test-go fuzz bench clean

all: build

deps:
	@missing=$$(for p in $(APT_PACKAGES); do dpkg-query -W -f='$${Status}\n' $$p 2>/dev/null | grep -q 'install ok installed' || echo $$p; done); \
	if [ -n "$$missing" ]; then \
		echo "installing:" $$missing; \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing >/dev/null; \
	fi

# The web UI: npm installs the locked packages (uPlot, esbuild) and esbuild
# bundles web/ui/src into web/dist, which go:embed puts in the binary.
UI_SRC := $(wildcard web/ui/src/*) web/ui/build.mjs web/ui/package.json
ui: web/dist/app.js

web/ui/node_modules/.installed: web/ui/package.json web/ui/package-lock.json
	@command -v npm >/dev/null || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq nodejs npm >/dev/null; }
	cd web/ui && npm ci --no-audit --no-fund --loglevel=error
	touch $@

web/dist/app.js: web/ui/node_modules/.installed $(UI_SRC)
	cd web/ui && npm run --silent build

build: deps ui
	$(GO) build -o bin/rtmon ./cmd/rtmon

demo: build
	./bin/rtmon demo

# The whole suite: unit, ground-truth and real-network tests, then a short
# run of every fuzz target. -p 1 runs packages one at a time: the browser
# and network tests compare clocks and must not fight over the two cores.
test: deps ui
	$(GO) vet ./...
	$(GO) test -count=1 -p 1 -timeout 45m ./...
	$(MAKE) fuzz

fuzz:
	@set -e; for pkg in $$($(GO) list ./...); do \
		dir=$$($(GO) list -f '{{.Dir}}' $$pkg); \
		for target in $$(grep -ho '^func Fuzz[A-Za-z0-9_]*' $$dir/*_test.go 2>/dev/null | sed 's/^func //'); do \
			echo "fuzz $$pkg $$target ($(FUZZTIME))"; \
			$(GO) test -run='^$$' -fuzz="^$$target\$$" -fuzztime=$(FUZZTIME) $$pkg; \
		done; \
	done

bench: build
	./bin/rtmon bench

clean:
	rm -rf bin web/dist/app.js web/dist/app.css
