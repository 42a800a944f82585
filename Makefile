# dal — build, test, benchmark. `make help` lists the targets.
GO        ?= go
BIN       := bin
LDFLAGS   := -s -w
export CGO_ENABLED := 0

.PHONY: help build install uninstall test test-deps test-go test-python test-node bench lint demo clean fuzz

help:
	@echo "make demo    build, then run the example agents twice in strict mode and compare"
	@echo "make test    build and run every test (Go, Python shim, Node shim, end to end)"
	@echo "make bench   run the benchmarks and regenerate bench/out/report.md and docs/benchmarks.md"
	@echo "make bench-smoke     the short benchmark CI runs (fidelity of every example, overheads)"
	@echo "make bench-fidelity  record, replay and revert every example agent with SEEDS random seeds"
	@echo "make bench-compare OLD=rev [NEW=rev]  Go micro-benchmarks at two commits, with benchstat"
	@echo "make lint    gofmt, go vet, CGO-free build"
	@echo "make build   build bin/dal-exec, bin/dal-exec-full, bin/dal-sandbox-init and bin/dald"
	@echo "make install [PREFIX=/usr/local] [DESTDIR=]  install dal-exec, dal-exec-full, dal-sandbox-init and dald into DESTDIR/PREFIX/bin"

# urfave_cli_no_docs leaves out urfave/cli's man-page and Markdown writers,
# which dal does not use and whose Markdown parser costs every dal-exec start
# half a millisecond of package initialisation.
build:
	$(GO) build -trimpath -tags urfave_cli_no_docs -ldflags '$(LDFLAGS)' -o $(BIN)/ ./cmd/dal-exec ./cmd/dal-exec-full ./cmd/dal-sandbox-init ./cmd/dald

# make install puts the four binaries in $(DESTDIR)$(BINDIR): PREFIX is where
# they will live (default /usr/local, so /usr/local/bin), DESTDIR a staging
# root prepended to it, for packaging (make install DESTDIR=/tmp/pkg
# PREFIX=/usr). dal-sandbox-init is the sandbox's init, which dal-exec
# starts from beside itself (else from its own, slower image);
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

test: build test-deps
	$(GO) test -count=1 ./...
	python3 -m unittest discover -s internal/shim/python/tests -t internal/shim/python
	node --test internal/shim/node/test/

# What the tests need beyond Go: Debian packages (installed when run as
# root; otherwise the exact apt-get command is printed and make stops) and
# the npm packages of the end-to-end tests (locally, pinned by their
# package-lock.json). See scripts/test-deps.sh.
test-deps:
	@./scripts/test-deps.sh

# goimports, pinned, installed from the Go module proxy into bin/tools on
# first use (as bench/compare.sh installs benchstat); a new version gets a
# directory of its own, so changing the pin reinstalls it.
GOIMPORTS_VERSION := v0.52.0
GOIMPORTS         := $(BIN)/tools/goimports-$(GOIMPORTS_VERSION)/goimports

lint: $(GOIMPORTS)
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi
	@out=$$($(GOIMPORTS) -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "goimports would change (see $(GOIMPORTS) -d FILE):"; echo "$$out"; exit 1; fi
	$(GO) vet ./...
	CGO_ENABLED=0 $(GO) build ./...

$(GOIMPORTS):
	GOBIN=$(CURDIR)/$(dir $(GOIMPORTS)) $(GO) install golang.org/x/tools/cmd/goimports@$(GOIMPORTS_VERSION)

# Rebuilds the committed eBPF object, its Go bindings and the syscall tables
# (needs clang-14 and llvm-14: apt-get install clang-14 llvm-14), and dal's
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
