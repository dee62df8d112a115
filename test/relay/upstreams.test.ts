// One pool per channel, kept while the channel's origin and connect timeout stay; a reload that
// changes only the base path keeps the pool and uses the new path.
import { afterEach, describe, expect, it } from 'vitest';
import { Upstreams } from '../../src/relay/upstreams.ts';
import type { ChannelEntry } from '../../src/table/types.ts';

function channel(baseUrl: string, connectMs = 1000): ChannelEntry {
  return {
    id: 'oa-main',
    protocol: 'openai',
    baseUrl,
    apiKeys: [],
    priority: 0,
    weight: 1,
    capacity: null,
    timeouts: { connectMs, firstByteMs: 1000, totalMs: 1000 },
    headers: {},
  };
}

let upstreams = new Upstreams();
afterEach(async () => {
  await upstreams.close();
  upstreams = new Upstreams();
});

describe('Upstreams.pool', () => {
  it('gives the same pool and path to every request of an unchanged channel', () => {
    const a = upstreams.pool(channel('http://127.0.0.1:9/v1/'));
    // A reload builds new channel objects with the same settings.
    const b = upstreams.pool(channel('http://127.0.0.1:9/v1/'));
    expect(b).toBe(a);
    expect(a.basePath).toBe('/v1');
  });

  it('keeps the pool but takes the new path when a reload changes only the path', () => {
    const a = upstreams.pool(channel('http://127.0.0.1:9/v1'));
    const b = upstreams.pool(channel('http://127.0.0.1:9/compatible-mode/v1'));
    expect(b.pool).toBe(a.pool);
    expect(b.basePath).toBe('/compatible-mode/v1');
  });

  it('opens a new pool when the origin or the connect timeout changes', () => {
    const a = upstreams.pool(channel('http://127.0.0.1:9/v1'));
    const b = upstreams.pool(channel('http://127.0.0.2:9/v1'));
    expect(b.pool).not.toBe(a.pool);
    expect(a.pool.closed).toBe(true);
    const c = upstreams.pool(channel('http://127.0.0.2:9/v1', 2000));
    expect(c.pool).not.toBe(b.pool);
  });

  it('sends builtin:demo channels to the demo upstream once it runs', () => {
    expect(() => upstreams.pool(channel('builtin:demo'))).toThrow('not running');
    upstreams.demoBaseUrl = 'http://127.0.0.1:7/v1';
    expect(upstreams.pool(channel('builtin:demo')).origin).toBe('http://127.0.0.1:7');
  });
});
