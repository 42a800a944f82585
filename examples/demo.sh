#!/usr/bin/env bash
# The demo `make demo` runs: each example agent twice in strict mode with the
# same seed (outputs must be byte-identical), then once with another seed.
set -euo pipefail
cd "$(dirname "$0")/.."
DAL=${DAL:-bin/dal-exec}
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT

go build -o "$out/go-agent" ./examples/go

run() { # name, seed, command...
  local name=$1 seed=$2; shift 2
  "$DAL" run --mode strict --seed "$seed" -- "$@" >"$out/$name.$seed.$RANDOM" 2>&1
}

status=0
for agent in "python:python3 examples/python/agent.py" "node:node examples/node/agent.js" \
             "multiproc:python3 examples/multiproc/parent.py" "go:$out/go-agent"; do
  name=${agent%%:*}; cmd=${agent#*:}
  echo "=== $name: dal-exec run --mode strict --seed 7 -- $cmd (twice)"
  # shellcheck disable=SC2086
  "$DAL" run --mode strict --seed 7 -- $cmd >"$out/$name.a" 2>&1
  # shellcheck disable=SC2086
  "$DAL" run --mode strict --seed 7 -- $cmd >"$out/$name.b" 2>&1
  # shellcheck disable=SC2086
  "$DAL" run --mode strict --seed 8 -- $cmd >"$out/$name.c" 2>&1
  cat "$out/$name.a"
  if cmp -s "$out/$name.a" "$out/$name.b"; then
    echo "--- identical: both runs printed the same $(wc -c <"$out/$name.a") bytes (sha256 $(sha256sum "$out/$name.a" | cut -c1-16))"
  else
    echo "--- DIFFERENT: the two strict runs disagree:"; diff "$out/$name.a" "$out/$name.b" || true
    status=1
  fi
  echo "--- with --seed 8, these lines change:"
  changed=$(diff "$out/$name.a" "$out/$name.c" | grep '^>' | head -8 || true)
  echo "${changed:-    (none)}"
  echo
done
exit $status
