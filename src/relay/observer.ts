// The relay's view of observability for one request: where it was rejected, each upstream attempt,
// the first chunk, the settlement. src/telemetry implements it with spans, metrics and the access
// log; the relay never builds attributes itself, so tracing off costs one method call per event.
import type { Usage } from '../protocols/usage.ts';

export type RejectedLayer =
  'auth' | 'blacklist' | 'validation' | 'routing' | 'permission' | 'rpm' | 'balance' | 'capacity';

export type AttemptOutcome =
  'ok' | 'http_5xx' | 'http_429' | 'http_4xx' | 'timeout' | 'connect_error' | 'stream_cut';

export interface AttemptObserver {
  end(outcome: AttemptOutcome, status: number | null): void;
}

export interface RequestFacts {
  accountId: string | null;
  keyId: string | null;
  model: string | null;
}

export interface SettledFacts {
  model: string;
  channelId: string | null;
  provider: string | null;
  upstreamModel: string | null;
  usage: Usage | null;
  estimated: boolean;
  costNano: bigint;
  status: string;
}

export interface RequestObserver {
  identify(facts: RequestFacts): void;
  admitted(): void;
  rejected(layer: RejectedLayer, code: string): void;
  attempt(channelId: string, protocol: string, attempt: number): AttemptObserver;
  firstChunk(channelId: string): void;
  settled(facts: SettledFacts): void;
  /** The response is complete (or the client went away); status as sent. */
  finish(status: number): void;
}

const NOOP_ATTEMPT: AttemptObserver = { end() {} };

export const NOOP_OBSERVER: RequestObserver = {
  identify() {},
  admitted() {},
  rejected() {},
  attempt: () => NOOP_ATTEMPT,
  firstChunk() {},
  settled() {},
  finish() {},
};
