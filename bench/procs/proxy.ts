// The floor of proxying in Node: node:http in front of one undici Pool, bodies piped both ways,
// hop-by-hop headers dropped, and nothing else (no parsing, no auth, no accounting).
import { createServer, type IncomingHttpHeaders } from 'node:http';
import type { AddressInfo } from 'node:net';
import { pipeline } from 'node:stream';
import { Pool } from 'undici';
import { childArgs, serveParent, toParent } from './ipc.ts';

export interface ProxyArgs {
  /** Upstream origin, e.g. http://127.0.0.1:41234. */
  upstream: string;
  key: string;
}

const HOP_BY_HOP = new Set(['connection', 'keep-alive', 'transfer-encoding', 'host', 'upgrade']);

function forwardable(headers: IncomingHttpHeaders): Record<string, string | string[]> {
  const out: Record<string, string | string[]> = {};
  for (const name in headers) {
    const v = headers[name];
    if (v !== undefined && !HOP_BY_HOP.has(name)) out[name] = v;
  }
  return out;
}

const args = childArgs<ProxyArgs>();
// No connection cap: the gateway's pool is the thing under test, not this one.
const pool = new Pool(args.upstream, {
  connections: null,
  pipelining: 1,
  keepAliveTimeout: 30_000,
});

const server = createServer((req, res) => {
  pool.request(
    {
      method: req.method === 'GET' ? 'GET' : 'POST',
      path: req.url ?? '/',
      headers: forwardable(req.headers),
      body: req.method === 'GET' ? null : req,
    },
    (err, data) => {
      if (err !== null) {
        if (!res.headersSent) res.writeHead(502, { 'content-type': 'application/json' });
        res.end('{"error":{"message":"proxy: upstream failed","type":"upstream_error"}}');
        return;
      }
      const headers: Record<string, string | string[]> = {};
      for (const name in data.headers) {
        const v = data.headers[name];
        if (v !== undefined && !HOP_BY_HOP.has(name)) headers[name] = v;
      }
      res.writeHead(data.statusCode, headers);
      pipeline(data.body, res, () => undefined);
    },
  );
});
server.keepAliveTimeout = 65_000;
await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
const port = (server.address() as AddressInfo).port;

serveParent(async () => {
  server.closeAllConnections();
  await new Promise<void>((resolve) => server.close(() => resolve()));
  await pool.close();
});
toParent({ type: 'ready', url: `http://127.0.0.1:${port}`, key: args.key });
