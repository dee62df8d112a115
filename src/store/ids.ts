// Random identifiers in base62 from crypto.randomBytes: 'acct_…', 'key_…', instance ids.
// 16 characters = 95 bits, so collisions are not a concern at any realistic count.

import { randomBytes } from 'node:crypto';

const ALPHABET = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789';
// 248 = 4 × 62: bytes at or above it are dropped so every character is equally likely.
const UNBIASED_LIMIT = 248;

export function randomBase62(length: number): string {
  let out = '';
  while (out.length < length) {
    for (const byte of randomBytes(length * 2)) {
      if (byte >= UNBIASED_LIMIT) continue;
      out += ALPHABET[byte % 62];
      if (out.length === length) break;
    }
  }
  return out;
}

export function newAccountId(): string {
  return 'acct_' + randomBase62(16);
}

export function newKeyId(): string {
  return 'key_' + randomBase62(16);
}
