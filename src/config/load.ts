// Reads every YAML file of a config directory into plain values. Fast path: js-yaml (about 10x
// faster than `yaml` on a 2.4 MB config: 150 ms against 1,450 ms), keeping the source text of each
// number so prices never pass through a float. Positions (line, column) are computed lazily with
// `yaml`, only when a diagnostic needs one, and `yaml` reports every syntax error at once.
import { readdir, readFile } from 'node:fs/promises';
import { join } from 'node:path';
import {
  CORE_SCHEMA,
  defineScalarTag,
  floatCoreTag,
  intCoreTag,
  load as loadYaml,
  NOT_RESOLVED,
  type ScalarTagDefinition,
} from 'js-yaml';
import { isMap, isScalar, isSeq, LineCounter, parseDocument } from 'yaml';
import type { Diagnostic } from './diagnostics.ts';

export interface Position {
  line: number;
  col: number;
}

/** A number as written: js-yaml hands it to us while parsing, before any float exists. */
class NumberLiteral {
  readonly source: string;
  readonly value: number;
  constructor(source: string, value: number) {
    this.source = source;
    this.value = value;
  }
}

function literal(tag: ScalarTagDefinition<number>): ScalarTagDefinition<NumberLiteral> {
  return defineScalarTag<NumberLiteral>(tag.tagName, {
    implicit: tag.implicit,
    implicitFirstChars: tag.implicitFirstChars,
    resolve: (source, isExplicit, tagName) => {
      const v = tag.resolve(source, isExplicit, tagName);
      return v === NOT_RESOLVED ? NOT_RESOLVED : new NumberLiteral(source.trim(), v);
    },
    identify: () => false,
  });
}

const SCHEMA = CORE_SCHEMA.withTags(literal(intCoreTag), literal(floatCoreTag));

export class LoadedFile {
  /** Path relative to the config directory. */
  readonly file: string;
  readonly text: string;
  readonly value: unknown;
  /** JSON pointer of each number scalar to its source text ("0.1" stays "0.1"). */
  readonly numberSources: Map<string, string>;
  private located: { values: Map<string, Position>; keys: Map<string, Position> } | null = null;

  constructor(file: string, text: string, value: unknown, numberSources: Map<string, string>) {
    this.file = file;
    this.text = text;
    this.value = value;
    this.numberSources = numberSources;
  }

  /** Where the value at a JSON pointer ("/models/0/name") starts. */
  position(pointer: string): Position | undefined {
    return this.locate().values.get(pointer);
  }

  /** Where the mapping key of the value at a JSON pointer starts. */
  keyPosition(pointer: string): Position | undefined {
    return this.locate().keys.get(pointer);
  }

  /** The position of the pointer or of its nearest ancestor that has one. */
  nearest(pointer: string): Position {
    let p = pointer;
    for (;;) {
      const pos = this.position(p);
      if (pos !== undefined) return pos;
      if (p === '') return { line: 1, col: 1 };
      p = p.slice(0, p.lastIndexOf('/'));
    }
  }

  private locate(): { values: Map<string, Position>; keys: Map<string, Position> } {
    if (this.located === null) this.located = locate(this.text);
    return this.located;
  }
}

export interface LoadResult {
  files: LoadedFile[];
  diagnostics: Diagnostic[];
}

const YAML_FILE = /\.ya?ml$/;

export function escapePointer(key: string): string {
  return key.replace(/~/g, '~0').replace(/\//g, '~1');
}

/** Loads the directory's *.yaml / *.yml files (not recursive), in name order. */
export async function loadConfigDir(dir: string): Promise<LoadResult> {
  let names: string[];
  try {
    names = (await readdir(dir)).filter((n) => YAML_FILE.test(n)).sort();
  } catch (err) {
    const reason = err instanceof Error ? err.message : String(err);
    return { files: [], diagnostics: [{ severity: 'error', file: dir, line: 0, col: 0, message: `cannot read config directory: ${reason}` }] };
  }
  const texts = await Promise.all(names.map((n) => readFile(join(dir, n), 'utf8')));
  return loadConfigTexts(names.map((file, i) => ({ file, text: texts[i] ?? '' })));
}

/** Parses already-read files; used by loadConfigDir, the embedded default and tests. */
export function loadConfigTexts(inputs: readonly { file: string; text: string }[]): LoadResult {
  const diagnostics: Diagnostic[] = [];
  if (inputs.length === 0) {
    diagnostics.push({ severity: 'error', file: '.', line: 0, col: 0, message: 'no *.yaml files in the config directory' });
  }
  const files: LoadedFile[] = [];
  for (const { file, text } of inputs) {
    let raw: unknown;
    try {
      raw = text.trim() === '' ? {} : loadYaml(text, { schema: SCHEMA, filename: file });
    } catch {
      diagnostics.push(...syntaxErrors(file, text));
      continue;
    }
    const numberSources = new Map<string, string>();
    const walk = (node: unknown, pointer: string): unknown => {
      if (node instanceof NumberLiteral) {
        numberSources.set(pointer, node.source);
        return node.value;
      }
      if (Array.isArray(node)) return node.map((v, i) => walk(v, `${pointer}/${i}`));
      if (node !== null && typeof node === 'object') {
        const out: Record<string, unknown> = {};
        for (const [k, v] of Object.entries(node)) out[k] = walk(v, `${pointer}/${escapePointer(k)}`);
        return out;
      }
      return node;
    };
    files.push(new LoadedFile(file, text, raw === null || raw === undefined ? {} : walk(raw, ''), numberSources));
  }
  return { files, diagnostics };
}

/** Every syntax problem of a file, with positions (the `yaml` parser keeps going after one). */
function syntaxErrors(file: string, text: string): Diagnostic[] {
  const lineCounter = new LineCounter();
  const doc = parseDocument(text, { lineCounter, prettyErrors: false, uniqueKeys: true });
  const out: Diagnostic[] = doc.errors.map((e) => {
    const pos = lineCounter.linePos(e.pos[0]);
    return { severity: 'error', file, line: pos.line, col: pos.col, message: `YAML: ${e.message.split('\n')[0]}` };
  });
  if (out.length === 0) {
    try {
      loadYaml(text, { schema: SCHEMA, filename: file });
    } catch (err) {
      const mark = (err as { mark?: { line: number; column: number } }).mark;
      const reason = err instanceof Error ? (err as { reason?: string }).reason ?? err.message : String(err);
      out.push({ severity: 'error', file, line: (mark?.line ?? 0) + 1, col: (mark?.column ?? 0) + 1, message: `YAML: ${reason}` });
    }
  }
  return out;
}

function locate(text: string): { values: Map<string, Position>; keys: Map<string, Position> } {
  const values = new Map<string, Position>();
  const keys = new Map<string, Position>();
  const lineCounter = new LineCounter();
  const doc = parseDocument(text, { lineCounter, prettyErrors: false });
  const at = (range: readonly number[] | null | undefined): Position =>
    range ? lineCounter.linePos(range[0] ?? 0) : { line: 1, col: 1 };
  const walk = (node: unknown, pointer: string): void => {
    if (isMap(node)) {
      values.set(pointer, at(node.range));
      for (const pair of node.items) {
        const key = isScalar(pair.key) ? String(pair.key.value) : String(pair.key);
        const child = `${pointer}/${escapePointer(key)}`;
        if (isScalar(pair.key)) keys.set(child, at(pair.key.range));
        walk(pair.value, child);
      }
    } else if (isSeq(node)) {
      values.set(pointer, at(node.range));
      node.items.forEach((item, i) => walk(item, `${pointer}/${i}`));
    } else if (isScalar(node)) {
      values.set(pointer, at(node.range));
    }
  };
  walk(doc.contents, '');
  return { values, keys };
}
