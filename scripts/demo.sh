#!/usr/bin/env bash
# A short tour of the HTTP API against a running server: record, look, compile, recall.
# Usage: scripts/demo.sh [BASE_URL]   (set CAIRN_API_KEY if the server requires a key)
set -euo pipefail
BASE=${1:-http://127.0.0.1:8100}
AUTH=()
if [ -n "${CAIRN_API_KEY:-}" ]; then AUTH=(-H "X-API-Key: $CAIRN_API_KEY"); fi
say() { printf '\n\033[1m== %s\033[0m\n' "$*"; }
call() { curl -sS "${AUTH[@]}" -H 'Content-Type: application/json' "$@"; echo; }
pretty() { python3 -m json.tool 2>/dev/null || cat; }

status=$(curl -s -o /dev/null -w '%{http_code}' "${AUTH[@]}" "$BASE/v1/subjects")
if [ "$status" = 401 ] || [ "$status" = 403 ]; then
  # A key was created (that ends open mode for good): the tour needs one of tenant `default`.
  echo "This server requires an API key now (answer $status). Run the tour with one:" >&2
  echo "  export CAIRN_API_KEY=\$(.venv/bin/cairn keys create --tenant default --name tour)" >&2
  exit 0
fi

say "1. Record two conversation turns for subject demo-user"
call -X POST "$BASE/v1/episodes/batch" -d '{"episodes": [
  {"subject_id": "demo-user", "source": "chat", "type": "conversation.turn", "session_id": "s1",
   "occurred_at": "2024-05-01T09:00:00Z", "idempotency_key": "demo-1",
   "payload": {"messages": [{"role": "user", "content": "Hi, I am Dana. I work at Globex as a data engineer."}]}},
  {"subject_id": "demo-user", "source": "chat", "type": "conversation.turn", "session_id": "s1",
   "occurred_at": "2024-05-01T09:01:00Z", "idempotency_key": "demo-2",
   "payload": {"messages": [{"role": "user", "content": "I prefer short answers, and I live in Lisbon."}]}}
]}' | pretty | head -n 12

say "2. The subject's timeline"
call "$BASE/v1/timeline?subject_id=demo-user" | pretty | head -n 20

if curl -fsS "${AUTH[@]}" "$BASE/openapi.json" | grep -q '"/v1/memories/compile"'; then
  say "3. Compile the episodes into memories (no LLM needed)"
  call -X POST "$BASE/v1/memories/compile" -d '{"subject_id": "demo-user"}' | pretty | head -n 25
  say "4. Search the memories"
  call "$BASE/v1/memories/search?subject_id=demo-user&q=where%20does%20Dana%20work" | pretty | head -n 20
fi
if curl -fsS "${AUTH[@]}" "$BASE/openapi.json" | grep -q '"/v1/context"'; then
  say "5. Ask for context for the next model call"
  call -X POST "$BASE/v1/context" -d '{"subject_id": "demo-user", "task": "Where does the user work and live?", "max_tokens": 300}' | pretty
fi
if curl -fsS "${AUTH[@]}" "$BASE/openapi.json" | grep -q '"/v1/memory-templates"'; then
  say "6. Apply the customer-support-handoff template"
  call -X POST "$BASE/v1/memory-templates/customer-support-handoff/apply" -d '{
    "subject_id": "customer:globex", "session_id": "ticket-8842",
    "idempotency_key": "demo-handoff",
    "values": {"customer": "Globex Corp", "issue": "Duplicate charge on the May invoice",
               "next_owner": "Tier 2 billing"}}' | pretty
fi
if curl -fsS "${AUTH[@]}" "$BASE/v1/local/models" 2>/dev/null | grep -q '"memory-ladder"'; then
  say "7. Call the memory-ladder twice (an OpenAI-compatible model; the scripted provider answers)"
  for q in "What is the capital of France?" "What is the capital of Germany?"; do
    call -X POST "$BASE/v1/local/memory-ladder/chat/completions" \
      -d "{\"model\": \"gpt-4o\", \"messages\": [{\"role\": \"user\", \"content\": \"$q\"}]}" \
      | python3 -c 'import json,sys; print(json.load(sys.stdin)["choices"][0]["message"]["content"])'
  done
  say "8. What the ladder wrote to its slate (Memory/facts/core.md)"
  call "$BASE/v1/slates/memory-ladder/Memory/facts/core.md" | pretty
fi
