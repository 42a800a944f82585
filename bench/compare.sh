#!/usr/bin/env bash
# make bench-compare OLD=<rev> [NEW=<rev>]: the Go micro-benchmarks of the
# hot paths (clock read, seed derivation, frame codec, HAR match) at two
# commits, compared with benchstat. NEW defaults to the working tree,
# uncommitted changes included. Each side's test binaries are built once
# from `git archive` of its commit (the repository is not touched), then
# run alternately COUNT times (default 6), so drift in machine load hits
# both alike. benchstat is installed into bin/tools from the Go module
# proxy on first use. Results: bench/out/compare/.
set -euo pipefail
cd "$(dirname "$0")/.."
export CGO_ENABLED=0

old=${OLD:-}
new=${NEW:-}
count=${COUNT:-6}
benchtime=${BENCHTIME:-500ms}
benchstat_version=${BENCHSTAT_VERSION:-v0.0.0-20260908200009-22c9c6c9d4da}
if [ -z "$old" ]; then
  echo "usage: make bench-compare OLD=<rev> [NEW=<rev>]   (NEW defaults to the working tree)" >&2
  exit 2
fi
pkgs=(./agent ./vclock ./seedrng ./internal/wire ./internal/netcap/har)
pattern='^Benchmark(NowStrict|TimeNow|RealtimeNS|Derive4K|Float64|FrameCodec|DecodeTicksPut|IndexNext|Key)$'

outdir=bench/out/compare
mkdir -p "$outdir" bin/tools
tools=$(cd bin/tools && pwd)
if [ ! -x "$tools/benchstat" ]; then
  echo "bench-compare: installing benchstat $benchstat_version into bin/tools" >&2
  GOBIN=$tools go install "golang.org/x/perf/cmd/benchstat@$benchstat_version"
fi

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# tree REV DIR: the files of commit REV in DIR.
tree() {
  local rev
  rev=$(git rev-parse --verify --quiet "$1^{commit}") || { echo "bench-compare: $1 is not a commit" >&2; exit 2; }
  mkdir -p "$2"
  git archive --format=tar "$rev" | tar -x -C "$2"
  echo "$1 ($(git rev-parse --short "$rev"))"
}
old_label=$(tree "$old" "$tmp/old")
if [ -n "$new" ]; then
  new_label=$(tree "$new" "$tmp/new")
else
  ln -s "$PWD" "$tmp/new"
  new_label="the working tree"
  [ -z "$(git status --porcelain -- '*.go' go.mod go.sum)" ] || new_label="the working tree (with uncommitted changes)"
fi
echo "bench-compare: OLD = $old_label, NEW = $new_label; $count alternating runs of -benchtime $benchtime" >&2

# Build each side's test binaries once; a package missing on a side is
# left out of the comparison, said so.
present=()
for pkg in "${pkgs[@]}"; do
  name=$(echo "${pkg#./}" | tr / -)
  ok=1
  for side in old new; do
    if [ ! -d "$tmp/$side/$pkg" ]; then
      echo "bench-compare: $pkg does not exist in $side: left out" >&2
      ok=0
      continue
    fi
    (cd "$tmp/$side" && go test -c -o "$tmp/bin/$side-$name.test" "$pkg") || { echo "bench-compare: the tests of $pkg do not build in $side" >&2; exit 1; }
  done
  [ "$ok" = 1 ] && present+=("$pkg")
done

: >"$outdir/old.txt"
: >"$outdir/new.txt"
for i in $(seq "$count"); do
  echo "bench-compare: run $i of $count" >&2
  for pkg in "${present[@]}"; do
    name=$(echo "${pkg#./}" | tr / -)
    for side in old new; do
      # in the package's directory: benchmarks read testdata/ from there
      (cd "$tmp/$side/$pkg" && "$tmp/bin/$side-$name.test" -test.run '^$' -test.bench "$pattern" \
        -test.benchtime "$benchtime" -test.count 1 -test.benchmem) >>"$outdir/$side.txt"
    done
  done
done

{
  echo "OLD = $old_label; NEW = $new_label; $(uname -r), $(nproc) CPUs; -count $count, -benchtime $benchtime"
  echo
  "$tools/benchstat" "old=$outdir/old.txt" "new=$outdir/new.txt"
} | tee "$outdir/benchstat.txt"
