// Request ids: an incoming x-request-id is kept when it is well formed (so a caller's id follows
// the request through logs, traces and the usage log); otherwise a new one is made.
import { randomBytes } from 'node:crypto';

const VALID = /^[A-Za-z0-9._:-]{8,128}$/;
let counter = 0;
let prefix = randomBytes(6).toString('hex');

/** req_<12 hex of process randomness><counter in base 36>: unique without a syscall per request. */
export function newRequestId(): string {
  counter++;
  if (counter > 2_000_000_000) {
    counter = 0;
    prefix = randomBytes(6).toString('hex');
  }
  return `req_${prefix}${counter.toString(36).padStart(6, '0')}`;
}

export function requestIdFrom(header: string | string[] | undefined): string {
  return typeof header === 'string' && VALID.test(header) ? header : newRequestId();
}
