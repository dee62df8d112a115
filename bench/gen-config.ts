// Writes a large synthetic config (N models × C channels each, with prices, peak windows and
// campaigns) for the compile benchmark and the large-config test.
import { mkdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';

export async function writeLargeConfig(
  dir: string,
  models: number,
  channelsPerModel: number,
): Promise<void> {
  await mkdir(dir, { recursive: true });
  const channelCount = Math.max(channelsPerModel, Math.ceil(models / 50));
  const ch: string[] = ['channels:'];
  for (let i = 0; i < channelCount; i++) {
    ch.push(
      `  - id: ch-${i}`,
      `    protocol: ${i % 5 === 4 ? 'anthropic' : 'openai'}`,
      `    base_url: https://supplier-${i}.example.com/v1`,
      `    api_keys: ["\${BENCH_KEY_${i % 3}:-sk-bench}"]`,
      `    priority: ${i % 3}`,
      `    weight: ${1 + (i % 4)}`,
      `    capacity: ${32 + i}`,
    );
  }
  const md: string[] = ['models:'];
  const pr: string[] = ['prices:'];
  for (let m = 0; m < models; m++) {
    md.push(
      `  - name: model-${m}`,
      `    owned_by: vendor-${m % 17}`,
      `    endpoints: [chat, messages]`,
      `    capabilities: [tools]`,
      `    channels:`,
    );
    for (let k = 0; k < channelsPerModel; k++) {
      const c = (m * channelsPerModel + k) % channelCount;
      md.push(`      - { channel: ch-${c}, upstream_model: up-${m}-${k} }`);
    }
    pr.push(
      `  - { model: model-${m}, input: ${(m % 9) + 0.5}, cache_hit: 0.1, output: ${(m % 7) + 2.25} }`,
      `  - { model: model-${m}, effective_from: "2027-01-01T00:00:00+08:00", input: ${(m % 9) + 1}, output: ${(m % 7) + 3} }`,
    );
  }
  const windows = [
    'peak_windows:',
    '  - { id: cn-morning, days: [mon, tue, wed, thu, fri], ranges: ["09:00-12:00"], multiplier: 1.5, models: ["model-1*"] }',
    '  - { id: cn-afternoon, days: [mon, tue, wed, thu, fri], ranges: ["14:00-18:00"], multiplier: 1.25 }',
    '  - { id: us-evening, timezone: America/New_York, days: [sat, sun], ranges: ["18:00-22:00"], multiplier: 1.1, models: ["model-2*"] }',
  ];
  const campaigns = ['campaigns:'];
  for (let i = 0; i < 20; i++) {
    campaigns.push(
      `  - { id: camp-${i}, starts_at: "2026-0${1 + (i % 9)}-01T00:00:00+08:00", ends_at: "2027-0${1 + (i % 9)}-01T00:00:00+08:00", models: ["model-${i}*"], discount: 0.${5 + (i % 5)} }`,
    );
  }
  await Promise.all([
    writeFile(join(dir, 'channels.yaml'), ch.join('\n') + '\n'),
    writeFile(join(dir, 'models.yaml'), md.join('\n') + '\n'),
    writeFile(join(dir, 'prices.yaml'), pr.join('\n') + '\n'),
    writeFile(join(dir, 'windows.yaml'), windows.join('\n') + '\n'),
    writeFile(join(dir, 'campaigns.yaml'), campaigns.join('\n') + '\n'),
    writeFile(
      join(dir, 'limits.yaml'),
      'limits:\n  rpm: { default: 1000 }\n  channel_capacity_default: 64\n',
    ),
  ]);
}
