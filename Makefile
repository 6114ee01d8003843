# Tandem — build, test and demo. `make help` lists the targets.

GO       ?= go
BIN      := bin/tandem
# The build says which source it is: a tag, or the commit (-dirty with
# uncommitted changes), as --version and every capture and run record it.
VERSION  ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo devel)
# mariadbd lives in /usr/sbin on Debian, which is not on every user's PATH.
export PATH := $(PATH):/usr/sbin:/usr/local/go/bin

# Debian packages the tests and the demo need. Later features append here.
DEB_PACKAGES := mariadb-server mariadb-client mariadb-plugin-rocksdb sysbench haproxy prometheus chromium tcpdump linux-perf libmariadb-dev gcc libc6-dev default-jdk-headless libmariadb-java

.PHONY: help build test test-short lint deps demo bench bench-store bench-proxy bench-synth bench-replay bench-binlog bench-scale bench-pcap faults clean

help:
	@echo "make deps        install the Debian packages the tests and demo need ($(DEB_PACKAGES))"
	@echo "make build       build $(BIN)"
	@echo "make test        all tests, including those against sandboxed MariaDB servers"
	@echo "make test-short  pure unit tests only (no server needed)"
	@echo "make lint        gofmt check, go vet, and go mod tidy -diff (go.mod/go.sum as tidy leaves them)"
	@echo "make bench       all benchmarks, each printing measured figures and ratios to its targets"
	@echo "                 (bench-store, bench-synth, bench-proxy, bench-replay, bench-binlog, bench-scale, bench-pcap; each runs alone too)"
	@echo "                 bench-proxy: REF=<rev> adds tandem@REF (that revision's relay-only proxy) with tandem/tandem@REF ratios;"
	@echo "                 TARGETS=\"haproxy tandem tandem@REF\" runs only those (direct always); SECS, ROUNDS, THREADS;"
	@echo "                 TARGETS=\"haproxy tandem+capture tandem+capture@procs2\" adds the capturing proxy with --procs 2"
	@echo "                 bench-scale: replay of sysbench captures at SESSIONS (default \"16 64 256 1024\") sessions, --order capture and none:"
	@echo "                 statements/s, peak RSS, the order gate's CPU per statement (perf when it can sample here, PERF=0: Go's profile);"
	@echo "                 CAPTURE_SECS (5), LONG_SECS (50: N=64 captured longer); REF=<rev> replays each capture with that revision's --order capture too"
	@echo "                 bench-pcap: capture --from-pcap statements/s against tandem synth's, and peak RSS of a BIG_MB (1024) MiB pcap"
	@echo "                 against its first quarter; STMTS (1000000), ROUNDS (2)"
	@echo "make demo        deps, build, start the sandbox, show InnoDB vs MyRocks, stop it"
	@echo "make faults      feed tandem corrupt captures, killed runs, a dead target and a connect burst; one line per case"

build:
	$(GO) build -ldflags "-X github.com/tandemdb/tandem/internal/version.Version=$(VERSION)" -o $(BIN) ./cmd/tandem

# Three packages at a time: the long ones (cmd/tandem, replay, e2e, proxy)
# mostly wait on their servers, --speed 1 pacing and sysbench's --rate.
# The tests assert counts and labels, never speed.
test:
	$(GO) test -p 3 -count=1 -timeout 15m ./...

test-short:
	$(GO) test -count=1 -short ./...

lint:
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	  if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...
	$(GO) mod tidy -diff

deps:
	@scripts/deps.sh $(DEB_PACKAGES)

demo: deps build
	@scripts/demo.sh $(BIN)

bench: bench-store bench-synth bench-proxy bench-replay bench-binlog bench-scale bench-pcap

bench-store:
	@scripts/bench-store.sh

bench-binlog: build
	@scripts/bench-binlog.sh $(BIN)

bench-synth: build
	@scripts/bench-synth.sh $(BIN)

bench-proxy: build
	@scripts/bench-proxy.sh $(BIN)

bench-replay: build
	@scripts/bench-replay.sh $(BIN)

bench-scale: build
	@scripts/bench-scale.sh $(BIN)

bench-pcap: build
	@scripts/bench-pcap.sh $(BIN)

faults: build
	@scripts/faults.sh $(BIN)

clean:
	rm -rf bin .tandem
