// One undici Pool per channel (keep-alive, connect timeout from config), kept across reloads while
// the channel's origin and timeouts stay the same, closed when a reload drops or changes them.
import { Pool } from 'undici';
import type { ChannelEntry, RoutingTable } from '../table/types.ts';

interface PoolEntry {
  pool: Pool;
  /** The channel's base URL as configured (or the demo upstream's): what this entry was made for. */
  source: string;
  connectMs: number;
  origin: string;
  basePath: string;
}

export class Upstreams {
  private readonly pools = new Map<string, PoolEntry>();
  private readonly keyCursor = new Map<string, number>();
  /** Where `builtin:demo` channels go (the in-process demo upstream), set by the gateway. */
  demoBaseUrl: string | null = null;

  private source(channel: ChannelEntry): string {
    if (channel.baseUrl !== 'builtin:demo') return channel.baseUrl;
    if (this.demoBaseUrl === null) throw new Error('the builtin demo upstream is not running');
    return this.demoBaseUrl;
  }

  pool(channel: ChannelEntry): PoolEntry {
    const source = this.source(channel);
    const connectMs = channel.timeouts.connectMs;
    const existing = this.pools.get(channel.id);
    // The same base URL and connect timeout as last time: known by two comparisons. Parsing the
    // URL on every request to find this out was 1.4% of the main thread (bench profile, c=32).
    if (existing !== undefined && existing.source === source && existing.connectMs === connectMs) {
      return existing;
    }
    const url = new URL(source);
    const basePath = url.pathname.replace(/\/+$/, '');
    let pool: Pool;
    if (
      existing !== undefined &&
      existing.origin === url.origin &&
      existing.connectMs === connectMs
    ) {
      pool = existing.pool; // only the path changed: the connections still fit
    } else {
      if (existing !== undefined) void existing.pool.close();
      pool = new Pool(url.origin, {
        connections: 256,
        pipelining: 1,
        keepAliveTimeout: 30_000,
        connect: { timeout: connectMs },
      });
    }
    const entry: PoolEntry = { pool, source, connectMs, origin: url.origin, basePath };
    this.pools.set(channel.id, entry);
    return entry;
  }

  /** Round-robin over the channel's keys; '' when it has none. */
  apiKey(channel: ChannelEntry): string {
    const n = channel.apiKeys.length;
    if (n === 0) return '';
    const i = this.keyCursor.get(channel.id) ?? 0;
    this.keyCursor.set(channel.id, (i + 1) % n);
    return channel.apiKeys[i % n] ?? '';
  }

  /** Closes pools of channels the new table no longer has (pool() replaces a changed one). */
  prune(table: RoutingTable): void {
    for (const [id, entry] of this.pools) {
      const ch = table.channels.get(id);
      if (ch === undefined) {
        this.pools.delete(id);
        void entry.pool.close();
      }
    }
  }

  async close(): Promise<void> {
    const all = [...this.pools.values()];
    this.pools.clear();
    await Promise.all(all.map((e) => e.pool.close().catch(() => undefined)));
  }
}
