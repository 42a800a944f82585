#!/usr/bin/env bash
# startup.sh: the Node shim's start-up, measured from before its --require to
# after it on the native clock, for one or more shim trees side by side in
# the same dal-exec session, interleaved round by round. Prints the minimum
# and the median per tree (docs/benchmarks.md, "Runtime shims").
#
#   internal/shim/node/test/startup.sh [-n ROUNDS] [-m MODE] [-x DAL_EXEC] DIR... [-- NODE_ARGS...]
#
# DIR is a node/ shim directory (this one: internal/shim/node; an older one:
# git archive <commit> internal/shim/node | tar -x -C /tmp/old). Each is
# copied and its code cache made with its own codecache.js, as dal-exec does
# at installation. NODE_ARGS default to -e 0.
#
#   internal/shim/node/test/startup.sh -n 15 /tmp/old/internal/shim/node internal/shim/node
set -euo pipefail

rounds=15
mode=strict
dalexec=${DAL_EXEC:-$(cd "$(dirname "$0")/../../../.." && pwd)/bin/dal-exec}
while getopts n:m:x: opt; do
  case $opt in
    n) rounds=$OPTARG ;;
    m) mode=$OPTARG ;;
    x) dalexec=$OPTARG ;;
    *) echo "usage: $0 [-n ROUNDS] [-m MODE] [-x DAL_EXEC] DIR... [-- NODE_ARGS...]" >&2; exit 2 ;;
  esac
done
shift $((OPTIND - 1))
dirs=()
while [ $# -gt 0 ] && [ "$1" != "--" ]; do dirs+=("$1"); shift; done
[ "${1:-}" = "--" ] && shift
args=("$@")
[ ${#args[@]} -eq 0 ] && args=(-e 0)
if [ ${#dirs[@]} -eq 0 ]; then
  echo "$0: name at least one shim directory (internal/shim/node)" >&2
  exit 2
fi
if [ ! -x "$dalexec" ]; then
  echo "$0: $dalexec is not built: go build -o bin/ ./cmd/... (or pass -x)" >&2
  exit 2
fi

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
for i in "${!dirs[@]}"; do
  mkdir -p "$work/$i"
  cp -r "${dirs[$i]}" "$work/$i/node"
  rm -rf "$work/$i/node/test" "$work/$i/node/.v8"
  node "$work/$i/node/codecache.js"
done
cat >"$work/t0.js" <<'EOF'
globalThis.__dalT0 = process.hrtime.bigint();
globalThis.__dalHr = process.hrtime.bigint;
EOF
cat >"$work/t1.js" <<'EOF'
require('fs').writeSync(2, `T ${Number(globalThis.__dalHr() - globalThis.__dalT0) / 1e6}\n`);
EOF
cat >"$work/rounds.sh" <<'EOF'
work=$1; rounds=$2; n=$3; shift 3
for r in $(seq "$rounds"); do
  for i in $(seq 0 $((n - 1))); do
    printf '%s ' "$i" >&2
    NODE_OPTIONS="--require $work/t0.js --require $work/$i/node/dal-register.js --require $work/t1.js" node "$@" >/dev/null
  done
done
EOF
"$dalexec" run --mode "$mode" --keep-env TMPDIR -- bash "$work/rounds.sh" "$work" "$rounds" "${#dirs[@]}" "${args[@]}" 2>"$work/times" || true
node - "$work/times" "${dirs[@]}" <<'EOF'
const [file, ...dirs] = process.argv.slice(2);
const times = dirs.map(() => []);
for (const line of require('fs').readFileSync(file, 'utf8').split('\n')) {
  const m = /^(\d+) T ([\d.]+)$/.exec(line);
  if (m) times[Number(m[1])].push(Number(m[2]));
  else if (line.trim()) process.stderr.write(line + '\n');
}
dirs.forEach((dir, i) => {
  const t = times[i].sort((a, b) => a - b);
  if (t.length === 0) { console.log(`${dir}: no measurement`); return; }
  const med = t.length % 2 ? t[(t.length - 1) / 2] : (t[t.length / 2 - 1] + t[t.length / 2]) / 2;
  console.log(`${dir}: min ${t[0].toFixed(2)} ms, median ${med.toFixed(2)} ms (${t.length} runs)`);
});
EOF
