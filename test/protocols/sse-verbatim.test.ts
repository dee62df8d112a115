// The chat relay writes a chunk of plain events as it came (decision 0030): the bytes, the usage,
// the event count and the error it reads must be those of the event-by-event path, for every
// way the socket may cut the stream.
import { describe, expect, it } from 'vitest';
import { ChatStreamRelay } from '../../src/protocols/openai/chat-stream-relay.ts';
import { plainChatEvents } from '../../src/protocols/sse-verbatim.ts';

const chunk = (content: string, extra = ''): string =>
  `data: {"id":"c1","object":"chat.completion.chunk","model":"m","choices":[{"index":0,"delta":{"content":${JSON.stringify(content)}},"finish_reason":null}],"usage":null${extra}}\n\n`;
const USAGE =
  'data: {"id":"c1","object":"chat.completion.chunk","model":"m","choices":[],"usage":{"prompt_tokens":9,"completion_tokens":4,"total_tokens":13,"prompt_tokens_details":{"cached_tokens":2}}}\n\n';
const DONE = 'data: [DONE]\n\n';

/** Streams the relay must treat alike on both paths; each is a list of upstream events. */
const STREAMS: Record<string, string[]> = {
  'OpenAI with include_usage': [
    chunk(''),
    chunk('héllo'),
    chunk(' 世界 🎉'),
    chunk('!'),
    USAGE,
    DONE,
  ],
  'usage: null spaced': [
    chunk('a'),
    chunk('b').replace('"usage":null', '"usage" :\tnull'),
    USAGE,
    DONE,
  ],
  'a final chunk that keeps its choices': [
    chunk('a'),
    chunk('b'),
    USAGE.replace('"choices":[]', '"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]'),
    DONE,
  ],
  'an error event mid-stream': [
    chunk('a'),
    chunk('b'),
    'data: {"error":{"message":"overloaded","type":"server_error"}}\n\n',
    DONE,
  ],
  'CRLF framing': [chunk('a'), chunk('b').replace('\n\n', '\r\n\r\n'), chunk('c'), USAGE, DONE],
  'multi-line data and other fields': [
    chunk('a'),
    'event: note\ndata: {"usage":null,\ndata: "x":1}\n\n',
    ': keep-alive\n\n',
    chunk('b'),
    USAGE,
    DONE,
  ],
  'a two-line event with no other field': [
    chunk('a'),
    'data: {"choices":[],\ndata: "usage":null}\n\n',
    chunk('b'),
    USAGE,
    DONE,
  ],
  'events after [DONE]': [chunk('a'), DONE, chunk('late')],
  'no [DONE] at the end': [chunk('a'), chunk('b'), USAGE],
};

interface Seen {
  out: string;
  unchanged: number;
  usage: unknown;
  events: number;
  completed: boolean;
  errorMessage: string | null;
  upstreamId: string | null;
}

/** Feeds `pieces`, as Buffers (undici's chunks) or as plain Uint8Arrays (never passed as they are). */
function run(pieces: Uint8Array[], wantsUsage: boolean, buffers: boolean): Seen {
  const relay = new ChatStreamRelay(wantsUsage);
  let out = '';
  let unchanged = 0;
  for (const piece of pieces) {
    const input = buffers ? Buffer.from(piece) : new Uint8Array(piece);
    const got = relay.push(input);
    if (got === input) unchanged++;
    out += typeof got === 'string' ? got : got.toString('utf8');
  }
  out += relay.end();
  const { usage, events, completed, errorMessage, upstreamId } = relay;
  return { out, unchanged, usage, events, completed, errorMessage, upstreamId };
}

function cutAt(bytes: Buffer, cuts: number[]): Uint8Array[] {
  const pieces: Uint8Array[] = [];
  let start = 0;
  for (const cut of [...cuts, bytes.length]) {
    if (cut > start) pieces.push(bytes.subarray(start, cut));
    start = cut;
  }
  return pieces;
}

describe('chat stream relay: chunks passed on as they came', () => {
  for (const [name, events] of Object.entries(STREAMS)) {
    for (const wantsUsage of [true, false]) {
      it(`${name}, client ${wantsUsage ? 'asked' : 'did not ask'} for usage: same as event by event at every cut`, () => {
        const bytes = Buffer.from(events.join(''));
        // One piece per event (how upstreams write), every single cut, and random cut sets.
        const boundaries: number[] = [];
        let at = 0;
        for (const e of events.slice(0, -1)) boundaries.push((at += Buffer.byteLength(e)));
        const ways: number[][] = [
          boundaries,
          [],
          ...Array.from({ length: bytes.length - 1 }, (_, i) => [i + 1]),
        ];
        // Every line alone: a piece can then open with `data: ` mid-event (after an `event:` or
        // the first `data:` line of a multi-line event), which only the parser's state tells.
        const lines: number[] = [];
        for (let i = 1; i < bytes.length; i++) {
          if (bytes[i - 1] === 10 && bytes[i] !== 10) lines.push(i);
        }
        ways.push(lines);
        let seed = 7;
        const rand = (): number => (seed = (seed * 1103515245 + 12345) % 2 ** 31) / 2 ** 31;
        for (let k = 0; k < 200; k++) {
          const cuts = new Set<number>();
          const count = 1 + Math.floor(rand() * 12);
          for (let j = 0; j < count; j++) cuts.add(1 + Math.floor(rand() * (bytes.length - 1)));
          ways.push([...cuts].sort((a, b) => a - b));
        }
        for (const cuts of ways) {
          const pieces = cutAt(bytes, cuts);
          const fast = run(pieces, wantsUsage, true);
          const slow = run(pieces, wantsUsage, false);
          expect(slow.unchanged).toBe(0);
          expect({ ...fast, unchanged: 0 }).toEqual(slow);
        }
      });
    }
  }

  it('passes every plain chunk between the first and the usage as it came, one event a chunk', () => {
    const events = STREAMS['OpenAI with include_usage']!;
    const seen = run(
      events.map((e) => Buffer.from(e)),
      true,
      true,
    );
    // The first event is parsed (id, model); the usage chunk and [DONE] are read.
    expect(seen.unchanged).toBe(events.length - 3);
    expect(seen.out).toBe(events.join(''));
    expect(seen.usage).toMatchObject({ inputTokens: 7, cacheHitTokens: 2, outputTokens: 4 });
  });
});

describe('plainChatEvents', () => {
  const b = (s: string): Buffer => Buffer.from(s);
  it('counts whole one-line data events', () => {
    expect(plainChatEvents(b(chunk('a')))).toBe(1);
    expect(plainChatEvents(b(chunk('a') + chunk('b') + chunk('c')))).toBe(3);
    expect(plainChatEvents(b('data: {"usage" : null}\n\n'))).toBe(1);
  });
  it('refuses what the relay must read or reframe', () => {
    for (const text of [
      chunk('a').slice(0, -1), // the blank line not yet here
      chunk('a') + 'data: {"x"', // a partial event after a whole one
      chunk('a').replace('\n\n', '\r\n\r\n'),
      DONE,
      chunk('a') + DONE,
      USAGE,
      chunk('a').replace('"usage":null', '"usage":nul'),
      chunk('a').replace('"usage":null', '"usage":{}'),
      'data: {"error":{"message":"x"}}\n\n',
      'data: {"a":1}\ndata: {"b":2}\n\n',
      'event: x\ndata: {"a":1}\n\n',
      'data:{"a":1}\n\n',
      ': keep-alive\n\n',
      '\n\n',
    ]) {
      expect(plainChatEvents(b(text)), JSON.stringify(text)).toBe(-1);
    }
  });
});
