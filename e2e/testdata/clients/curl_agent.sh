# curl: two plain calls (--compressed; prints Content-Encoding and Content-Length),
# a streamed one (-N, written as it arrives), a tool call, and a stream the agent
# leaves after its first line (curl, blocked on the held stream, is stopped).
set -eu
h() { curl -sS --max-time 30 -H "Authorization: Bearer $OPENAI_API_KEY" -H 'Content-Type: application/json' "$@" "$LLM_BASE/chat/completions"; }
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
rm -r "$d"
echo closed early
