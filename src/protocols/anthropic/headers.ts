// Headers of a call to an Anthropic messages upstream (the version the spec pins: 2023-06-01).

export const ANTHROPIC_VERSION = '2023-06-01';

/** `beta` forwards the client's anthropic-beta header (comma list) when it sent one. */
export function anthropicHeaders(
  apiKey: string,
  beta: string | null = null,
): Record<string, string> {
  const headers: Record<string, string> = {
    'x-api-key': apiKey,
    'anthropic-version': ANTHROPIC_VERSION,
    'content-type': 'application/json',
  };
  if (beta !== null) headers['anthropic-beta'] = beta;
  return headers;
}
