// Drives `aip serve`'s MCP endpoint with the official TypeScript SDK clients (pinned in .ci/run:
// @modelcontextprotocol/client 2.4.0 = "v2", @modelcontextprotocol/sdk 1.32.2 = "v1").
//
// Usage: node mcp_probe.cjs NODE_MODULES URL TOKEN SDK TRANSPORT [auto]
//   SDK: v1 | v2; TRANSPORT: streamable | sse; "auto": v2's opt-in server/discover probe.
// Lists tools, calls a tool, an approval-gated tool, a keyed tool twice, aborts a long call, and
// tries a wrong token. Prints one JSON object; exit 0 when the probe ran to the end, 2 otherwise.
'use strict';
const path = require('node:path');
const { createRequire } = require('node:module');

const [nodeModules, url, token, sdk, transport, auto] = process.argv.slice(2);
const load = createRequire(path.join(path.resolve(nodeModules), 'probe.cjs'));

function connectArgs(tok) {
  if (sdk === 'v2') {
    const m = load('@modelcontextprotocol/client');
    const options = { authProvider: { token: async () => tok } };
    const t = transport === 'sse'
      ? new m.SSEClientTransport(new URL(url), options)
      : new m.StreamableHTTPClientTransport(new URL(url), options);
    const client = new m.Client({ name: 'aip-probe-v2', version: '1' },
      auto === 'auto' ? { versionNegotiation: { mode: 'auto' } } : {});
    return { client, t };
  }
  const { Client } = load('@modelcontextprotocol/sdk/client/index.js');
  const headers = { Authorization: `Bearer ${tok}` };
  let t;
  if (transport === 'sse') {
    const { SSEClientTransport } = load('@modelcontextprotocol/sdk/client/sse.js');
    t = new SSEClientTransport(new URL(url), {
      requestInit: { headers },
      eventSourceInit: { fetch: (u, init) => fetch(u, { ...init, headers: { ...(init && init.headers), ...headers } }) },
    });
  } else {
    const { StreamableHTTPClientTransport } = load('@modelcontextprotocol/sdk/client/streamableHttp.js');
    t = new StreamableHTTPClientTransport(new URL(url), { requestInit: { headers } });
  }
  return { client: new Client({ name: 'aip-probe-v1', version: '1' }), t };
}

const metaOf = (r) => (r._meta && r._meta['dev.aip/aip']) || {};

async function call(client, params, signal) {
  // v1's callTool takes a result schema second; v2's takes options second.
  if (sdk === 'v1') return client.callTool(params, undefined, signal ? { signal } : undefined);
  return client.callTool(params, signal ? { signal } : undefined);
}

async function probe() {
  const out = { sdk, transport, auto: auto === 'auto' };
  const { client, t } = connectArgs(token);
  await client.connect(t);
  out.protocol_version = client.getNegotiatedProtocolVersion
    ? client.getNegotiatedProtocolVersion()
    : (t.protocolVersion || null);
  out.server_name = (client.getServerVersion() || {}).name;
  const tools = await client.listTools();
  out.tools = tools.tools.map((x) => x.name);
  const echo = await call(client, { name: 'demo_echo', arguments: { hello: 'ts' } });
  out.echo = { is_error: !!echo.isError, structured: echo.structuredContent ?? null, action_id: metaOf(echo).action_id };
  const status = await call(client, { name: 'aip_action_status', arguments: { action_id: metaOf(echo).action_id } });
  out.facade = { is_error: !!status.isError, text: status.content && status.content[0] ? status.content[0].text : null };
  const transfer = await call(client, { name: 'demo_transfer', arguments: { amount_minor: 300, to: 'acct-ts' } });
  out.transfer = { is_error: !!transfer.isError, texts: transfer.content.filter((c) => c.type === 'text').map((c) => c.text) };
  out.keyed = [];
  for (let i = 0; i < 2; i++) {
    const r = await call(client, {
      name: 'demo_book',
      arguments: { name: 'Ts', party_size: 2, time: '18:00' },
      _meta: { 'dev.aip/idempotency_key': `ts-${sdk}-${transport}-${auto || 'default'}` },
    });
    out.keyed.push({ is_error: !!r.isError, action_id: metaOf(r).action_id });
  }
  const steps = [];
  const onprogress = (p) => steps.push(p.progress);
  const counted = sdk === 'v1'
    ? await client.callTool({ name: 'demo_count', arguments: { n: 5, interval_ms: 5 } }, undefined, { onprogress })
    : await client.callTool({ name: 'demo_count', arguments: { n: 5, interval_ms: 5 } }, { onprogress });
  out.progress = { is_error: !!counted.isError, steps };
  const abort = new AbortController();
  setTimeout(() => abort.abort('probe cancels'), 1000);
  try {
    await call(client, { name: 'demo_sleep', arguments: { ms: 30000 } }, abort.signal);
    out.cancel = 'completed';
  } catch (e) {
    out.cancel = 'aborted';
  }
  await new Promise((r) => setTimeout(r, 500));
  await client.close();
  try {
    const bad = connectArgs('wrong-token');
    await bad.client.connect(bad.t);
    await bad.client.listTools();
    out.wrong_token = 'connected';
  } catch (e) {
    out.wrong_token = (e && e.constructor && e.constructor.name) || 'error';
  }
  return out;
}

probe().then(
  (out) => { process.stdout.write(JSON.stringify(out) + '\n'); process.exit(0); },
  (e) => { process.stdout.write(JSON.stringify({ error: String(e && e.stack || e) }) + '\n'); process.exit(2); },
);
