// The one interface the relay drives for every streamed answer, native or translated: feed it the
// upstream's bytes as they arrive, write what it returns, read usage when the stream is over.

import { redactSecrets } from '../telemetry/logging.ts';
import { SseParser } from './sse-parser.ts';
import type { SseEvent } from './types.ts';
import type { Usage } from './usage.ts';

/**
 * What a relay hands the client for one upstream chunk: its own text, or the upstream's chunk
 * itself when every byte of it goes out unchanged (always whole events, so whole characters).
 */
export type ClientChunk = string | Buffer;

export interface StreamRelay {
  /**
   * Feeds one upstream chunk; returns what to write to the client now (empty when none): text,
   * or `chunk` itself when the relay passes it on unchanged.
   */
  push(chunk: Uint8Array): ClientChunk;
  /**
   * The upstream body ended normally (not cut): returns the closing text, e.g. the `data: [DONE]`
   * a chat stream must end with when the upstream omitted it. Call once, after the last push.
   */
  end(): string;
  /** Usage seen so far (final once the stream has ended); null when the upstream reported none. */
  readonly usage: Usage | null;
  /**
   * Client events made from the upstream's chunks (push), not the closing text of end(): the
   * output estimate when a cut stream reported no usage.
   */
  readonly events: number;
  /** performance.now() when the first event was handed to the client; null before that. */
  readonly firstContentAt: number | null;
  /**
   * Text to take out of every event this relay writes (the channel's key): an upstream's error
   * event may quote the key it was sent, and went to the client as it came (session 21).
   */
  hideSecrets(secrets: readonly string[]): void;
  /** True once the upstream sent its own end marker ([DONE], message_stop, response.completed). */
  readonly completed: boolean;
  /** The message of an error event the upstream sent inside the stream, else null. */
  readonly errorMessage: string | null;
  readonly upstreamId: string | null;
  readonly upstreamModel: string | null;
}

/**
 * Shared plumbing: an SSE parser whose events a subclass turns into client text, appended to
 * `out`, which push() returns and clears. One string per push means one socket write per chunk.
 */
export abstract class SseStreamRelay implements StreamRelay {
  usage: Usage | null;
  events: number;
  firstContentAt: number | null;
  completed: boolean;
  errorMessage: string | null;
  protected out: string;
  private idRead: string | null;
  private modelRead: string | null;
  private readonly parser: SseParser;
  private secrets: readonly string[];

  constructor() {
    this.usage = null;
    this.events = 0;
    this.firstContentAt = null;
    this.completed = false;
    this.errorMessage = null;
    this.idRead = null;
    this.modelRead = null;
    this.out = '';
    this.secrets = [];
    this.parser = new SseParser((event) => this.onEvent(event));
  }

  get upstreamId(): string | null {
    this.identify();
    return this.idRead;
  }

  set upstreamId(id: string | null) {
    this.idRead = id;
  }

  get upstreamModel(): string | null {
    this.identify();
    return this.modelRead;
  }

  set upstreamModel(model: string | null) {
    this.modelRead = model;
  }

  push(chunk: Uint8Array): ClientChunk {
    // Nothing held in the parser and whole events the subclass would write back as they came:
    // the chunk itself goes out, with no decode, no strings and no encode on the way (decision
    // 0030). The parser's state after those events would be this same idle one (at the stream's
    // start: past its start, where passed() puts it).
    if (Buffer.isBuffer(chunk) && this.parser.canPass(chunk)) {
      const events = this.unchangedEvents(chunk);
      if (events > 0) {
        this.parser.passed();
        if (this.firstContentAt === null) this.firstContentAt = performance.now();
        this.events += events;
        return chunk;
      }
    }
    this.parser.feed(chunk);
    return this.take();
  }

  end(): string {
    const events = this.events;
    this.parser.end();
    this.finish();
    this.events = events;
    return this.take();
  }

  hideSecrets(secrets: readonly string[]): void {
    this.secrets = secrets.filter((s) => s.length > 0);
  }

  /**
   * Appends one client event; stamps the time of the first. Events passed on whole by
   * unchangedEvents skip this: those are plain content chunks, never an error event.
   */
  protected emit(text: string): void {
    if (this.firstContentAt === null) this.firstContentAt = performance.now();
    this.events++;
    for (const s of this.secrets) {
      if (text.includes(s)) {
        this.out += redactSecrets(text, this.secrets);
        return;
      }
    }
    this.out += text;
  }

  protected abstract onEvent(event: SseEvent): void;

  /**
   * How many whole events `chunk` holds when onEvent would write each one back byte for byte and
   * needs to read nothing in it; -1 otherwise (the default: every event goes through onEvent).
   */
  protected unchangedEvents(_chunk: Buffer): number {
    return -1;
  }

  /**
   * Reads the upstream's id and model where a subclass put off reading them (the chat relay's
   * first chunk); called before either is read. The default has nothing put off.
   */
  protected identify(): void {}

  /** Called by end(): close whatever the upstream left open. */
  protected abstract finish(): void;

  private take(): string {
    const text = this.out;
    this.out = '';
    return text;
  }
}
