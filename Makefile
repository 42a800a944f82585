# dal — build, test, benchmark. `make help` lists the targets.
GO        ?= go
BIN       := bin
LDFLAGS   := -s -w
export CGO_ENABLED := 0

.PHONY: help build test test-go test-python test-node bench lint demo clean fuzz

help:
	@echo "make demo    build, then run the example agents twice in strict mode and compare"
	@echo "make test    build and run every test (Go, Python shim, Node shim, end to end)"
	@echo "make bench   run the benchmarks and regenerate bench/out/report.md"
	@echo "make lint    gofmt, go vet, CGO-free build"
	@echo "make build   build bin/dal-exec and bin/dald"

build:
	$(GO) build -trimpath -ldflags '$(LDFLAGS)' -o $(BIN)/ ./cmd/dal-exec ./cmd/dald

test: build
	$(GO) test -count=1 ./...
	python3 -m unittest discover -s internal/shim/python/tests -t internal/shim/python
	node --test internal/shim/node/test/

lint:
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...
	CGO_ENABLED=0 $(GO) build ./...

fuzz:
	$(GO) test ./internal/wire -run '^$$' -fuzz FuzzDecode -fuzztime 60s

bench: build
	./bench/run.sh

demo: build
	./examples/demo.sh

clean:
	rm -rf $(BIN) bench/out
