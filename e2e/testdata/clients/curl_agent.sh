# curl: two plain calls (--compressed; prints Content-Encoding and Content-Length),
# a streamed one (-N, written as it arrives), a tool call, and a stream the agent
# leaves after its first line (curl, blocked on the held stream, is stopped); then
# the same over the Responses API and Anthropic's messages API, whose stream closed
# early is left at its first text delta (curl reads every event the server sent as
# it comes: stopping it at an earlier line would leave how many it had read to chance).
set -eu
h() { curl -sS --max-time 30 -H "Authorization: Bearer $OPENAI_API_KEY" -H 'Content-Type: application/json' "$@" "$LLM_BASE/chat/completions"; }
responses() { curl -sS --max-time 30 -H "Authorization: Bearer $OPENAI_API_KEY" -H 'Content-Type: application/json' "$@" "$LLM_BASE/responses"; }
messages() {
  curl -sS --max-time 30 -H "x-api-key: $ANTHROPIC_API_KEY" -H 'anthropic-version: 2023-06-01' -H 'Content-Type: application/json' \
    "$@" "$ANTHROPIC_BASE_URL/v1/messages"
}
for t in hello again; do
  h --compressed -w ' ce: %header{content-encoding} length: %header{content-length}\n' \
    -d "{\"model\":\"test-model\",\"messages\":[{\"role\":\"user\",\"content\":\"$t\"}],\"temperature\":0}"
done
h -N -d '{"model":"test-model","stream":true,"messages":[{"role":"user","content":"stream please"}]}'
h -d '{"model":"test-model","messages":[{"role":"user","content":"weather?"}],"tools":[{"type":"function","function":{"name":"get_weather","parameters":{"type":"object"}}}]}'
echo
d=$(mktemp -d)
mkfifo "$d/early"
h -N -d '{"model":"test-model","stream":true,"messages":[{"role":"user","content":"close early"}]}' >"$d/early" &
IFS= read -r line <"$d/early"
echo "early read: $line"
kill $!
wait $! 2>/dev/null || echo "curl stopped: $?" # 143: by SIGTERM, as asked
for api in responses messages; do
  if [ $api = responses ]; then
    ask() { echo "{\"model\":\"test-model\",\"input\":\"$1\"${2-}}"; }
    tool=',"tools":[{"type":"function","name":"get_weather","parameters":{"type":"object"}}]'
  else
    ask() { echo "{\"model\":\"test-model\",\"max_tokens\":64,\"messages\":[{\"role\":\"user\",\"content\":\"$1\"}]${2-}}"; }
    tool=',"tools":[{"name":"get_weather","input_schema":{"type":"object"}}]'
  fi
  echo "$api plain: $($api --compressed -d "$(ask hello)")"
  $api -N -d "$(ask 'stream please' ',"stream":true')" | sed "s/^/$api read: /"
  echo "$api tool: $($api -d "$(ask 'weather?' "$tool")")"
  mkfifo "$d/$api"
  $api -N -d "$(ask 'close early' ',"stream":true')" >"$d/$api" &
  while IFS= read -r line; do
    echo "$api early read: $line"
    case $line in *[._]delta*) break ;; esac
  done <"$d/$api"
  kill $!
  wait $! 2>/dev/null || echo "curl stopped: $?"
done
rm -r "$d"
echo closed early
