// Scripted behaviours of the mock upstream: what the next calls (by path or upstream model) do
// instead of, or on top of, a normal answer.

export interface MockBehaviour {
  /** Only calls to this path match, e.g. '/v1/messages'. Absent: any path. */
  path?: string;
  /** Only calls for this upstream model match. Absent: any model. */
  model?: string;
  /** How many matching calls this behaviour applies to (default 1). */
  times?: number;
  /**
   * Answer with this status: an error body in the provider's format, or `body` as given (with a
   * 2xx status too, for an answer the mock would not make itself).
   */
  status?: number;
  body?: unknown;
  /** Seconds, sent as the retry-after header with `status`. */
  retryAfter?: number;
  /** Accept the request and never answer until the mock closes. */
  stall?: boolean;
  /** Send the first n SSE events (half the body when not streaming), then destroy the socket. */
  cutAfterChunks?: number;
  /** Wait this long before answering. */
  delayMs?: number;
  /** Wait this long between SSE events (to observe streaming through the gateway). */
  chunkDelayMs?: number;
  /** Report this many prompt tokens as cache hits, in the protocol's own fields. */
  cacheHitTokens?: number;
  /** Leave usage out of the answer (and of the stream). */
  omitUsage?: boolean;
  /** Number of content chunks (= completion tokens of a text answer; default 6). */
  chunks?: number;
  /** Override the uncached input tokens the answer reports. */
  inputTokens?: number;
}

/** A first-in first-out list of behaviours; each call takes the first one that matches it. */
export class BehaviourQueue {
  private readonly items: { behaviour: MockBehaviour; left: number }[];

  constructor() {
    this.items = [];
  }

  add(behaviour: MockBehaviour): void {
    this.items.push({ behaviour, left: behaviour.times ?? 1 });
  }

  /** The behaviour for a call to `path` for `model`, consumed once; null when none matches. */
  take(path: string, model: string | null): MockBehaviour | null {
    if (this.items.length === 0) return null;
    for (let i = 0; i < this.items.length; i++) {
      const item = this.items[i];
      if (item === undefined) continue;
      const b = item.behaviour;
      if (b.path !== undefined && b.path !== path) continue;
      if (b.model !== undefined && b.model !== model) continue;
      item.left--;
      if (item.left <= 0) this.items.splice(i, 1);
      return b;
    }
    return null;
  }

  clear(): void {
    this.items.length = 0;
  }

  get size(): number {
    return this.items.length;
  }
}
