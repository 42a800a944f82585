#!/usr/bin/env bash
# make fuzz: runs every Go fuzz target of the module (every `func FuzzX(f
# *testing.F)` in a _test.go file that git tracks or would track) for
# FUZZTIME each (default 10s), one after another, so a new target is fuzzed
# without anyone listing it here. FUZZ=regexp keeps the targets whose
# "package FuzzName" matches (FUZZ=wire, FUZZ=FuzzOpen$); FUZZPARALLEL sets
# the number of fuzzing workers (default: go test's, GOMAXPROCS).
#
# A target that finds a failure writes the input under its package's
# testdata/fuzz/FuzzName/ (go test's own corpus, which `go test` then
# replays as a regression test); the script goes on with the other targets
# and exits 1 at the end, naming each target that failed.
set -euo pipefail
cd "$(dirname "$0")/.."
export CGO_ENABLED=0

fuzztime=${FUZZTIME:-10s}
only=${FUZZ:-}
parallel=()
[ -z "${FUZZPARALLEL:-}" ] || parallel=(-parallel "$FUZZPARALLEL")

targets=()
while IFS= read -r file; do
  pkg=./$(dirname "$file")
  while IFS= read -r name; do
    t="$pkg $name"
    if [ -z "$only" ] || [[ $t =~ $only ]]; then
      targets+=("$t")
    fi
  done < <(sed -n 's/^func \(Fuzz[A-Za-z0-9_]*\)(f \*testing\.F).*/\1/p' "$file")
done < <(git ls-files --cached --others --exclude-standard -- '*_test.go' | sort)

if [ ${#targets[@]} -eq 0 ]; then
  echo "fuzz: no fuzz target matches FUZZ=$only" >&2
  exit 2
fi
echo "fuzz: ${#targets[@]} targets, $fuzztime each" >&2

failed=()
for t in "${targets[@]}"; do
  read -r pkg name <<<"$t"
  echo "fuzz: $pkg $name" >&2
  if ! go test "$pkg" -run '^$' -fuzz "^$name\$" -fuzztime "$fuzztime" "${parallel[@]}"; then
    failed+=("$pkg $name")
  fi
done

if [ ${#failed[@]} -gt 0 ]; then
  echo "fuzz: ${#failed[@]} of ${#targets[@]} targets failed (a failing input is saved under its package's testdata/fuzz/; a build failure is printed above):" >&2
  printf '  %s\n' "${failed[@]}" >&2
  exit 1
fi
echo "fuzz: all ${#targets[@]} targets ran $fuzztime without a failure" >&2
