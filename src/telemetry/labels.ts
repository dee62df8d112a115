// The bounded vocabularies that telemetry labels and span attributes draw from. A metric label is
// always one of these unions or a name from the compiled table: never a request id or a key.

/** How one upstream attempt ended; `ok` is the only outcome that is not retried. */
export type UpstreamOutcome =
  'ok' | 'http_5xx' | 'http_429' | 'http_4xx' | 'timeout' | 'connect_error' | 'stream_cut';

export const UPSTREAM_OUTCOMES: readonly UpstreamOutcome[] = [
  'ok',
  'http_5xx',
  'http_429',
  'http_4xx',
  'timeout',
  'connect_error',
  'stream_cut',
];

/** Why an attempt was followed by another one (any outcome but `ok`). */
export type RetryReason = Exclude<UpstreamOutcome, 'ok'>;

/** Where a request stopped before reaching an upstream. */
export type RejectedBy =
  'auth' | 'rpm' | 'blacklist' | 'capacity' | 'balance' | 'validation' | 'routing';

export const REJECTED_BY: readonly RejectedBy[] = [
  'auth',
  'rpm',
  'blacklist',
  'capacity',
  'balance',
  'validation',
  'routing',
];

/** The three token prices a request is metered at (docs/decisions/0001-money-unit.md). */
export type TokenKind = 'input' | 'cache_hit' | 'output';

export type ReloadResult = 'success' | 'failure';

/** The outcome label for an upstream HTTP status (timeouts and cuts are told apart by the caller). */
export function outcomeForStatus(status: number): UpstreamOutcome {
  if (status < 400) return 'ok';
  if (status === 429) return 'http_429';
  return status >= 500 ? 'http_5xx' : 'http_4xx';
}
