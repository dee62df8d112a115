// Admin bearer tokens: the full token may read and write, the read-only token may only read.
// Tokens are compared as sha256 digests with timingSafeEqual, so timing reveals nothing of them.
import { createHash, timingSafeEqual } from 'node:crypto';
import { GatewayError } from '../http/errors.ts';
import type { GatewayEntry } from '../table/types.ts';

export type AdminPrivilege = 'full' | 'readonly';

interface Digests {
  full: Buffer | null;
  readonly: Buffer | null;
}

const sha256 = (text: string): Buffer => createHash('sha256').update(text).digest();

// One digest pair per compiled table (the admin object is frozen and swapped whole on reload).
const cache = new WeakMap<GatewayEntry['admin'], Digests>();

function digestsOf(admin: GatewayEntry['admin']): Digests {
  let d = cache.get(admin);
  if (d === undefined) {
    d = {
      full: admin.token === null ? null : sha256(admin.token),
      readonly: admin.readonlyToken === null ? null : sha256(admin.readonlyToken),
    };
    cache.set(admin, d);
  }
  return d;
}

function bearer(header: string | undefined): string | null {
  if (header === undefined) return null;
  const m = /^Bearer\s+(\S+)\s*$/i.exec(header);
  return m === null ? null : (m[1] ?? null);
}

/** The privilege the Authorization header grants; throws 401 invalid_token when it grants none. */
export function adminPrivilege(
  header: string | undefined,
  admin: GatewayEntry['admin'],
): AdminPrivilege {
  const digests = digestsOf(admin);
  if (digests.full === null) {
    throw new GatewayError(
      'invalid_token',
      'the admin API is disabled: SWITCHYARD_ADMIN_TOKEN is not set (gateway.admin.token)',
    );
  }
  const token = bearer(header);
  if (token === null) {
    throw new GatewayError(
      'invalid_token',
      'send the admin token as Authorization: Bearer <token>',
    );
  }
  const given = sha256(token);
  // Both comparisons always run, so the time taken does not tell which token was close.
  const isFull = timingSafeEqual(given, digests.full);
  const isReadonly = digests.readonly !== null && timingSafeEqual(given, digests.readonly);
  if (isFull) return 'full';
  if (isReadonly) return 'readonly';
  throw new GatewayError('invalid_token', 'the admin token is invalid');
}
