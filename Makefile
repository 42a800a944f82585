# dal — build, test, benchmark. `make help` lists the targets.
GO        ?= go
BIN       := bin
LDFLAGS   := -s -w
export CGO_ENABLED := 0

.PHONY: help build install uninstall test test-short test-deps test-go test-python test-node race bench lint generate demo clean fuzz

# Every target is listed here (the root package's TestMakeHelp checks it).
help:
	@echo "make demo            build, then run the example agents twice in strict mode and compare (~30 s)"
	@echo "make test            build, install the test dependencies, run every test (~15 min on 2 CPUs)"
	@echo "make test-deps       install what the tests need: Debian packages (as root), npm packages, Go modules"
	@echo "make test-go         the Go tests only (units and end to end; after make test-deps)"
	@echo "make test-python     the Python shim's tests only"
	@echo "make test-node       the Node shim's tests only"
	@echo "make test-short      the Go unit tests alone (go test -short: no end-to-end, eBPF or long tests; no build)"
	@echo "make race            the concurrent packages' tests under the race detector (cgo on for it alone)"
	@echo "make build           build bin/dal-exec, bin/dal-exec-full, bin/dal-sandbox-init and bin/dald"
	@echo "make install [PREFIX=/usr/local] [DESTDIR=]  install the four binaries into DESTDIR/PREFIX/bin"
	@echo "make uninstall       remove them again (same PREFIX and DESTDIR)"
	@echo "make lint            gofmt, goimports and staticcheck (pinned, installed into bin/tools), go vet, CGO-free build"
	@echo "make generate        rebuild the eBPF object, syscall tables and vDSO (clang-14, llvm-14, gcc)"
	@echo "make fuzz [FUZZTIME=10s] [FUZZ=regexp]  run every fuzz target for FUZZTIME each"
	@echo "make bench           run the benchmarks and regenerate bench/out/report.md and docs/benchmarks.md"
	@echo "make bench-smoke     the short benchmark CI runs (fidelity of every example, overheads)"
	@echo "make bench-fidelity  record, replay and revert every example agent with SEEDS random seeds"
	@echo "make bench-compare OLD=rev [NEW=rev]  Go micro-benchmarks at two commits, with benchstat"
	@echo "make clean           remove bin/ and bench/out/"

# urfave_cli_no_docs leaves out urfave/cli's man-page and Markdown writers,
# which dal does not use and whose Markdown parser costs every dal-exec start
# half a millisecond of package initialisation.
build:
	$(GO) build -trimpath -tags urfave_cli_no_docs -ldflags '$(LDFLAGS)' -o $(BIN)/ ./cmd/dal-exec ./cmd/dal-exec-full ./cmd/dal-sandbox-init ./cmd/dald

# make install puts the four binaries in $(DESTDIR)$(BINDIR): PREFIX is where
# they will live (default /usr/local, so /usr/local/bin), DESTDIR a staging
# root prepended to it, for packaging (make install DESTDIR=/tmp/pkg
# PREFIX=/usr). dal-sandbox-init is the sandbox's init, which dal-exec
# starts from beside itself (else from its own image; docs/design.md §1);
# dal-exec-full is dal-exec with the policy gate's Rego engine and the
# Prometheus registry of --metrics-textfile, which dal-exec (4 ms faster to
# start without them) executes from beside itself for the commands that
# need them. Nothing else is installed: the shims
# are embedded in dal-exec. Without make, go install ./cmd/... puts all four
# in $(go env GOBIN), else ~/go/bin. cmd/dal-exec's tests install into a
# temporary DESTDIR.
PREFIX  ?= /usr/local
BINDIR  ?= $(PREFIX)/bin
INSTALL ?= install

install: build
	$(INSTALL) -d '$(DESTDIR)$(BINDIR)'
	$(INSTALL) -m 0755 $(BIN)/dal-exec $(BIN)/dal-exec-full $(BIN)/dal-sandbox-init $(BIN)/dald '$(DESTDIR)$(BINDIR)/'

uninstall:
	rm -f '$(DESTDIR)$(BINDIR)/dal-exec' '$(DESTDIR)$(BINDIR)/dal-exec-full' '$(DESTDIR)$(BINDIR)/dal-sandbox-init' '$(DESTDIR)$(BINDIR)/dald'

# Each step says what it starts: the Go tests print a line per package only
# as each finishes, the first after a minute or more.
test: build test-deps
	@$(MAKE) --no-print-directory test-go test-python test-node

test-go:
	@echo "make test: Go tests (go test ./..., most of make test's time; a line per package as it finishes)"
	$(GO) test -count=1 -timeout 30m ./...

test-python:
	@echo "make test: the Python shim's tests"
	python3 -m unittest discover -s internal/shim/python/tests -t internal/shim/python

test-node:
	@echo "make test: the Node shim's tests"
	node --test internal/shim/node/test/

# The Go unit tests alone: under -short the end-to-end tests (e2e/), those
# that load eBPF programs and the long ones skip, each saying why
# (testing.Short()). Nothing to build first. make test runs everything.
test-short:
	$(GO) test -short -count=1 ./...

# The race detector needs cgo, which the rest of the build leaves off: on
# for this target alone. The packages whose goroutines share state.
RACE_PKGS := ./internal/sysvirt ./internal/sandbox ./internal/daemon ./internal/netcap ./internal/runner ./internal/policy/...

race:
	CGO_ENABLED=1 $(GO) test -race -count=1 $(RACE_PKGS)

# What the tests need beyond Go: Debian packages (installed when run as
# root; otherwise the exact apt-get command is printed and make stops) and
# the npm packages of the end-to-end tests (locally, pinned by their
# package-lock.json). See scripts/test-deps.sh.
test-deps:
	@echo "make test: installing the test dependencies (scripts/test-deps.sh)"
	@./scripts/test-deps.sh

# goimports, pinned, installed from the Go module proxy into bin/tools on
# first use (as bench/compare.sh installs benchstat); a new version gets a
# directory of its own, so changing the pin reinstalls it.
GOIMPORTS_VERSION := v0.52.0
GOIMPORTS         := $(BIN)/tools/goimports-$(GOIMPORTS_VERSION)/goimports

# staticcheck (unused code, deprecated calls, suspect arguments), pinned and
# installed the same way.
STATICCHECK_VERSION := v0.8.2
STATICCHECK         := $(BIN)/tools/staticcheck-$(STATICCHECK_VERSION)/staticcheck

lint: $(GOIMPORTS) $(STATICCHECK)
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi
	@out=$$($(GOIMPORTS) -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "goimports would change (see $(GOIMPORTS) -d FILE):"; echo "$$out"; exit 1; fi
	$(GO) vet ./...
	$(STATICCHECK) ./...
	CGO_ENABLED=0 $(GO) build ./...

$(GOIMPORTS):
	GOBIN=$(CURDIR)/$(dir $(GOIMPORTS)) $(GO) install golang.org/x/tools/cmd/goimports@$(GOIMPORTS_VERSION)

$(STATICCHECK):
	GOBIN=$(CURDIR)/$(dir $(STATICCHECK)) $(GO) install honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK_VERSION)

# Rebuilds the committed eBPF object, its Go bindings and the syscall tables
# (needs clang-14 and llvm-14: scripts/test-deps.sh --generate, or apt-get
# install clang-14 llvm-14), and dal's
# vDSO (gcc). CI checks that regeneration changes nothing: make generate &&
# git diff --exit-code.
generate:
	$(GO) generate ./ebpf/
	$(GO) generate ./internal/sysvirt/vdso/

# Every fuzz target of the module, FUZZTIME each (default 10s): make fuzz
# [FUZZTIME=1m] [FUZZ='har|wire']. See scripts/fuzz.sh.
fuzz:
	./scripts/fuzz.sh

# make bench: every benchmark, bench/out/report.{md,json}, bench/out/bench.prom
# and docs/benchmarks.md (its figures section). bench-smoke: the short suite CI runs
# (bench/out/smoke/). bench-fidelity: record, replay and revert the example
# agents with SEEDS random seeds each (bench/out/fidelity/). All three exit 1
# when a replay of a deterministic agent is not exact. bench-compare: the Go
# micro-benchmarks at OLD and NEW (default: the working tree) with benchstat.
.PHONY: bench-smoke bench-fidelity bench-compare
SEEDS ?= 10

bench: build
	./bench/run.sh

bench-smoke: build
	./bench/run.sh -smoke

bench-fidelity: build
	./bench/run.sh -only fidelity -seeds $(SEEDS) -out bench/out/fidelity

bench-compare:
	OLD='$(OLD)' NEW='$(NEW)' ./bench/compare.sh

demo: build
	./examples/demo.sh

clean:
	rm -rf $(BIN) bench/out
