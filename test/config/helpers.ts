// Fixtures for config tests: a small valid config as file texts, and a compile helper.
import { compileConfig, type CompileMode } from '../../src/config/compile.ts';
import type { Diagnostic } from '../../src/config/diagnostics.ts';
import { loadConfigTexts } from '../../src/config/load.ts';
import type { RoutingTable } from '../../src/table/types.ts';

export type Files = Record<string, string>;

export const BASE: Files = {
  'channels.yaml': `channels:
  - id: openai-main
    protocol: openai
    base_url: https://api.example.com/v1
    api_keys: ["\${TEST_OPENAI_KEY}"]
    priority: 10
  - id: openai-backup
    protocol: openai
    base_url: https://backup.example.com/v1
    api_keys: ["\${TEST_OPENAI_KEY}"]
    priority: 5
    weight: 3
  - id: claude
    protocol: anthropic
    base_url: https://api.anthropic.example/v1
    api_keys: ["\${TEST_ANTHROPIC_KEY}"]
`,
  'models.yaml': `models:
  - name: chat-a
    owned_by: acme
    family: r1
    endpoints: [chat, messages]
    capabilities: [tools, reasoning]
    channels:
      - { channel: openai-main, upstream_model: up-a }
      - { channel: openai-backup }
  - name: claude-x
    owned_by: anthropic
    endpoints: [messages, chat]
    channels:
      - { channel: claude, upstream_model: claude-x-2026 }
`,
  'prices.yaml': `prices:
  - model: chat-a
    input: 0.1
    cache_hit: 0.025
    output: 2.2
  - model: chat-a
    effective_from: "2030-01-01T00:00:00+08:00"
    input: 0.2
    output: 3
  - model: claude-x
    input: 21
    output: 105
`,
  'windows.yaml': `peak_windows:
  - id: day
    days: [mon, tue, wed, thu, fri]
    ranges: ["09:00-12:00"]
    multiplier: 1.5
`,
  'campaigns.yaml': `campaigns:
  - id: launch
    starts_at: "2026-01-01T00:00:00+08:00"
    ends_at: "2036-01-01T00:00:00+08:00"
    models: ["chat-*"]
    discount: 0.8
`,
  'reasoning.yaml': `reasoning:
  - family: r1
    efforts:
      low: { openai: { reasoning_effort: low } }
      high: { openai: { reasoning_effort: high } }
      max: { openai: { reasoning_effort: high } }
`,
};

export const ENV = { TEST_OPENAI_KEY: 'sk-test-openai-secret', TEST_ANTHROPIC_KEY: 'sk-ant-secret' };

export function compileFiles(
  files: Files,
  opts: { mode?: CompileMode; env?: Record<string, string>; nowMs?: number } = {},
): { table: RoutingTable | null; diagnostics: Diagnostic[] } {
  const loaded = loadConfigTexts(Object.entries(files).map(([file, text]) => ({ file, text })));
  return compileConfig(loaded, {
    env: opts.env ?? ENV,
    mode: opts.mode ?? 'validate',
    nowMs: opts.nowMs ?? Date.parse('2026-11-20T02:00:00Z'),
  });
}

export function errors(d: readonly Diagnostic[]): Diagnostic[] {
  return d.filter((x) => x.severity === 'error');
}
