import { describe, expect, it } from 'vitest';
import { formatSse, SseParser } from '../../src/protocols/sse-parser.ts';
import type { SseEvent } from '../../src/protocols/types.ts';

const encoder = new TextEncoder();

/** Feeds the pieces as Uint8Arrays, or as Buffers (as undici delivers them) when `buffers`. */
function parseInPieces(bytes: Uint8Array, cuts: number[], buffers = false): SseEvent[] {
  const events: SseEvent[] = [];
  const parser = new SseParser((e) => events.push(e));
  const source = buffers ? Buffer.from(bytes) : bytes;
  let start = 0;
  for (const cut of [...cuts, bytes.length]) {
    parser.feed(source.subarray(start, cut));
    start = cut;
  }
  parser.end();
  return events;
}

const STREAM =
  ': keep-alive comment\n' +
  'event: message_start\r\n' +
  'data: {"text":"héllo 世界 🎉"}\r\n' +
  '\r\n' +
  'data: line one\n' +
  'data: line two\n' +
  '\n' +
  'data:no-space\r' +
  '\r' +
  'event: ping\n' +
  'data\n' +
  '\n' +
  'data: [DONE]\n\n';

const EXPECTED: SseEvent[] = [
  { event: 'message_start', data: '{"text":"héllo 世界 🎉"}' },
  { event: null, data: 'line one\nline two' },
  { event: null, data: 'no-space' },
  { event: 'ping', data: '' },
  { event: null, data: '[DONE]' },
];

describe('SSE parser', () => {
  it('reads a whole stream delivered in one chunk', () => {
    expect(parseInPieces(encoder.encode(STREAM), [])).toEqual(EXPECTED);
  });

  it('gives the same events when the stream is split at every single byte boundary', () => {
    const bytes = encoder.encode(STREAM);
    for (let cut = 1; cut < bytes.length; cut++) {
      expect(parseInPieces(bytes, [cut]), `split at byte ${cut}`).toEqual(EXPECTED);
    }
  });

  it('gives the same events when fed one byte at a time (splits inside UTF-8 characters)', () => {
    const bytes = encoder.encode(STREAM);
    const cuts = Array.from({ length: bytes.length - 1 }, (_, i) => i + 1);
    expect(parseInPieces(bytes, cuts)).toEqual(EXPECTED);
  });

  it('gives the same events from Buffers split anywhere, after a chunk that ends on ASCII too', () => {
    // Buffers that end on an ASCII byte skip the TextDecoder (sse-parser.ts): a character split
    // across chunks must still come out whole whichever way each chunk is decoded.
    const bytes = encoder.encode('data: first\n\n' + STREAM + STREAM);
    const expected = [{ event: null, data: 'first' }, ...EXPECTED, ...EXPECTED];
    for (let cut = 1; cut < bytes.length; cut++) {
      expect(parseInPieces(bytes, [cut], true), `split at byte ${cut}`).toEqual(expected);
      const second = Math.min(bytes.length - 1, cut + 3);
      expect(parseInPieces(bytes, [cut, second], true), `split at ${cut}, ${second}`).toEqual(
        expected,
      );
    }
    const cuts = Array.from({ length: bytes.length - 1 }, (_, i) => i + 1);
    expect(parseInPieces(bytes, cuts, true)).toEqual(expected);
  });

  it('does not dispatch an event before its blank line arrives', () => {
    const events: SseEvent[] = [];
    const parser = new SseParser((e) => events.push(e));
    parser.feed(encoder.encode('data: {"a":1}\n'));
    expect(events).toEqual([]);
    parser.feed(encoder.encode('\n'));
    expect(events).toEqual([{ event: null, data: '{"a":1}' }]);
  });

  it('dispatches a final event the upstream closed without a blank line', () => {
    expect(parseInPieces(encoder.encode('data: {"usage":1}'), [])).toEqual([
      { event: null, data: '{"usage":1}' },
    ]);
  });

  it('drops a leading byte-order mark and ignores id and retry fields', () => {
    const bytes = new Uint8Array([
      0xef,
      0xbb,
      0xbf,
      ...encoder.encode('id: 1\nretry: 5\ndata: x\n\n'),
    ]);
    expect(parseInPieces(bytes, [1, 2])).toEqual([{ event: null, data: 'x' }]);
    expect(parseInPieces(bytes, [1, 2], true)).toEqual([{ event: null, data: 'x' }]);
    expect(parseInPieces(bytes, [], true)).toEqual([{ event: null, data: 'x' }]);
  });

  it('lets whole events open the stream unfed unless a BOM opens it; a BOM after is data', () => {
    const events: SseEvent[] = [];
    const parser = new SseParser((e) => events.push(e));
    const withBom = Buffer.from([0xef, 0xbb, 0xbf, ...encoder.encode('data: x\n\n')]);
    expect(parser.canPass(withBom)).toBe(false);
    expect(parser.canPass(Buffer.from('data: a\n\n'))).toBe(true);
    parser.passed();
    // Past the start, a BOM opening a line is a character of its field name: `\ufeffdata`, not
    // `data`, so that event has no data and is not dispatched (the decoder must not drop it).
    expect(parser.canPass(withBom)).toBe(true);
    parser.feed(withBom);
    parser.feed(Buffer.from([...encoder.encode('data: '), 0xc3]));
    expect(parser.canPass(Buffer.from('data: a\n\n'))).toBe(false);
    parser.feed(Buffer.from([0xa9, ...encoder.encode('\n\n')]));
    parser.end();
    expect(events).toEqual([{ event: null, data: 'é' }]);
  });

  it('formats events back, splitting multi-line data into data lines', () => {
    expect(formatSse(null, 'a')).toBe('data: a\n\n');
    expect(formatSse('ping', 'a\nb')).toBe('event: ping\ndata: a\ndata: b\n\n');
  });
});
