// Fixtures for admin tests: a small config whose admin tokens come from the environment, compiled
// at a pinned instant.
import { compileConfig } from '../../src/config/compile.ts';
import { loadConfigTexts } from '../../src/config/load.ts';
import type { RoutingTable } from '../../src/table/types.ts';

export const ADMIN_TOKEN = 'admin-token-for-tests-0123456789';
export const READONLY_TOKEN = 'readonly-token-for-tests-9876543210';
export const COMPILED_AT = Date.parse('2026-11-20T02:00:00Z');

export const FILES: Record<string, string> = {
  'gateway.yaml': `gateway:
  admin:
    token: \${TEST_ADMIN:-}
    readonly_token: \${TEST_ADMIN_RO:-}
`,
  'channels.yaml': `channels:
  - id: demo
    protocol: openai
    base_url: builtin:demo
`,
  'models.yaml': `models:
  - name: chat-a
    owned_by: acme
    endpoints: [chat, responses]
    channels: [{ channel: demo }]
  - name: paint-1
    owned_by: acme
    endpoints: [images_generations]
    realname_required: true
    billing: image
    channels: [{ channel: demo }]
`,
  'prices.yaml': `prices:
  - model: chat-a
    input: 0.1
    cache_hit: 0.025
    output: 2.2
  - model: chat-a
    effective_from: "2030-01-01T00:00:00+08:00"
    input: 0.2
    output: 3.001
  - model: paint-1
    per_image:
      "1024x1024": 0.2
      "512x512": 0.000000001
`,
  'peak-windows.yaml': `peak_windows:
  - id: weekday-morning
    timezone: Asia/Shanghai
    days: [mon, tue, wed, thu, fri]
    ranges: ["09:00-12:00"]
    multiplier: 1.5
    models: ["chat-*"]
`,
  'campaigns.yaml': `campaigns:
  - id: vip-half-price
    starts_at: "2026-01-01T00:00:00+08:00"
    ends_at: "2027-01-01T00:00:00+08:00"
    models: ["chat-a"]
    accounts: [acct_SecretCustomer01]
    discount: 0.5
  - id: spring-sale
    starts_at: "2027-03-01T00:00:00+08:00"
    ends_at: "2027-03-08T00:00:00+08:00"
    models: ["chat-*", "paint-1"]
    discount: 0.8
  - id: long-gone
    starts_at: "2025-01-01T00:00:00+08:00"
    ends_at: "2025-02-01T00:00:00+08:00"
    models: ["chat-a"]
    discount: 0
`,
};

/** The fixture compiled with the given environment (the admin tokens are set by default). */
export function compileTable(
  env: Record<string, string> = { TEST_ADMIN: ADMIN_TOKEN, TEST_ADMIN_RO: READONLY_TOKEN },
): RoutingTable {
  const loaded = loadConfigTexts(Object.entries(FILES).map(([file, text]) => ({ file, text })));
  const { table, diagnostics } = compileConfig(loaded, { env, mode: 'serve', nowMs: COMPILED_AT });
  if (table === null) throw new Error(JSON.stringify(diagnostics, null, 2));
  return table;
}
