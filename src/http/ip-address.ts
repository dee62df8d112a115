// One written form per client address, so that the blacklist, its rules and the trusted proxies
// compare like with like. A listener on "::" sees an IPv4 client as ::ffff:a.b.c.d, and an IPv6
// address has many spellings: compared as typed, a ban on ip:127.0.0.1 let that client through,
// and a trusted proxy on 127.0.0.1 went unrecognised, so its own address was banned for every
// client behind it (session 21).
import { isIP } from 'node:net';

const MAPPED_V4 = /^::ffff:([0-9a-f]{1,4}):([0-9a-f]{1,4})$/;
/** How node writes an IPv4 client's address on a dual-stack listener: every request there. */
const NODE_MAPPED_V4 = /^::ffff:(\d{1,3}\.\d{1,3}\.\d{1,3}\.\d{1,3})$/i;

/**
 * An IPv4 address as it is; an IPv4-mapped IPv6 address as its IPv4; any other IPv6 address in
 * the WHATWG URL's compressed lower-case form; anything else (a zone-scoped address, 'unknown')
 * unchanged.
 */
export function canonicalIp(address: string): string {
  const kind = isIP(address);
  if (kind !== 6) return address;
  // Without a URL parse: that is the one IPv6 form a dual-stack listener sees for every IPv4 client.
  const dotted = NODE_MAPPED_V4.exec(address);
  if (dotted !== null && isIP(dotted[1]!) === 4) return dotted[1]!;
  let host: string;
  try {
    host = new URL(`http://[${address}]`).hostname.slice(1, -1);
  } catch {
    return address;
  }
  const m = MAPPED_V4.exec(host);
  if (m === null) return host;
  const hi = parseInt(m[1]!, 16);
  const lo = parseInt(m[2]!, 16);
  return `${hi >> 8}.${hi & 255}.${lo >> 8}.${lo & 255}`;
}
