// Counts the HTTP server's requests for the memory trimmer. A trim stops the process for 100–210
// ms, and in the benchmark's latency turns (500 req/s for 1 s in every 4) the event loop read
// "idle" (under 5%) and a trim landed inside a turn: p99 +21 ms against the proxy's +14 (session 7,
// `.scratch/trim.ts`). So the trimmer also waits for periods in which no request arrived and none
// is open. Health checks and scrapes do not count: a pause costs them nothing, and a probe every
// few seconds would otherwise keep the gateway from ever trimming.
import type { IncomingMessage, Server, ServerResponse } from 'node:http';

export interface TrafficSince {
  /** Requests that arrived since the previous look. */
  arrived: number;
  /** Requests whose response has not closed yet. */
  open: number;
}

export class RequestTraffic {
  private arrived = 0;
  private open = 0;
  private readonly closed = (): void => {
    this.open--;
  };

  constructor(server: Server) {
    server.on('request', (req: IncomingMessage, res: ServerResponse) => {
      // Two plain checks: this runs for every request, and a callback per call would allocate.
      const url = req.url ?? '';
      if (url.startsWith('/health') || url.startsWith('/metrics')) return;
      this.arrived++;
      this.open++;
      res.on('close', this.closed);
    });
  }

  /** What arrived since the previous call, and what is open now. */
  take(): TrafficSince {
    const seen = { arrived: this.arrived, open: this.open };
    this.arrived = 0;
    return seen;
  }
}
