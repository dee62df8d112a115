// A strict little parser for the Prometheus text format 0.0.4, so tests read /metrics the way a
// scraper would: every line must be a HELP, a TYPE, or a sample of a declared family.

export interface Sample {
  name: string;
  labels: Record<string, string>;
  value: number;
}

export interface Family {
  name: string;
  help: string;
  type: string;
  samples: Sample[];
}

const SAMPLE_HEAD = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{|\s)/;
const LABEL_NAME = /^[a-zA-Z_][a-zA-Z0-9_]*/;

function parseValue(text: string, line: string): number {
  if (text === '+Inf') return Infinity;
  if (text === '-Inf') return -Infinity;
  if (text === 'NaN') return NaN;
  const n = Number(text);
  if (text === '' || Number.isNaN(n)) throw new Error(`bad value in: ${line}`);
  return n;
}

function unescapeHelp(text: string): string {
  return text.replace(/\\(\\|n)/g, (_, c: string) => (c === 'n' ? '\n' : '\\'));
}

/** Labels from `{a="x",b="y"}` starting at `start`; returns them and the index after `}`. */
function parseLabels(line: string, start: number): [Record<string, string>, number] {
  const labels: Record<string, string> = {};
  let i = start + 1;
  while (line[i] !== '}') {
    const name = LABEL_NAME.exec(line.slice(i))?.[0];
    if (name === undefined || line[i + name.length] !== '=' || line[i + name.length + 1] !== '"') {
      throw new Error(`bad label at ${i} in: ${line}`);
    }
    i += name.length + 2;
    let value = '';
    for (;;) {
      const c = line[i];
      if (c === undefined) throw new Error(`unterminated label value in: ${line}`);
      if (c === '"') break;
      if (c === '\\') {
        const e = line[i + 1];
        if (e === '\\') value += '\\';
        else if (e === '"') value += '"';
        else if (e === 'n') value += '\n';
        else throw new Error(`bad escape \\${e} in: ${line}`);
        i += 2;
      } else {
        value += c;
        i++;
      }
    }
    if (name in labels) throw new Error(`duplicate label ${name} in: ${line}`);
    labels[name] = value;
    i++;
    if (line[i] === ',') i++;
    else if (line[i] !== '}') throw new Error(`expected , or } at ${i} in: ${line}`);
  }
  return [labels, i + 1];
}

function familyOf(families: Map<string, Family>, sampleName: string): Family | undefined {
  const direct = families.get(sampleName);
  if (direct !== undefined) return direct;
  const m = /^(.*)_(bucket|sum|count)$/.exec(sampleName);
  const f = m === null ? undefined : families.get(m[1] as string);
  return f?.type === 'histogram' ? f : undefined;
}

export function parsePrometheusText(text: string): Map<string, Family> {
  const families = new Map<string, Family>();
  if (!text.endsWith('\n')) throw new Error('exposition must end with a newline');
  for (const line of text.slice(0, -1).split('\n')) {
    if (line.startsWith('# HELP ')) {
      const [, name = '', help = ''] = /^# HELP (\S+) ?(.*)$/.exec(line) ?? [];
      if (families.has(name)) throw new Error(`HELP after samples or twice for ${name}`);
      families.set(name, { name, help: unescapeHelp(help), type: 'untyped', samples: [] });
      continue;
    }
    if (line.startsWith('# TYPE ')) {
      const [, name = '', type = ''] =
        /^# TYPE (\S+) (counter|gauge|histogram|summary|untyped)$/.exec(line) ?? [];
      const f = families.get(name);
      if (f === undefined || f.samples.length > 0) throw new Error(`TYPE out of place: ${line}`);
      f.type = type;
      continue;
    }
    if (line.startsWith('#') || line === '')
      throw new Error(`unexpected line: ${JSON.stringify(line)}`);
    const head = SAMPLE_HEAD.exec(line);
    if (head === null) throw new Error(`bad sample: ${line}`);
    const name = head[1] as string;
    let labels: Record<string, string> = {};
    let rest = line.slice(name.length);
    if (head[2] === '{') {
      const [parsed, end] = parseLabels(line, name.length);
      labels = parsed;
      rest = line.slice(end);
    }
    const parts = rest.trim().split(/\s+/);
    if (!rest.startsWith(' ') || parts.length < 1 || parts.length > 2) {
      throw new Error(`bad sample tail: ${line}`);
    }
    const family = familyOf(families, name);
    if (family === undefined) throw new Error(`sample of an undeclared family: ${line}`);
    family.samples.push({ name, labels, value: parseValue(parts[0] as string, line) });
  }
  return families;
}

/** The one sample with this name whose labels include `labels`. */
export function sampleValue(
  families: Map<string, Family>,
  name: string,
  labels: Record<string, string> = {},
): number | undefined {
  for (const f of families.values()) {
    for (const s of f.samples) {
      if (s.name !== name) continue;
      if (Object.entries(labels).every(([k, v]) => s.labels[k] === v)) return s.value;
    }
  }
  return undefined;
}
