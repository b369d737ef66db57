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
	clickhouse-server chromium ethtool procps util-linux openssl tcpreplay
# Installed without their recommended packages: prometheus only for
# promtool, which checks the generated rules (its recommends would add
# node-exporter and its services); zookeeper for the ClickHouse cluster
# (store/chcluster runs its server itself, no service).
APT_BARE := prometheus zookeeper
# A count, not a duration: Go 1.26's fuzz coordinator can fail a target with a
# bare "context deadline exceeded" when a duration budget ends while a worker
# is mid-call (golang/go#75804, fixed in 1.27). A count has no deadline to race.
FUZZTIME ?= 100000x

.PHONY: all deps ui build demo test test-go fuzz validate bench clean cluster-up cluster-down

all: build

deps:
	@missing=$$(for p in $(APT_PACKAGES); do dpkg-query -W -f='$${Status}\n' $$p 2>/dev/null | grep -q 'install ok installed' || echo $$p; done); \
	if [ -n "$$missing" ]; then \
		echo "installing:" $$missing; \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing >/dev/null; \
	fi
	@missing=$$(for p in $(APT_BARE); do dpkg-query -W -f='$${Status}\n' $$p 2>/dev/null | grep -q 'install ok installed' || echo $$p; done); \
	if [ -n "$$missing" ]; then \
		echo "installing:" $$missing; \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $$missing >/dev/null; \
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

# The what-if checked against real runs with each action applied,
# including the overload ones, each overload setup three times (about
# 40 minutes; the six-action validation and a shortened overload,
# TestWhatIfOverloadRelief, also run in make test).
validate: deps ui
	$(GO) test -count=1 -tags validate -timeout 120m -v -run 'TestWhatIfOverloadValidation|TestWhatIfSYNProxyValidation|TestWhatIfValidation' ./testbed/

# Every fuzz target runs briefly on top of its committed seed corpus (the
# seeds, past findings included, also run in every plain `go test`). A new
# finding is printed with its saved input, and fails the run under
# FUZZ_STRICT=1; CI keeps it non-fatal because a random search that happens
# to find something in 10 s must not decide whether unrelated work lands.
FUZZ_STRICT ?= 0
fuzz:
	@findings=0; for pkg in $$($(GO) list ./...); do \
		dir=$$($(GO) list -f '{{.Dir}}' $$pkg); \
		for target in $$(grep -ho '^func Fuzz[A-Za-z0-9_]*' $$dir/*_test.go 2>/dev/null | sed 's/^func //'); do \
			echo "fuzz $$pkg $$target ($(FUZZTIME))"; \
			if ! $(GO) test -run='^$$' -fuzz="^$$target\$$" -fuzztime=$(FUZZTIME) $$pkg; then \
				if ls $$dir/testdata/fuzz/$$target/* >/dev/null 2>&1 && [ -n "$$(git -C $$dir status --porcelain testdata/fuzz/$$target)" ]; then \
					echo "FUZZ FINDING in $$pkg $$target: new failing input under $$dir/testdata/fuzz/$$target (commit it with the fix)"; \
					findings=$$((findings+1)); \
				else \
					exit 1; \
				fi; \
			fi; \
		done; \
	done; \
	if [ $$findings -gt 0 ]; then \
		echo "fuzz: $$findings new finding(s), see FUZZ FINDING above"; \
		[ "$(FUZZ_STRICT)" = 1 ] && exit 1 || true; \
	fi

bench: build
	./bin/rtmon bench

# A local ClickHouse cluster for cluster mode (docs/cluster.md): one
# ZooKeeper and 2 shards x 2 replicas on loopback ports, data and PIDs in
# CLUSTER_DIR. cluster-up prints the --store URL; cluster-down stops it
# and keeps the data.
CLUSTER_DIR ?= /var/tmp/rtmon-cluster
cluster-up: deps
	$(GO) run ./store/chcluster/clusterctl up --dir $(CLUSTER_DIR)

cluster-down:
	$(GO) run ./store/chcluster/clusterctl down --dir $(CLUSTER_DIR)

clean:
	rm -rf bin web/dist/app.js web/dist/app.css
