// Test helpers: feed text to a stream relay in pieces, and read SSE text back as events.

import { expect } from 'vitest';
import { SseParser } from '../../src/protocols/sse-parser.ts';
import type { StreamRelay } from '../../src/protocols/stream-relay.ts';
import type { SseEvent } from '../../src/protocols/types.ts';

const encoder = new TextEncoder();

/**
 * Feeds `text` to the relay `pieceBytes` bytes at a time, then ends it; returns all output. Every
 * relay test also checks `events`: the events push() returned, not end()'s closing text.
 */
export function runRelay(relay: StreamRelay, text: string, pieceBytes = 7): string {
  const bytes = encoder.encode(text);
  let out = '';
  for (let i = 0; i < bytes.length; i += pieceBytes) {
    out += relay.push(bytes.subarray(i, i + pieceBytes));
  }
  const pushed = out.split('\n\n').length - 1;
  const all = out + relay.end();
  expect(relay.events).toBe(pushed);
  return all;
}

export function parseSse(text: string): SseEvent[] {
  const events: SseEvent[] = [];
  const parser = new SseParser((e) => events.push(e));
  parser.feed(encoder.encode(text));
  parser.end();
  return events;
}

/** The JSON payloads of a chat stream, without the [DONE] marker. */
export function chatChunks(text: string): Record<string, unknown>[] {
  return parseSse(text)
    .filter((e) => e.data !== '[DONE]')
    .map((e) => JSON.parse(e.data) as Record<string, unknown>);
}

export function sseText(events: [string | null, unknown][]): string {
  return events
    .map(([name, data]) => {
      const json = typeof data === 'string' ? data : JSON.stringify(data);
      return name === null ? `data: ${json}\n\n` : `event: ${name}\ndata: ${json}\n\n`;
    })
    .join('');
}

/** Fetches a mock upstream stream and returns its raw body text. */
export async function fetchText(
  url: string,
  body: unknown,
  headers: Record<string, string>,
): Promise<string> {
  const res = await fetch(url, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...headers },
    body: JSON.stringify(body),
  });
  return res.text();
}
