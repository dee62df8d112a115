// A small Prometheus registry: counters, gauges, fixed-bucket histograms and scrape-time gauges,
// rendered in text exposition format 0.0.4. Label sets are bound once and the child kept
// (docs/decisions/0006-telemetry.md says why this is not prom-client).

export const PROMETHEUS_CONTENT_TYPE = 'text/plain; version=0.0.4; charset=utf-8';

const METRIC_NAME = /^[a-zA-Z_:][a-zA-Z0-9_:]*$/;
const LABEL_NAME = /^[a-zA-Z_][a-zA-Z0-9_]*$/;

/** Label names for a tuple of label values: one name per value. */
export type LabelNames<V extends readonly string[]> = { readonly [K in keyof V]: string };

/** `\` `"` and newline escaped, as the text format requires inside a label value. */
export function escapeLabelValue(value: string): string {
  return value.replace(/[\\"\n]/g, (c) => (c === '\\' ? '\\\\' : c === '"' ? '\\"' : '\\n'));
}

function escapeHelp(text: string): string {
  return text.replace(/[\\\n]/g, (c) => (c === '\\' ? '\\\\' : '\\n'));
}

/** A sample value as Prometheus (Go's ParseFloat) reads it. */
export function formatValue(value: number): string {
  if (Number.isFinite(value)) return String(value);
  if (Number.isNaN(value)) return 'NaN';
  return value > 0 ? '+Inf' : '-Inf';
}

/** `{a="x",b="y"}`, or '' with no labels; computed once per child. */
function labelBlock(names: readonly string[], values: readonly string[], extra: string): string {
  const parts: string[] = [];
  for (let i = 0; i < names.length; i++) {
    parts.push(`${names[i]}="${escapeLabelValue(values[i] ?? '')}"`);
  }
  if (extra !== '') parts.push(extra);
  return parts.length === 0 ? '' : `{${parts.join(',')}}`;
}

export class CounterChild {
  value = 0;
  /** Rendered label block, built when the child is bound. */
  readonly labelText: string;

  constructor(labelText: string) {
    this.labelText = labelText;
  }

  /** Adds n (default 1); a counter never goes down, so a negative n is a programming error. */
  inc(n = 1): void {
    if (!(n >= 0)) throw new RangeError(`counter increment must be >= 0, got ${n}`);
    this.value += n;
  }
}

export class GaugeChild {
  value = 0;
  readonly labelText: string;

  constructor(labelText: string) {
    this.labelText = labelText;
  }

  set(value: number): void {
    this.value = value;
  }

  inc(n = 1): void {
    this.value += n;
  }

  dec(n = 1): void {
    this.value -= n;
  }
}

export class HistogramChild {
  /** Per-bucket counts, not cumulative (render() adds them up); the last slot is +Inf. */
  readonly counts: Float64Array;
  sum = 0;
  count = 0;
  /**
   * The bucket bounds as a Float64Array: scanning a frozen number[] costs ~5 ns per bucket (boxed
   * doubles), this ~1 ns: observing past the last of 15 buckets went from 80 to 26 ns.
   */
  private readonly bounds: Float64Array;
  /** Rendered label blocks: one per bucket with its `le`, and the last without, for _sum/_count. */
  readonly labelTexts: readonly string[];

  constructor(upperBounds: readonly number[], labelNames: readonly string[], values: string[]) {
    this.counts = new Float64Array(upperBounds.length + 1);
    this.bounds = Float64Array.from(upperBounds);
    const texts = upperBounds.map((b) => labelBlock(labelNames, values, `le="${formatValue(b)}"`));
    texts.push(labelBlock(labelNames, values, 'le="+Inf"'), labelBlock(labelNames, values, ''));
    this.labelTexts = texts;
  }

  /** A linear scan: with ~15 buckets it is as fast as a binary search and simpler. */
  observe(value: number): void {
    const bounds = this.bounds;
    const n = bounds.length;
    let i = 0;
    while (i < n && value > (bounds[i] as number)) i++;
    this.counts[i] = (this.counts[i] as number) + 1;
    this.sum += value;
    this.count++;
  }
}

type Child = CounterChild | GaugeChild | HistogramChild;

/**
 * The common part of a labelled metric: children cached in a tree of Maps, one level per label,
 * so binding an existing label set allocates no key string.
 */
abstract class Metric<V extends readonly string[], C extends Child> {
  readonly name: string;
  readonly help: string;
  readonly labelNames: readonly string[];
  private readonly root: Map<string, unknown> = new Map();
  /** Children in the order they were bound, for render(). */
  readonly children: C[] = [];
  private readonly create: (values: string[]) => C;
  /** The one child of a metric without labels, bound at once so it renders 0 from the start. */
  private readonly unlabelled: C | null;

  constructor(
    name: string,
    help: string,
    labelNames: LabelNames<V>,
    create: (values: string[]) => C,
  ) {
    this.name = name;
    this.help = help;
    this.labelNames = labelNames;
    this.create = create;
    this.unlabelled = labelNames.length === 0 ? this.bind([]) : null;
  }

  /** The child for these label values, created on first use and kept: bind once, keep it. */
  labels(...values: V): C {
    if (this.unlabelled !== null) return this.unlabelled;
    if (values.length !== this.labelNames.length) return this.bind(values);
    let node: Map<string, unknown> = this.root;
    const last = values.length - 1;
    for (let i = 0; i < last; i++) {
      const next = node.get(values[i] as string);
      if (next === undefined) return this.bind(values);
      node = next as Map<string, unknown>;
    }
    const child = node.get(values[last] as string);
    return child === undefined ? this.bind(values) : (child as C);
  }

  private bind(values: readonly string[]): C {
    if (values.length !== this.labelNames.length) {
      throw new RangeError(
        `${this.name} takes ${this.labelNames.length} label values, got ${values.length}`,
      );
    }
    const child = this.create([...values]);
    if (values.length > 0) {
      let node = this.root;
      for (let i = 0; i < values.length - 1; i++) {
        const key = values[i] as string;
        let next = node.get(key) as Map<string, unknown> | undefined;
        if (next === undefined) {
          next = new Map();
          node.set(key, next);
        }
        node = next;
      }
      node.set(values[values.length - 1] as string, child);
    }
    this.children.push(child);
    return child;
  }

  /** Drops one label set (e.g. the previous config version of an info gauge). */
  remove(...values: V): void {
    const child = this.labels(...values);
    if (this.unlabelled !== null) return;
    let node = this.root;
    for (let i = 0; i < values.length - 1; i++) node = node.get(values[i] as string) as typeof node;
    node.delete(values[values.length - 1] as string);
    this.children.splice(this.children.indexOf(child), 1);
  }

  abstract render(out: string[]): void;

  protected header(out: string[], type: string): void {
    out.push(`# HELP ${this.name} ${escapeHelp(this.help)}`, `# TYPE ${this.name} ${type}`);
  }
}

export class Counter<V extends readonly string[] = []> extends Metric<V, CounterChild> {
  constructor(name: string, help: string, labelNames: LabelNames<V>) {
    super(name, help, labelNames, (values) => new CounterChild(labelBlock(labelNames, values, '')));
  }

  render(out: string[]): void {
    this.header(out, 'counter');
    for (const c of this.children) out.push(`${this.name}${c.labelText} ${formatValue(c.value)}`);
  }
}

export class Gauge<V extends readonly string[] = []> extends Metric<V, GaugeChild> {
  constructor(name: string, help: string, labelNames: LabelNames<V>) {
    super(name, help, labelNames, (values) => new GaugeChild(labelBlock(labelNames, values, '')));
  }

  render(out: string[]): void {
    this.header(out, 'gauge');
    for (const c of this.children) out.push(`${this.name}${c.labelText} ${formatValue(c.value)}`);
  }
}

export class Histogram<V extends readonly string[] = []> extends Metric<V, HistogramChild> {
  readonly upperBounds: readonly number[];

  constructor(name: string, help: string, labelNames: LabelNames<V>, buckets: readonly number[]) {
    const bounds = Object.freeze([...buckets]);
    checkBuckets(name, bounds, labelNames);
    super(name, help, labelNames, (values) => new HistogramChild(bounds, labelNames, values));
    this.upperBounds = bounds;
  }

  render(out: string[]): void {
    this.header(out, 'histogram');
    for (const c of this.children) {
      const texts = c.labelTexts;
      let cumulative = 0;
      for (let i = 0; i < c.counts.length; i++) {
        cumulative += c.counts[i] as number;
        out.push(`${this.name}_bucket${texts[i] as string} ${formatValue(cumulative)}`);
      }
      const plain = texts[texts.length - 1] as string;
      out.push(`${this.name}_sum${plain} ${formatValue(c.sum)}`);
      out.push(`${this.name}_count${plain} ${formatValue(c.count)}`);
    }
  }
}

function checkBuckets(
  name: string,
  bounds: readonly number[],
  labelNames: readonly string[],
): void {
  if (labelNames.includes('le')) throw new Error(`${name}: a histogram cannot have a label "le"`);
  if (bounds.length === 0) throw new Error(`${name}: a histogram needs at least one bucket`);
  for (let i = 0; i < bounds.length; i++) {
    const b = bounds[i] as number;
    if (!Number.isFinite(b) || (i > 0 && b <= (bounds[i - 1] as number))) {
      throw new Error(`${name}: buckets must be finite and increasing (+Inf is implicit)`);
    }
  }
}

/** Reports one sample; called by a gauge callback, once per label set, at scrape time. */
export type GaugeSample<V extends readonly string[]> = (value: number, ...labels: V) => void;

/** A gauge whose samples are read at scrape time (e.g. a pool's size), not pushed on change. */
export class CallbackGauge<V extends readonly string[] = []> {
  readonly name: string;
  readonly help: string;
  readonly labelNames: readonly string[];
  private readonly collect: (sample: GaugeSample<V>) => void;

  constructor(
    name: string,
    help: string,
    labelNames: LabelNames<V>,
    collect: (sample: GaugeSample<V>) => void,
  ) {
    this.name = name;
    this.help = help;
    this.labelNames = labelNames;
    this.collect = collect;
  }

  /** A collector that throws yields no samples for this scrape; the rest still renders. */
  render(out: string[]): void {
    out.push(`# HELP ${this.name} ${escapeHelp(this.help)}`, `# TYPE ${this.name} gauge`);
    const lines: string[] = [];
    try {
      this.collect((value, ...labels) => {
        lines.push(`${this.name}${labelBlock(this.labelNames, labels, '')} ${formatValue(value)}`);
      });
    } catch {
      return;
    }
    for (const line of lines) out.push(line);
  }
}

type Renderable = { readonly name: string; render(out: string[]): void };

export class Registry {
  private readonly metrics: Renderable[] = [];
  private readonly names = new Set<string>();

  counter<V extends readonly string[] = []>(
    name: string,
    help: string,
    labelNames: LabelNames<V>,
  ): Counter<V> {
    return this.add(name, labelNames, new Counter<V>(name, help, labelNames));
  }

  gauge<V extends readonly string[] = []>(
    name: string,
    help: string,
    labelNames: LabelNames<V>,
  ): Gauge<V> {
    return this.add(name, labelNames, new Gauge<V>(name, help, labelNames));
  }

  histogram<V extends readonly string[] = []>(
    name: string,
    help: string,
    labelNames: LabelNames<V>,
    buckets: readonly number[],
  ): Histogram<V> {
    return this.add(name, labelNames, new Histogram<V>(name, help, labelNames, buckets));
  }

  gaugeCallback<V extends readonly string[] = []>(
    name: string,
    help: string,
    labelNames: LabelNames<V>,
    collect: (sample: GaugeSample<V>) => void,
  ): CallbackGauge<V> {
    return this.add(name, labelNames, new CallbackGauge<V>(name, help, labelNames, collect));
  }

  /** The whole registry in text exposition format 0.0.4 (serve with PROMETHEUS_CONTENT_TYPE). */
  render(): string {
    const out: string[] = [];
    for (const m of this.metrics) m.render(out);
    out.push('');
    return out.join('\n');
  }

  private add<M extends Renderable>(name: string, labelNames: readonly string[], metric: M): M {
    if (!METRIC_NAME.test(name)) throw new Error(`invalid metric name "${name}"`);
    if (this.names.has(name)) throw new Error(`metric "${name}" is already registered`);
    for (const l of labelNames) {
      if (!LABEL_NAME.test(l) || l.startsWith('__')) {
        throw new Error(`${name}: invalid label name "${l}"`);
      }
    }
    if (new Set(labelNames).size !== labelNames.length) {
      throw new Error(`${name}: duplicate label name`);
    }
    this.names.add(name);
    this.metrics.push(metric);
    return metric;
  }
}
