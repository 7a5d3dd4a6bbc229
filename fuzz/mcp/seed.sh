#!/usr/bin/env bash
# Seeds the mcp_message corpus with messages the real clients send (not committed).
set -euo pipefail
dir="$(dirname "$0")/corpus/mcp_message"
mkdir -p "$dir"
printf '%s' '{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"c","version":"1"}}}' > "$dir/initialize"
printf '%s' '{"jsonrpc":"2.0","method":"notifications/initialized"}' > "$dir/initialized"
printf '%s' '{"jsonrpc":"2.0","id":"a","method":"tools/call","params":{"name":"demo_echo","arguments":{"x":1},"_meta":{"progressToken":7}}}' > "$dir/call"
printf '%s' '[{"jsonrpc":"2.0","id":1,"method":"ping"},{"jsonrpc":"2.0","id":2,"result":{}}]' > "$dir/batch"
