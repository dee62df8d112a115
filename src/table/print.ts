// The printable form of a RoutingTable (compile --json, the content hash, the admin status): Maps
// become objects, bigints decimal strings, and secrets are never included — only their count.
import { formatScaledDecimal, nanoToYuan } from '../billing/money.ts';
import type { RoutingTable } from './types.ts';

const perMillion = (nanoPerToken: bigint): string => formatScaledDecimal(nanoPerToken, 3);
const multiplier = (bp: bigint): string => formatScaledDecimal(bp, 4);
const instant = (ms: number): string | null =>
  Number.isFinite(ms) ? new Date(ms).toISOString() : null;
const redact = (value: string | null): string | null => (value === null ? null : '[redacted]');

export function printTable(
  table: RoutingTable,
  opts: { withVersion: boolean } = { withVersion: true },
): object {
  return {
    ...(opts.withVersion
      ? { version: table.version, compiled_at: new Date(table.compiledAtMs).toISOString() }
      : {}),
    gateway: {
      ...table.gateway,
      store: { url: redact(table.gateway.store.url), data_dir: table.gateway.store.dataDir },
      redis: {
        url: redact(table.gateway.redis.url),
        on_unreachable: table.gateway.redis.onUnreachable,
        lease_ms: table.gateway.redis.leaseMs,
      },
      metrics: { ...table.gateway.metrics, token: redact(table.gateway.metrics.token) },
      admin: {
        token: redact(table.gateway.admin.token),
        readonly_token: redact(table.gateway.admin.readonlyToken),
      },
    },
    limits: table.limits,
    channels: [...table.channels.values()].map((ch) => ({
      id: ch.id,
      protocol: ch.protocol,
      base_url: ch.baseUrl,
      api_keys: `${ch.apiKeys.length} key(s), redacted`,
      priority: ch.priority,
      weight: ch.weight,
      capacity: ch.capacity,
      timeouts: ch.timeouts,
      headers: Object.keys(ch.headers),
    })),
    models: table.modelList.map((m) => ({
      name: m.name,
      owned_by: m.ownedBy,
      family: m.family,
      endpoints: m.endpoints,
      capabilities: m.capabilities,
      realname_required: m.realnameRequired,
      billing: m.billing,
      max_output_tokens: m.maxOutputTokens,
      rpm: m.rpm,
      routes: Object.fromEntries(
        [...m.routes.entries()].map(([endpoint, route]) => [
          endpoint,
          route.tiers.map((t) => ({
            priority: t.priority,
            candidates: t.candidates.map((cand) => ({
              channel: cand.channel.id,
              upstream_model: cand.upstreamModel,
              weight: cand.weight,
              translate: cand.translate,
            })),
          })),
        ]),
      ),
      prices: m.prices.map((p) => ({
        effective_from: instant(p.effectiveFromMs),
        input_per_million: perMillion(p.inputNano),
        cache_hit_per_million: perMillion(p.cacheHitNano),
        output_per_million: perMillion(p.outputNano),
        per_image:
          p.perImage === null
            ? null
            : Object.fromEntries([...p.perImage].map(([size, nano]) => [size, nanoToYuan(nano)])),
      })),
      peak_windows: m.peak === null ? [] : m.peak.flatMap((z) => z.windows.map((w) => w.id)),
      campaigns: m.campaigns === null ? [] : m.campaigns.map((k) => k.id),
      reasoning: m.reasoning === null ? null : m.reasoning.family,
    })),
    peak_windows: table.peakWindows.map((w) => ({
      ...w,
      multiplierBp: undefined,
      multiplier: multiplier(w.multiplierBp),
    })),
    campaigns: table.campaigns.map((k) => ({
      id: k.id,
      starts_at: instant(k.startsMs),
      ends_at: instant(k.endsMs),
      models: k.models,
      accounts: k.accounts === null ? null : [...k.accounts],
      discount: multiplier(k.discountBp),
    })),
  };
}
