// Reads an upstream chunk of SSE events at the byte level, to tell whether a relay may write the
// chunk itself instead of decoding, re-framing and re-encoding each event (decision 0030).
//
// One JavaScript pass over the bytes, with no native call: a first version made ~7
// `Buffer#indexOf`/`compare` calls a chunk, 0.65-0.76 µs on a 200-byte chat chunk in a loop
// against 0.23-0.24 for this one (and 2.8 µs a chunk in the paced profile, which inflates them).

import { isUtf8 } from 'node:buffer';

const LF = 10;
const CR = 13;
const SPACE = 32;
const TAB = 9;
const QUOTE = 34;
const COLON = 58;
const bytes = (text: string): Uint8Array => Uint8Array.from(Buffer.from(text, 'latin1'));
const DATA = bytes('data: ');
const EVENT = bytes('event: ');
const DONE = bytes('[DONE]');
/** What follows a `"` in the keys the chat relay must read: `"usage"` (unless null), `"error"`. */
const USAGE_KEY = bytes('usage"');
const ERROR_KEY = bytes('error"');
const NULL = bytes('null');

/**
 * Each byte's class for the data-line loop: one table load and one compare for the ordinary byte
 * instead of four compares: a 230-byte chat chunk in a loop, 8 interleaved rounds, took 0.70-1.22
 * µs before and 0.63-0.97 after (best 0.696 → 0.628) on session 17's noisy host. In `perf` of 8
 * back-to-back streams this function was the gateway's largest JavaScript item (~1.9 µs a chunk
 * there, ~190 µs a 100-chunk stream).
 */
const PLAIN = 0;
const LINE_END = 1;
const REFUSE = 2;
const QUOTE_MARK = 3;
const HIGH = 4;
const BYTE_CLASS = new Uint8Array(256);
BYTE_CLASS[LF] = LINE_END;
BYTE_CLASS[CR] = REFUSE;
BYTE_CLASS[QUOTE] = QUOTE_MARK;
BYTE_CLASS.fill(HIGH, 0x80);

/**
 * The number of events in `chunk` when it is nothing but whole events of the one shape the chat
 * relay writes back unchanged (`data: <one line>\n\n`, no `\r`), none of them `[DONE]`, none with
 * an `"error"` and every `"usage"` in it followed by `: null`; otherwise -1, and the caller takes
 * the event-by-event path. It is stricter than that path's own test, never looser: it counts only
 * chunks that path would also have written byte for byte as they came.
 */
export function plainChatEvents(chunk: Uint8Array): number {
  return wholeEvents(chunk, null);
}

/**
 * The same for relays that read events by name (Anthropic messages, OpenAI Responses): the number
 * of events when `chunk` is nothing but whole `event: <name>\ndata: <one line>\n\n` events, no
 * `\r`, and no name in `mustRead`; otherwise -1.
 */
export function plainNamedEvents(chunk: Uint8Array, mustRead: readonly Uint8Array[]): number {
  return wholeEvents(chunk, mustRead);
}

/** An event name as the bytes plainNamedEvents compares. */
export function eventName(name: string): Uint8Array {
  return bytes(name);
}

/**
 * Counts the events of a chunk that ends on a blank line: with `mustRead` null, each one is
 * `data: <line>\n\n` whose line is not `[DONE]`, has no `"error"` and no `"usage"` but a null
 * one (the chat relay's test); otherwise each is `event: <name>\ndata: <line>\n\n` with a name not
 * in `mustRead`. -1 at anything else: `\r`, another field, a second data line, a missing space,
 * an empty name, invalid UTF-8.
 */
function wholeEvents(chunk: Uint8Array, mustRead: readonly Uint8Array[] | null): number {
  const n = chunk.length;
  if (n < 8 || chunk[n - 1] !== LF || chunk[n - 2] !== LF) return -1;
  let events = 0;
  let pos = 0;
  let ascii = true;
  // The chat relay's test reads the keys after each quote; the named-event one does not.
  const quotes = mustRead === null;
  while (pos < n) {
    if (mustRead !== null) {
      if (!at(chunk, pos, EVENT)) return -1;
      const nameStart = pos + EVENT.length;
      let nameEnd = nameStart;
      while (nameEnd < n && chunk[nameEnd] !== LF) {
        const c = chunk[nameEnd]!;
        if (c === CR) return -1;
        if (c >= 0x80) ascii = false;
        nameEnd++;
      }
      if (nameEnd === nameStart || nameEnd === n) return -1;
      for (const name of mustRead) {
        if (name.length === nameEnd - nameStart && at(chunk, nameStart, name)) return -1;
      }
      pos = nameEnd + 1;
    }
    if (!at(chunk, pos, DATA)) return -1;
    const start = pos + DATA.length;
    let i = start;
    for (; i < n; i++) {
      const k = BYTE_CLASS[chunk[i]!]!;
      if (k === PLAIN) continue;
      if (k === LINE_END) break;
      if (k === REFUSE) return -1;
      if (k === HIGH) {
        ascii = false;
      } else if (quotes) {
        // A quote: the chat relay must read an "error" and a "usage" that is not null.
        const next = chunk[i + 1];
        if (next === ERROR_KEY[0] && at(chunk, i + 1, ERROR_KEY)) return -1;
        if (
          next === USAGE_KEY[0] &&
          at(chunk, i + 1, USAGE_KEY) &&
          !nullAfter(chunk, i + 1 + USAGE_KEY.length)
        )
          return -1;
      }
    }
    // No line end, or a second line (another data: line, an id: field) before the blank line.
    if (i >= n - 1 || chunk[i + 1] !== LF) return -1;
    if (mustRead === null && i - start === DONE.length && at(chunk, start, DONE)) return -1;
    events++;
    pos = i + 2;
  }
  // The event-by-event path decodes and re-encodes, so invalid UTF-8 reaches the client as
  // U+FFFD; such a chunk takes that path (one native check, only for chunks with non-ASCII bytes).
  return ascii || isUtf8(chunk) ? events : -1;
}

/** `chunk` holds `prefix` at `from`. */
function at(chunk: Uint8Array, from: number, prefix: Uint8Array): boolean {
  if (from + prefix.length > chunk.length) return false;
  for (let k = 0; k < prefix.length; k++) if (chunk[from + k] !== prefix[k]) return false;
  return true;
}

/** `chunk` at `from` reads `\s*:\s*null` (spaces and tabs only). */
function nullAfter(chunk: Uint8Array, from: number): boolean {
  let i = skipBlanks(chunk, from);
  if (chunk[i] !== COLON) return false;
  i = skipBlanks(chunk, i + 1);
  return at(chunk, i, NULL);
}

function skipBlanks(chunk: Uint8Array, from: number): number {
  let i = from;
  while (chunk[i] === SPACE || chunk[i] === TAB) i++;
  return i;
}
