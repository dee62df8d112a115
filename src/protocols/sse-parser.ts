// Incremental Server-Sent-Events parser (WHATWG "event stream interpretation"): fed upstream bytes
// in whatever chunks the socket delivers, it emits each complete event and keeps only the tail.

import { TextDecoder } from 'node:util';
import type { SseEvent } from './types.ts';

const LF = 10;
const COLON = 58;
const SPACE = 32;
/** The first byte of a UTF-8 BOM. */
const BOM_FIRST = 0xef;
/** Fed to a decoder that has seen nothing once the stream's start went by unfed: no BOM after. */
const PAST_START = new Uint8Array([LF]);

export type SseListener = (event: SseEvent) => void;

/**
 * Feed it bytes; it calls `onEvent` once per complete event. Between chunks it holds only the
 * unfinished last line and the event being built, never the stream so far, so a long stream costs
 * the same per chunk at its end as at its start. `id:` and `retry:` fields are ignored (no
 * upstream the gateway relays uses them).
 */
export class SseParser {
  private readonly decoder: TextDecoder;
  /** The decoder may hold the first bytes of a character, or has not yet seen a possible BOM. */
  private decoderInUse: boolean;
  /** No byte has come yet, fed or passed: a BOM may still open the stream. */
  private atStart: boolean;
  /** The stream's start went by unfed (passed()); the decoder has yet to see a byte. */
  private primeDecoder: boolean;
  private readonly onEvent: SseListener;
  /** The unfinished line carried over from the previous chunk. */
  private tail: string;
  /** A chunk ended on '\r': a '\n' opening the next chunk belongs to the same line break. */
  private skipLeadingLf: boolean;
  private eventType: string | null;
  private data: string;
  private hasData: boolean;

  constructor(onEvent: SseListener) {
    // stream: true in decode() keeps a multi-byte character split across chunks intact; the
    // default ignoreBOM:false drops a leading BOM as the SSE spec asks.
    this.decoder = new TextDecoder('utf-8');
    this.decoderInUse = true;
    this.atStart = true;
    this.primeDecoder = false;
    this.onEvent = onEvent;
    this.tail = '';
    this.skipLeadingLf = false;
    this.eventType = null;
    this.data = '';
    this.hasData = false;
  }

  feed(chunk: Uint8Array): void {
    const n = chunk.length;
    if (n === 0) return;
    // A chunk that ends on an ASCII byte leaves no character split for the next one. After the
    // first such chunk (BOM handled) and with nothing held back, a Buffer's toString (undici's
    // chunks are Buffers) decodes it as the decoder would, for ~1/4 of TextDecoder's cost: decode() was 4.6 µs of a chunk's ~20
    // µs in the parser and relay at a model's pace (profile, decision 0029).
    const last = chunk[n - 1]!;
    if (!this.decoderInUse && last < 0x80 && Buffer.isBuffer(chunk)) {
      this.feedText(chunk.toString('utf8'));
      return;
    }
    if (this.primeDecoder) {
      this.primeDecoder = false;
      this.decoder.decode(PAST_START, { stream: true });
    }
    this.atStart = false;
    this.feedText(this.decoder.decode(chunk, { stream: true }));
    this.decoderInUse = last >= 0x80;
  }

  /**
   * Nothing held back: no partial character, line or event, and the leading BOM already handled.
   * Whole events fed now would leave the parser in this same state.
   */
  idle(): boolean {
    return (
      !this.decoderInUse &&
      this.tail.length === 0 &&
      !this.skipLeadingLf &&
      !this.hasData &&
      this.eventType === null
    );
  }

  /**
   * Whole events in `chunk` may go by unfed (see passed()): the parser is idle, or nothing has come
   * yet and `chunk` does not open with a BOM, which feeding it would drop.
   */
  canPass(chunk: Uint8Array): boolean {
    return this.atStart ? chunk[0] !== BOM_FIRST : this.idle();
  }

  /**
   * Whole events went by unfed, after canPass: when they opened the stream, a BOM can no longer
   * come, so the decoder is primed before its first use and the fast path is open at once.
   */
  passed(): void {
    if (!this.atStart) return;
    this.atStart = false;
    this.decoderInUse = false;
    this.primeDecoder = true;
  }

  /**
   * The upstream ended. A last line without its line break, and an event without its closing
   * blank line, are dispatched anyway: some upstreams close right after their final `data:` and
   * that event is the one carrying usage, which billing must not lose.
   */
  end(): void {
    const rest = this.decoderInUse ? this.decoder.decode() : '';
    if (rest.length > 0) this.feedText(rest);
    if (this.tail.length > 0) {
      const line = this.tail;
      this.tail = '';
      this.line(line);
    }
    this.dispatch();
  }

  private feedText(text: string): void {
    const n = text.length;
    let pos = 0;
    if (this.skipLeadingLf) {
      this.skipLeadingLf = false;
      if (n > 0 && text.charCodeAt(0) === LF) pos = 1;
    }
    let lf = text.indexOf('\n', pos);
    let cr = text.indexOf('\r', pos);
    while (lf !== -1 || cr !== -1) {
      const isCr = cr !== -1 && (lf === -1 || cr < lf);
      const end = isCr ? cr : lf;
      const piece = text.slice(pos, end);
      let line = piece;
      if (this.tail.length > 0) {
        line = this.tail + piece;
        this.tail = '';
      }
      pos = end + 1;
      if (isCr) {
        if (pos < n) {
          if (text.charCodeAt(pos) === LF) pos++;
        } else {
          this.skipLeadingLf = true;
        }
      }
      this.line(line);
      if (lf !== -1 && lf < pos) lf = text.indexOf('\n', pos);
      if (cr !== -1 && cr < pos) cr = text.indexOf('\r', pos);
    }
    if (pos < n) this.tail += pos === 0 ? text : text.slice(pos);
  }

  private line(line: string): void {
    if (line.length === 0) {
      this.dispatch();
      return;
    }
    if (line.charCodeAt(0) === COLON) return; // comment, e.g. ": keep-alive"
    const colon = line.indexOf(':');
    let field: string;
    let value: string;
    if (colon === -1) {
      field = line;
      value = '';
    } else {
      field = line.slice(0, colon);
      const start = line.charCodeAt(colon + 1) === SPACE ? colon + 2 : colon + 1;
      value = line.slice(start);
    }
    if (field === 'data') {
      this.data = this.hasData ? this.data + '\n' + value : value;
      this.hasData = true;
    } else if (field === 'event') {
      this.eventType = value.length > 0 ? value : null;
    }
  }

  private dispatch(): void {
    if (this.hasData) {
      const event: SseEvent = { event: this.eventType, data: this.data };
      this.data = '';
      this.hasData = false;
      this.eventType = null;
      this.onEvent(event);
    } else {
      this.eventType = null;
    }
  }
}

/** Frames one event for the client: `event: X\ndata: Y\n\n` (multi-line data split as SSE asks). */
export function formatSse(event: string | null, data: string): string {
  const body = data.includes('\n') ? data.split('\n').join('\ndata: ') : data;
  return event === null ? `data: ${body}\n\n` : `event: ${event}\ndata: ${body}\n\n`;
}
