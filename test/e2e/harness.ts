// End-to-end harness: a mock upstream speaking the real protocols, a config directory pointing
// channels at it, one shared embedded store, and a gateway started through createGateway — the
// same function `switchyard serve` uses. Clients are the official openai and Anthropic SDKs.
import { mkdtemp, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Anthropic from '@anthropic-ai/sdk';
import OpenAI from 'openai';
import { yuanToNano } from '../../src/billing/money.ts';
import { createGateway, type Gateway, type GatewayOptions } from '../../src/gateway.ts';
import { openStore } from '../../src/store/open-store.ts';
import type { SqlStore } from '../../src/store/sql-store.ts';
import type { Store, UsageRecord } from '../../src/store/store.ts';
import { MOCK_DEFAULT_KEY, startMockUpstream, type MockUpstream } from '../mock-upstream/server.ts';

export const E2E_CONFIG = (mockUrl: string): Record<string, string> => ({
  'gateway.yaml': `gateway:
  listen: { host: 127.0.0.1, port: 0 }
  admin: { token: "\${E2E_ADMIN_TOKEN:-e2e-admin-token}" }
`,
  'channels.yaml': `channels:
  - id: oa-main
    protocol: openai
    base_url: ${mockUrl}/v1
    api_keys: ["\${E2E_MOCK_KEY}"]
    priority: 10
    capacity: 50
    timeouts: { connect_ms: 1000, first_byte_ms: 2000, total_ms: 10000 }
    headers: { x-e2e-channel: oa-main, x-request-id: not-the-channels-to-set }
  - id: oa-backup
    protocol: openai
    base_url: ${mockUrl}/v1
    api_keys: ["\${E2E_MOCK_KEY}"]
    priority: 5
    timeouts: { connect_ms: 1000, first_byte_ms: 2000, total_ms: 10000 }
  - id: an-main
    protocol: anthropic
    base_url: ${mockUrl}/v1
    api_keys: ["\${E2E_MOCK_KEY}"]
    priority: 10
    timeouts: { connect_ms: 1000, first_byte_ms: 2000, total_ms: 10000 }
  - id: tiny
    protocol: openai
    base_url: ${mockUrl}/v1
    api_keys: ["\${E2E_MOCK_KEY}"]
    capacity: 1
    timeouts: { connect_ms: 1000, first_byte_ms: 3000, total_ms: 10000 }
`,
  'models.yaml': `models:
  - name: gpt-x
    owned_by: openai
    family: r
    endpoints: [chat, responses, messages, embeddings]
    capabilities: [tools, image_input, response_format, reasoning]
    max_output_tokens: 1000
    channels:
      - { channel: oa-main, upstream_model: gpt-x-up }
      - { channel: oa-backup, upstream_model: gpt-x-backup }
  - name: claude-y
    owned_by: anthropic
    family: r
    endpoints: [messages, chat]
    capabilities: [tools, image_input, reasoning]
    max_output_tokens: 1000
    channels:
      - { channel: an-main, upstream_model: claude-y-up }
  - name: plain
    owned_by: acme
    endpoints: [chat]
    max_output_tokens: 100
    channels: [{ channel: oa-main, upstream_model: plain-up }]
  - name: limited
    owned_by: acme
    endpoints: [chat]
    max_output_tokens: 100
    channels: [{ channel: oa-main, upstream_model: limited-up }]
  - name: narrow
    owned_by: acme
    endpoints: [chat]
    max_output_tokens: 100
    channels: [{ channel: tiny, upstream_model: narrow-up }]
  - name: painter
    owned_by: acme
    endpoints: [images_generations]
    realname_required: true
    billing: image
    channels: [{ channel: oa-main, upstream_model: painter-up }]
`,
  'prices.yaml': `prices:
  - { model: gpt-x, input: 2, cache_hit: 0.5, output: 8 }
  - { model: claude-y, input: 21, cache_hit: 2.1, output: 105 }
  - { model: plain, input: 1, output: 1 }
  - { model: limited, input: 1, output: 1 }
  - { model: narrow, input: 1, output: 1 }
  - model: painter
    per_image: { "1024x1024": 0.2, "512x512": 0.125 }
`,
  'limits.yaml': `limits:
  rpm:
    scope: account
    models: { limited: 2 }
`,
  'reasoning.yaml': `reasoning:
  - family: r
    efforts:
      low: { openai: { reasoning_effort: low }, anthropic: { thinking: { type: enabled, budget_tokens: 1024 } } }
      high: { openai: { reasoning_effort: high }, anthropic: { thinking: { type: enabled, budget_tokens: 4096 } } }
      max: { openai: { reasoning_effort: high, verbosity: high }, anthropic: { thinking: { type: enabled, budget_tokens: 8192 } } }
`,
});

/**
 * `base` plus one chat model `name` on channel oa-main (upstream `<name>-up`, ¥1 in and out): the
 * limits suites add a model of their own RPM this way.
 */
export function withChatModel(base: Record<string, string>, name: string): Record<string, string> {
  return {
    ...base,
    'models.yaml': `${base['models.yaml']}  - name: ${name}
    owned_by: acme
    endpoints: [chat]
    max_output_tokens: 100
    channels: [{ channel: oa-main, upstream_model: ${name}-up }]
`,
    'prices.yaml': `${base['prices.yaml']}  - { model: ${name}, input: 1, output: 1 }\n`,
  };
}

/**
 * E2E_CONFIG plus a model limited to 7 RPM (`rpm7`) and a model (`cap3-model`) whose only channel,
 * `capChannel`, has capacity 3: the protection-layer suites share it.
 */
export function limitsConfig(mockUrl: string, capChannel: string): Record<string, string> {
  const base = E2E_CONFIG(mockUrl);
  return {
    ...base,
    'channels.yaml': `${base['channels.yaml']}  - id: ${capChannel}
    protocol: openai
    base_url: ${mockUrl}/v1
    api_keys: ["\${E2E_MOCK_KEY}"]
    capacity: 3
    timeouts: { connect_ms: 1000, first_byte_ms: 5000, total_ms: 10000 }
`,
    'models.yaml': `${base['models.yaml']}  - name: rpm7
    owned_by: acme
    endpoints: [chat]
    max_output_tokens: 100
    channels: [{ channel: oa-main, upstream_model: rpm7-up }]
  - name: cap3-model
    owned_by: acme
    endpoints: [chat]
    max_output_tokens: 100
    channels: [{ channel: ${capChannel}, upstream_model: cap3-up }]
`,
    'prices.yaml': `${base['prices.yaml']}  - { model: rpm7, input: 1, output: 1 }
  - { model: cap3-model, input: 1, output: 1 }
`,
    'limits.yaml': `limits:
  rpm:
    scope: account
    models: { limited: 2, rpm7: 7 }
`,
  };
}

export interface Harness {
  mock: MockUpstream;
  gateway: Gateway;
  store: Store;
  configDir: string;
  openai(key: string, opts?: { maxRetries?: number }): OpenAI;
  anthropic(key: string): Anthropic;
  /** A new account with a balance (yuan) and a key; returns the key plaintext and ids. */
  account(opts?: {
    balance?: string;
    realname?: boolean;
    allowedModels?: string[] | null;
  }): Promise<{ key: string; accountId: string; keyId: string }>;
  /** The usage row of a request id, waiting for its settlement (written after the response). */
  usage(requestId: string): Promise<UsageRecord>;
  close(): Promise<void>;
}

let sharedStore: Promise<SqlStore> | null = null;

/** One in-memory PGlite per test file (it takes ~2 s to start). */
export function e2eStore(): Promise<SqlStore> {
  // As the gateway opens its own embedded store: the lease book on, keeping its slack through
  // idle spells (decision 0043), PGlite in a worker thread.
  sharedStore ??= openStore({
    url: null,
    dataDir: null,
    heartbeatMs: 0,
    leases: { idleReturnMs: null },
    workerThread: true,
  });
  return sharedStore;
}

export async function startHarness(
  opts: Partial<GatewayOptions> & {
    files?: (mockUrl: string) => Record<string, string>;
    /** The channels' upstream key (E2E_MOCK_KEY), which the mock then accepts alone. */
    upstreamKey?: string;
  } = {},
): Promise<Harness> {
  const upstreamKey = opts.upstreamKey ?? MOCK_DEFAULT_KEY;
  const mock = await startMockUpstream({ keys: [upstreamKey] });
  process.env.E2E_MOCK_KEY = upstreamKey;
  const configDir = await mkdtemp(join(tmpdir(), 'switchyard-e2e-'));
  const files = (opts.files ?? E2E_CONFIG)(mock.url);
  await Promise.all(
    Object.entries(files).map(([name, text]) => writeFile(join(configDir, name), text)),
  );
  const store = opts.store ?? (await e2eStore());
  const gateway = await createGateway({
    configDir,
    port: 0,
    store,
    watch: false,
    logLevel: false,
    tracing: 'memory',
    keyPollMs: 100,
    relay: { maxAttempts: 3, backoffMs: 5 },
    ...opts,
  });
  const baseURL = `${gateway.url}/v1`;
  return {
    mock,
    gateway,
    store,
    configDir,
    openai: (key, o = {}) => new OpenAI({ apiKey: key, baseURL, maxRetries: o.maxRetries ?? 0 }),
    anthropic: (key) => new Anthropic({ apiKey: key, baseURL: gateway.url, maxRetries: 0 }),
    async account(o = {}) {
      const acct = await store.createAccount({
        name: 'e2e',
        realnameVerified: o.realname ?? false,
      });
      const amount = yuanToNano(o.balance ?? '100');
      if (amount !== null && amount > 0n)
        await store.adjustBalance(acct.id, amount, 'topup', 'e2e');
      const created = await store.createKey({
        accountId: acct.id,
        name: 'e2e',
        allowedModels: o.allowedModels ?? null,
        expiresAt: null,
      });
      return { key: created.plaintext, accountId: acct.id, keyId: created.record.id };
    },
    async usage(requestId) {
      for (let i = 0; i < 200; i++) {
        const row = await store.getUsage(requestId);
        if (row !== null) return row;
        await new Promise((r) => setTimeout(r, 10));
      }
      throw new Error(`no usage row for ${requestId}`);
    },
    async close() {
      await gateway.close();
      await mock.close();
    },
  };
}
