// A local upstream for the pump's backpressure tests: it answers every request with `count` chat
// chunks as fast as its socket takes them and waits for 'drain' whenever a write is refused, so a
// test can tell whether the gateway side held it back.
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';

/** One chat chunk event, numbered. */
export const chatEvent = (i: number): string =>
  `data: {"id":"c1","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"content":"w${i}"}}]}\n\n`;

export interface SseUpstream {
  readonly origin: string;
  /** How many of its writes had to wait for 'drain'. */
  pushedBack(): number;
  close(): Promise<void>;
}

export async function sseUpstream(count: number): Promise<SseUpstream> {
  let pushedBack = 0;
  const server = createServer((req, res) => {
    req.resume();
    req.on('end', () => {
      void (async () => {
        res.writeHead(200, { 'content-type': 'text/event-stream' });
        for (let i = 0; i < count; i++) {
          if (!res.write(chatEvent(i))) {
            pushedBack++;
            await new Promise((r) => res.once('drain', r));
          }
        }
        res.end();
      })();
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return {
    origin: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    pushedBack: () => pushedBack,
    close: async () => {
      server.closeAllConnections();
      await new Promise<void>((r) => server.close(() => r()));
    },
  };
}
