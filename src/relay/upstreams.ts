// One undici Pool per channel (keep-alive, connect timeout from config), kept across reloads while
// the channel's origin and timeouts stay the same, closed when a reload drops or changes them.
import { Pool } from 'undici';
import type { ChannelEntry, RoutingTable } from '../table/types.ts';

interface PoolEntry {
  pool: Pool;
  key: string;
  basePath: string;
}

export class Upstreams {
  private readonly pools = new Map<string, PoolEntry>();
  private readonly keyCursor = new Map<string, number>();
  /** Where `builtin:demo` channels go (the in-process demo upstream), set by the gateway. */
  demoBaseUrl: string | null = null;

  private resolve(channel: ChannelEntry): URL {
    if (channel.baseUrl === 'builtin:demo') {
      if (this.demoBaseUrl === null) throw new Error('the builtin demo upstream is not running');
      return new URL(this.demoBaseUrl);
    }
    return new URL(channel.baseUrl);
  }

  pool(channel: ChannelEntry): PoolEntry {
    const url = this.resolve(channel);
    const key = `${url.origin}|${channel.timeouts.connectMs}`;
    const existing = this.pools.get(channel.id);
    if (existing !== undefined && existing.key === key) return existing;
    if (existing !== undefined) void existing.pool.close();
    const entry: PoolEntry = {
      key,
      basePath: url.pathname.replace(/\/+$/, ''),
      pool: new Pool(url.origin, {
        connections: 256,
        pipelining: 1,
        keepAliveTimeout: 30_000,
        connect: { timeout: channel.timeouts.connectMs },
      }),
    };
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

  /** Closes pools of channels the new table no longer has (or whose origin changed). */
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
