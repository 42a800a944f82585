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

# Record an agent's LLM calls against a local OpenAI-compatible server, stop
# the server, replay offline (as a normal user the sandbox runs in a user
# namespace).
echo "=== network: dal-exec record an agent's LLM calls, stop the server, dal-exec replay offline"
python3 e2e/testdata/llm_server.py --key-value sk-demo-secret >"$out/port" 2>/dev/null &
server=$!
for _ in $(seq 50); do [ -s "$out/port" ] && break; sleep 0.1; done
export OPENAI_API_KEY=sk-demo-secret LLM_BASE="http://127.0.0.1:$(cat "$out/port")/v1"
DAL_KEY="$out/key" "$DAL" record --out "$out/llm-bundle" --keep-env OPENAI_API_KEY --keep-env LLM_BASE \
  --allow-loopback "127.0.0.1:$(cat "$out/port")" \
  -- python3 e2e/testdata/llm_agent_urllib.py 2>"$out/record.log"
kill "$server"; wait "$server" 2>/dev/null || true
echo "--- server stopped; bundle: $(ls "$out/llm-bundle" | tr '\n' ' ')"
if grep -rq sk-demo-secret "$out/llm-bundle"; then echo "--- the API key reached the bundle!"; status=1
else echo "--- the API key is nowhere in the bundle (redacted)"; fi
DAL_KEY="$out/key" "$DAL" replay "$out/llm-bundle" || status=1

echo
echo "=== refine: a loop of 4 drafts whose quality peaks at draft 2; dal applies the best, not the last"
mkdir -p "$out/refine-ws" && cp examples/refine/refine.py "$out/refine-ws/"
dal_abs=$(realpath "$(command -v "$DAL")")
(cd "$out/refine-ws" && DAL_KEY="$out/key" DAL_CHECKPOINTS="$out/checkpoints" \
  "$dal_abs" record --out "$out/refine-bundle" -- python3 refine.py) || status=1
echo "--- out/summary.md now holds: $(cat "$out/refine-ws/out/summary.md")"
sed -n '/## Quality scores/,/## Artifacts applied/p' "$out/refine-bundle/iterations/selection-report.md"
echo "--- its checkpoints, in the store:"
DAL_CHECKPOINTS="$out/checkpoints" "$DAL" checkpoint list || status=1
DAL_KEY="$out/key" "$DAL" replay --workspace "$out/refine-ws" "$out/refine-bundle" || status=1
exit $status
