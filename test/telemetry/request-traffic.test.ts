// The memory trimmer's view of traffic: requests that arrived since its last look and those still
// open, from a real node:http server; health checks and scrapes are left out.
import { createServer, request, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { RequestTraffic } from '../../src/telemetry/request-traffic.ts';

let server: Server | null = null;
afterEach(async () => {
  server?.closeAllConnections();
  await new Promise<void>((resolve) =>
    server === null ? resolve() : server.close(() => resolve()),
  );
  server = null;
});

function get(port: number, path: string): Promise<number> {
  return new Promise((resolve, reject) => {
    const req = request({ port, path, agent: false }, (res) => {
      res.resume();
      res.on('end', () => resolve(res.statusCode ?? 0));
    });
    req.on('error', reject);
    req.end();
  });
}

describe('request traffic', () => {
  it('counts arrivals since the last look and responses not yet closed', async () => {
    const held: ServerResponse[] = [];
    const s = createServer((req, res) => {
      if (req.url === '/hold') held.push(res);
      else res.end('ok');
    });
    server = s;
    const traffic = new RequestTraffic(s);
    await new Promise<void>((resolve) => s.listen(0, '127.0.0.1', resolve));
    const { port } = s.address() as AddressInfo;

    expect(traffic.take()).toEqual({ arrived: 0, open: 0 });
    await get(port, '/v1/models');
    await get(port, '/v1/models');
    expect(traffic.take()).toEqual({ arrived: 2, open: 0 });
    expect(traffic.take()).toEqual({ arrived: 0, open: 0 });

    // A long answer stays open across looks until its response closes.
    const answered = get(port, '/hold');
    while (held.length === 0) await new Promise((r) => setTimeout(r, 5));
    expect(traffic.take()).toEqual({ arrived: 1, open: 1 });
    expect(traffic.take()).toEqual({ arrived: 0, open: 1 });
    held[0]?.end('done');
    expect(await answered).toBe(200);
    expect(traffic.take()).toEqual({ arrived: 0, open: 0 });
  });

  it('leaves out health checks and metric scrapes', async () => {
    const s = createServer((_req, res) => res.end('ok'));
    server = s;
    const traffic = new RequestTraffic(s);
    await new Promise<void>((resolve) => s.listen(0, '127.0.0.1', resolve));
    const { port } = s.address() as AddressInfo;
    await get(port, '/health');
    await get(port, '/metrics');
    expect(traffic.take()).toEqual({ arrived: 0, open: 0 });
  });

  it('closes the count of a request whose client went away', async () => {
    const s = createServer(() => undefined); // never answers
    server = s;
    const traffic = new RequestTraffic(s);
    await new Promise<void>((resolve) => s.listen(0, '127.0.0.1', resolve));
    const { port } = s.address() as AddressInfo;
    const req = request({ port, path: '/v1/chat/completions', agent: false });
    req.on('error', () => undefined);
    req.end();
    while (traffic.take().open === 0) await new Promise((r) => setTimeout(r, 5));
    req.destroy();
    let open = 1;
    for (let i = 0; i < 200 && open > 0; i++) {
      await new Promise((r) => setTimeout(r, 5));
      open = traffic.take().open;
    }
    expect(open).toBe(0);
  });
});
