#!/usr/bin/env bash
# Installs what `make test` needs and is not part of Go: Debian packages
# (as root; otherwise it prints the exact command and stops) and the npm
# packages of the end-to-end tests (locally, under e2e/testdata). Run by
# `make test`; safe to run again (it installs only what is missing). With
# --generate it also installs what `make generate` needs (clang-14,
# llvm-14), as .ci/run does. It prints a line as each step starts, on
# stderr: the first run spends minutes in apt-get and npm.
set -euo pipefail
cd "$(dirname "$0")/.."

generate=false
case "${1:-}" in
  "") ;;
  --generate) generate=true ;;
  *) echo "test-deps: unknown argument $1: the one option is --generate (also install clang-14 and llvm-14 for make generate)" >&2; exit 2 ;;
esac
start=$SECONDS
step() { echo "test-deps: $*" >&2; }

for tool in go python3 node npm; do
  command -v "$tool" >/dev/null || { echo "test-deps: $tool is missing: install Go 1.26, python3 and node 20 (with npm) first" >&2; exit 1; }
done

# tool-or-probe → Debian package. The end-to-end tests use pgrep (procps),
# mount (util-linux), ip (iproute2), strace (boundary counts), promtool and a
# real Prometheus (metrics), headless Chromium (report screenshots),
# systemd-analyze (the unit file), httpx/requests/aiohttp with Debian's
# python3 (network clients), git, curl, uuidgen and faketime (determinism
# corpus, bench), gcc and libc6-dev (its C probes, dynamic and -static),
# a one-machine Slurm cluster (slurm-wlm, munge: contrib/slurm's test);
# make generate needs clang-14 and llvm-14 (--generate), no test does.
step "checking the Debian packages the tests use"
missing=()
need() { command -v "$1" >/dev/null 2>&1 || missing+=("$2"); }
need pgrep procps
need mount mount
need ip iproute2
need strace strace
need promtool prometheus
need systemd-analyze systemd
need faketime faketime
need git git
need gcc gcc
[ -f /usr/lib/$(uname -m)-linux-gnu/libc.a ] || missing+=(libc6-dev)
need curl curl
need uuidgen uuid-runtime
if $generate; then
  need clang-14 clang-14
  need llvm-strip-14 llvm-14
fi
[ -x /usr/bin/chromium ] || missing+=(chromium)
need sbatch slurm-wlm
need munged munge
/usr/bin/python3 -c 'import httpx' 2>/dev/null || missing+=(python3-httpx)
/usr/bin/python3 -c 'import requests' 2>/dev/null || missing+=(python3-requests)
/usr/bin/python3 -c 'import aiohttp' 2>/dev/null || missing+=(python3-aiohttp)

if [ ${#missing[@]} -gt 0 ]; then
  if [ "$(id -u)" -ne 0 ]; then
    echo "test-deps: the tests need Debian packages that are not installed; as root run:" >&2
    echo "  apt-get update && apt-get install -y ${missing[*]}" >&2
    exit 1
  fi
  step "apt-get update (the package lists)"
  apt-get update -qq
  step "apt-get install ${missing[*]} (with their dependencies: a few minutes the first time)"
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
else
  step "every Debian package is installed"
fi

# npm packages of the end-to-end tests (the openai, @anthropic-ai/sdk, ai,
# @ai-sdk/openai, @langchain/openai, axios and undici clients of the
# network tests), pinned by their package-lock.json: installed again
# whenever the lock file changed.
for d in e2e/testdata/*/; do
  [ -f "$d/package-lock.json" ] || continue
  if ! cmp -s "$d/package-lock.json" "$d/node_modules/.dal-installed-lock" 2>/dev/null; then
    step "npm ci in ${d%/} (the clients of the network tests, pinned)"
    npm ci --prefix "$d" --no-audit --no-fund --loglevel=error
    cp "$d/package-lock.json" "$d/node_modules/.dal-installed-lock"
  fi
done

# The Go modules of the end-to-end tests' own modules (the official Go
# SDK's agent, e2e/testdata/openaigo), pinned by their go.sum, fetched
# through the Go module proxy into the module cache.
for d in e2e/testdata/*/; do
  [ -f "$d/go.mod" ] || continue
  step "go mod download in ${d%/}"
  (cd "$d" && go mod download)
done
step "done in $((SECONDS - start)) s"
