// Supplier-style credential checks the test mock makes (the demo takes any key): a Bearer key for
// OpenAI routes; x-api-key (or Bearer, as @anthropic-ai/sdk 1.x sends) plus anthropic-version.

import type { IncomingHttpHeaders } from 'node:http';

/** 2023-06-01 is what the gateway sends; 2026-10-21 is what @anthropic-ai/sdk 1.x sends. */
export const ANTHROPIC_VERSIONS: readonly string[] = ['2023-06-01', '2026-10-21'];

export interface AuthFailure {
  status: number;
  message: string;
}

export function checkBearer(
  headers: IncomingHttpHeaders,
  keys: ReadonlySet<string>,
): AuthFailure | null {
  const auth = headers.authorization;
  const key = auth !== undefined && auth.startsWith('Bearer ') ? auth.slice(7) : null;
  if (key === null) return { status: 401, message: "You didn't provide an API key." };
  if (!keys.has(key)) return { status: 401, message: 'Incorrect API key provided.' };
  return null;
}

/**
 * The spec's credential for messages is `x-api-key` with `anthropic-version: 2023-06-01`; the
 * stock @anthropic-ai/sdk 1.x sends `Authorization: Bearer` with version 2026-10-21 instead.
 * Both are accepted, as Anthropic does; any other version, or none, is a 400.
 */
export function checkAnthropicAuth(
  headers: IncomingHttpHeaders,
  keys: ReadonlySet<string>,
): AuthFailure | null {
  const apiKey = headers['x-api-key'];
  const auth = headers.authorization;
  const key =
    typeof apiKey === 'string'
      ? apiKey
      : auth !== undefined && auth.startsWith('Bearer ')
        ? auth.slice(7)
        : null;
  if (key === null || !keys.has(key)) {
    return { status: 401, message: 'invalid x-api-key' };
  }
  const version = headers['anthropic-version'];
  if (typeof version !== 'string' || !ANTHROPIC_VERSIONS.includes(version)) {
    return {
      status: 400,
      message: `anthropic-version: header is required and must be one of ${ANTHROPIC_VERSIONS.join(', ')}`,
    };
  }
  return null;
}
