// A relay writes a chunk of plain events as it came (decision 0030): the bytes, the usage, the
// event count and the error it reads must be those of the event-by-event path, for every way the
// socket may cut the stream. Chat, Anthropic messages and OpenAI Responses relays.
import { describe, expect, it } from 'vitest';
import { MessagesStreamRelay } from '../../src/protocols/anthropic/messages-stream-relay.ts';
import { ChatStreamRelay } from '../../src/protocols/openai/chat-stream-relay.ts';
import { ResponsesStreamRelay } from '../../src/protocols/openai/responses-stream-relay.ts';
import { eventName, plainChatEvents, plainNamedEvents } from '../../src/protocols/sse-verbatim.ts';
import type { StreamRelay } from '../../src/protocols/stream-relay.ts';

const chunk = (content: string, extra = ''): string =>
  `data: {"id":"c1","object":"chat.completion.chunk","model":"m","choices":[{"index":0,"delta":{"content":${JSON.stringify(content)}},"finish_reason":null}],"usage":null${extra}}\n\n`;
const USAGE =
  'data: {"id":"c1","object":"chat.completion.chunk","model":"m","choices":[],"usage":{"prompt_tokens":9,"completion_tokens":4,"total_tokens":13,"prompt_tokens_details":{"cached_tokens":2}}}\n\n';
const DONE = 'data: [DONE]\n\n';

/** Streams the relay must treat alike on both paths; each is a list of upstream events. */
/** Upstream events: text, or bytes where the test needs invalid UTF-8. */
type Events = (string | Buffer)[];
const BAD_UTF8 = Buffer.from([0xff, 0xc3, 0x28, 0xed, 0xa0, 0x80]);
const withBytes = (before: string, bytes: Buffer, after: string): Buffer =>
  Buffer.concat([Buffer.from(before), bytes, Buffer.from(after)]);

const STREAMS: Record<string, Events> = {
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
  // The event-by-event path writes U+FFFD for invalid bytes: such a chunk must take it.
  'invalid UTF-8 in a chunk': [
    chunk('a'),
    withBytes('data: {"c":"', BAD_UTF8, '"}\n\n'),
    chunk('b'),
    USAGE,
    DONE,
  ],
  'an empty data event': [chunk('a'), 'data: \n\n', chunk('b'), USAGE, DONE],
  'a first event that is not JSON': ['data: hello\n\n', chunk('a'), chunk('b'), USAGE, DONE],
  // The id and model come from the first event that is a JSON object, on both paths.
  'first events that are not objects, then ids that differ': [
    'data: hello\n\n',
    'data: [1]\n\n',
    chunk('a').replace('"c1"', '"c9"').replace('"model":"m"', '"model":"m9"'),
    chunk('b'),
    USAGE,
    DONE,
  ],
  'ids that differ by event': [
    chunk('a').replace('"c1"', '"c0"').replace('"model":"m"', '"model":"m0"'),
    chunk('b'),
    USAGE,
    DONE,
  ],
  'a usage object beside a nested null one': [
    chunk('a'),
    'data: {"id":"c1","choices":[],"x":{"usage":null},"usage":{"prompt_tokens":5,"completion_tokens":2,"total_tokens":7}}\n\n',
    DONE,
  ],
  'no [DONE] at the end': [chunk('a'), chunk('b'), USAGE],
};

const ev = (name: string, data: object | string): string =>
  `event: ${name}\ndata: ${typeof data === 'string' ? data : JSON.stringify(data)}\n\n`;
const delta = (text: string): string =>
  ev('content_block_delta', {
    type: 'content_block_delta',
    index: 0,
    delta: { type: 'text_delta', text },
  });
const MESSAGES: Record<string, Events> = {
  'a whole stream': [
    ev('message_start', {
      type: 'message_start',
      message: {
        id: 'msg_1',
        model: 'claude-x',
        usage: { input_tokens: 11, cache_read_input_tokens: 3, output_tokens: 1 },
      },
    }),
    ev('content_block_start', {
      type: 'content_block_start',
      index: 0,
      content_block: { type: 'text', text: '' },
    }),
    ev('ping', { type: 'ping' }),
    delta('héllo'),
    delta(' 世界 🎉'),
    delta('"usage" in text'),
    ev('content_block_stop', { type: 'content_block_stop', index: 0 }),
    ev('message_delta', {
      type: 'message_delta',
      delta: { stop_reason: 'end_turn' },
      usage: { output_tokens: 7 },
    }),
    ev('message_stop', { type: 'message_stop' }),
  ],
  'an error event and odd framing': [
    ev('message_start', {
      type: 'message_start',
      message: { id: 'msg_2', model: 'claude-x', usage: { input_tokens: 5, output_tokens: 1 } },
    }),
    delta('a'),
    'event:content_block_delta\ndata: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"b"}}\n\n',
    'event: content_block_delta\r\ndata: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"c"}}\r\n\r\n',
    'data: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"d"}}\n\n',
    'event: content_block_delta\ndata: {"type":"content_block_delta",\ndata: "index":0}\n\n',
    delta('e'),
    ev('error', { type: 'error', error: { type: 'overloaded_error', message: 'Overloaded' } }),
  ],
  'invalid UTF-8 in a delta': [
    ev('message_start', {
      type: 'message_start',
      message: { id: 'msg_3', model: 'claude-x', usage: { input_tokens: 5, output_tokens: 1 } },
    }),
    delta('a'),
    withBytes(
      'event: content_block_delta\ndata: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"',
      BAD_UTF8,
      '"}}\n\n',
    ),
    delta('b'),
    ev('message_stop', { type: 'message_stop' }),
  ],
};
const rdelta = (text: string): string =>
  ev('response.output_text.delta', {
    type: 'response.output_text.delta',
    item_id: 'i1',
    output_index: 0,
    content_index: 0,
    delta: text,
  });
const resp = (status: string, usage: object | null): object => ({
  id: 'resp_1',
  object: 'response',
  model: 'gpt-x',
  status,
  output: [],
  usage,
});
const RESPONSES: Record<string, Events> = {
  'a whole stream': [
    ev('response.created', { type: 'response.created', response: resp('in_progress', null) }),
    ev('response.output_item.added', {
      type: 'response.output_item.added',
      output_index: 0,
      item: { id: 'i1', type: 'message' },
    }),
    rdelta('héllo'),
    rdelta(' 世界 🎉'),
    ev('response.output_text.done', {
      type: 'response.output_text.done',
      item_id: 'i1',
      text: 'héllo 世界 🎉',
    }),
    ev('response.completed', {
      type: 'response.completed',
      response: resp('completed', {
        input_tokens: 9,
        input_tokens_details: { cached_tokens: 2 },
        output_tokens: 4,
        output_tokens_details: { reasoning_tokens: 0 },
        total_tokens: 13,
      }),
    }),
  ],
  'a name that disagrees with its type': [
    ev('response.created', { type: 'response.created', response: resp('in_progress', null) }),
    ev('response.output_text.delta', {
      type: 'response.completed',
      response: resp('completed', null),
    }),
    rdelta('a'),
    ev('response.completed', {
      type: 'response.completed',
      response: resp('completed', { input_tokens: 3, output_tokens: 1, total_tokens: 4 }),
    }),
  ],
  'no event lines, then a failure': [
    ev('response.created', { type: 'response.created', response: resp('in_progress', null) }),
    rdelta('a'),
    'data: {"type":"response.output_text.delta","delta":"b"}\n\n',
    rdelta('c'),
    'data: {"type":"response.failed","response":{"id":"resp_1","status":"failed","error":{"message":"boom"}}}\n\n',
  ],
};

interface Seen {
  /** The bytes the client gets: text is written as UTF-8, as node writes it. */
  out: Buffer;
  firstContent: boolean;
  unchanged: number;
  usage: unknown;
  events: number;
  completed: boolean;
  errorMessage: string | null;
  upstreamId: string | null;
  upstreamModel: string | null;
}

/** Feeds `pieces`, as Buffers (undici's chunks) or as plain Uint8Arrays (never passed as they are). */
function run(pieces: Uint8Array[], relay: StreamRelay, buffers: boolean): Seen {
  const out: Buffer[] = [];
  let unchanged = 0;
  for (const piece of pieces) {
    const input = buffers ? Buffer.from(piece) : new Uint8Array(piece);
    const got = relay.push(input);
    if (got === input) unchanged++;
    out.push(typeof got === 'string' ? Buffer.from(got) : got);
  }
  out.push(Buffer.from(relay.end()));
  const { usage, events, completed, errorMessage, upstreamId, upstreamModel } = relay;
  return {
    out: Buffer.concat(out),
    firstContent: relay.firstContentAt !== null,
    unchanged,
    usage,
    events,
    completed,
    errorMessage,
    upstreamId,
    upstreamModel,
  };
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

/** Every way to cut `events` that matters: per event, none, every single cut, every line, random. */
function cutWays(events: Events): { bytes: Buffer; ways: number[][] } {
  const bytes = Buffer.concat(events.map((e) => (typeof e === 'string' ? Buffer.from(e) : e)));
  // One piece per event (how upstreams write), every single cut, and random cut sets.
  const boundaries: number[] = [];
  let at = 0;
  for (const e of events.slice(0, -1))
    boundaries.push((at += typeof e === 'string' ? Buffer.byteLength(e) : e.length));
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
  return { bytes, ways };
}

/** Both paths agree at every cut; returns how many chunks went out as they came, per event. */
function sameAtEveryCut(events: Events, make: () => StreamRelay): number {
  const { bytes, ways } = cutWays(events);
  let perEvent = -1;
  for (const cuts of ways) {
    const pieces = cutAt(bytes, cuts);
    const fast = run(pieces, make(), true);
    const slow = run(pieces, make(), false);
    expect(slow.unchanged).toBe(0);
    expect({ ...fast, unchanged: 0 }).toEqual(slow);
    if (perEvent === -1) perEvent = fast.unchanged;
  }
  return perEvent;
}

describe('chat stream relay: chunks passed on as they came', () => {
  for (const [name, events] of Object.entries(STREAMS)) {
    for (const wantsUsage of [true, false]) {
      it(`${name}, client ${wantsUsage ? 'asked' : 'did not ask'} for usage: same as event by event at every cut`, () => {
        sameAtEveryCut(events, () => new ChatStreamRelay(wantsUsage));
      });
    }
  }

  it('passes every plain chunk between the first and the usage as it came, one event a chunk', () => {
    const events = STREAMS['OpenAI with include_usage']!;
    const seen = run(
      events.map((e) => Buffer.from(e)),
      new ChatStreamRelay(true),
      true,
    );
    // The usage chunk and [DONE] are read; the first goes out as it came (read afterwards).
    expect(seen.unchanged).toBe(events.length - 2);
    expect(seen.out.toString()).toBe(events.join(''));
    expect(seen.usage).toMatchObject({ inputTokens: 7, cacheHitTokens: 2, outputTokens: 4 });
  });

  it('passes the first chunk on as it came and reads its id and model once asked', () => {
    const relay = new ChatStreamRelay(false);
    const first = Buffer.from(
      chunk('').replace('"c1"', '"chatcmpl-9"').replace('"model":"m"', '"model":"up-9"'),
    );
    expect(relay.push(first)).toBe(first);
    expect(relay.firstContentAt).not.toBeNull();
    expect(relay.upstreamId).toBe('chatcmpl-9');
    expect(relay.upstreamModel).toBe('up-9');
  });

  it('reads a held first chunk before the next, so a later id does not replace it', () => {
    const relay = new ChatStreamRelay(true);
    const first = Buffer.from(chunk('a').replace('"c1"', '"first"'));
    const second = Buffer.from(chunk('b').replace('"c1"', '"second"'));
    expect(relay.push(first)).toBe(first);
    expect(relay.push(second)).toBe(second);
    expect(relay.upstreamId).toBe('first');
  });
});

describe('chat stream relay: usage beside a nested "usage": null', () => {
  it('is read and billed, on both paths', () => {
    for (const buffers of [true, false]) {
      const events = STREAMS['a usage object beside a nested null one']!;
      const seen = run(
        events.map((e) => Buffer.from(e)),
        new ChatStreamRelay(true),
        buffers,
      );
      expect(seen.usage).toMatchObject({ inputTokens: 5, outputTokens: 2 });
    }
  });
});

describe('messages and responses relays: chunks passed on as they came', () => {
  for (const [name, events] of Object.entries(MESSAGES)) {
    it(`messages, ${name}: same as event by event at every cut`, () => {
      sameAtEveryCut(events, () => new MessagesStreamRelay());
    });
  }
  for (const [name, events] of Object.entries(RESPONSES)) {
    it(`responses, ${name}: same as event by event at every cut`, () => {
      sameAtEveryCut(events, () => new ResponsesStreamRelay());
    });
  }
  it('passes on the content events of a messages stream and reads the rest', () => {
    const events = MESSAGES['a whole stream']!;
    // content_block_start, ping, three deltas and content_block_stop pass; message_* are read.
    expect(sameAtEveryCut(events, () => new MessagesStreamRelay())).toBe(6);
    const relay = new MessagesStreamRelay();
    run(
      events.map((e) => Buffer.from(e)),
      relay,
      true,
    );
    expect(relay.usage).toMatchObject({ inputTokens: 11, cacheHitTokens: 3, outputTokens: 7 });
    expect(relay.completed).toBe(true);
  });
  it('passes on the deltas of a responses stream and reads its lifecycle events', () => {
    const events = RESPONSES['a whole stream']!;
    expect(sameAtEveryCut(events, () => new ResponsesStreamRelay())).toBe(4);
    const relay = new ResponsesStreamRelay();
    run(
      events.map((e) => Buffer.from(e)),
      relay,
      true,
    );
    expect(relay.usage).toMatchObject({ cacheHitTokens: 2, outputTokens: 4 });
    expect(relay.completed).toBe(true);
  });
});

describe('plainNamedEvents', () => {
  const read = ['message_start', 'error'].map(eventName);
  it('counts whole named one-line events whose names need no reading', () => {
    expect(plainNamedEvents(Buffer.from(delta('a') + ev('ping', {})), read)).toBe(2);
    // A name is refused whole, not by its prefix.
    expect(plainNamedEvents(Buffer.from(ev('errors', {}) + ev('message_starts', {})), read)).toBe(
      2,
    );
  });
  it('refuses unnamed, misnamed, multi-line or partial events, and names it must read', () => {
    for (const text of [
      'data: {"a":1}\n\n',
      'event:ping\ndata: {}\n\n',
      'event: \ndata: {}\n\n',
      ev('error', {}),
      delta('a') + ev('message_start', {}),
      'event: ping\ndata: {}\ndata: {}\n\n',
      'event: ping\r\ndata: {}\r\n\r\n',
      delta('a').slice(0, -1),
      'event: ping\nid: 3\ndata: {}\n\n',
      'event: pi\rng\ndata: {}\n\n',
      'event: ping\n\n',
      'event: ping\ndata: {}\nx\n\n',
    ]) {
      expect(plainNamedEvents(Buffer.from(text), read), JSON.stringify(text)).toBe(-1);
    }
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
      'data: {"x":"y","usage"\n\n', // a key cut at the line's end
      'data: {"usage" :  \tnul}\n\n',
    ]) {
      expect(plainChatEvents(b(text)), JSON.stringify(text)).toBe(-1);
    }
  });
});
