// The client's address as authentication reads it: the connection's peer in canonical form,
// worked out once a connection, and X-Forwarded-For read afresh on every request.
import type { Socket } from 'node:net';
import { describe, expect, it } from 'vitest';
import { clientIp, type RequestHead } from '../../src/http/authenticate.ts';
import type { RoutingTable } from '../../src/table/types.ts';

function tableTrusting(...proxies: string[]): RoutingTable {
  return { gateway: { trustedProxies: proxies } } as unknown as RoutingTable;
}

/** A socket whose peer address counts its reads. */
function socketAt(address: string): { socket: Socket; reads: () => number } {
  let reads = 0;
  const socket = {
    get remoteAddress() {
      reads++;
      return address;
    },
  } as unknown as Socket;
  return { socket, reads: () => reads };
}

const head = (socket: Socket, forwardedFor?: string): RequestHead =>
  ({
    socket,
    headers: forwardedFor === undefined ? {} : { 'x-forwarded-for': forwardedFor },
  }) as RequestHead;

describe('clientIp', () => {
  it("reads a connection's peer once, in canonical form, for every request on it", () => {
    const { socket, reads } = socketAt('::ffff:127.0.0.1');
    const table = tableTrusting();
    expect(clientIp(head(socket), table)).toBe('127.0.0.1');
    expect(clientIp(head(socket), table)).toBe('127.0.0.1');
    expect(clientIp(head(socket, '198.51.100.9'), table)).toBe('127.0.0.1');
    expect(reads()).toBe(1);
    // Another connection has its own peer.
    expect(clientIp(head(socketAt('2001:DB8:0:0:0:0:0:1').socket), table)).toBe('2001:db8::1');
  });

  it("reads X-Forwarded-For afresh on each request of a trusted proxy's connection", () => {
    const { socket, reads } = socketAt('::ffff:10.0.0.2');
    const table = tableTrusting('10.0.0.2');
    expect(clientIp(head(socket, '198.51.100.1'), table)).toBe('198.51.100.1');
    expect(clientIp(head(socket, '198.51.100.2, 10.0.0.2'), table)).toBe('198.51.100.2');
    expect(clientIp(head(socket), table)).toBe('10.0.0.2');
    expect(reads()).toBe(1);
    // A reload that stops trusting the proxy applies to its open connection at once.
    expect(clientIp(head(socket, '198.51.100.1'), tableTrusting())).toBe('10.0.0.2');
  });
});
