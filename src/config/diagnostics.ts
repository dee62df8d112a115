// A problem found in config, with the place a person must edit. validate prints every one at once.

export type Severity = 'error' | 'warning';

export interface Diagnostic {
  severity: Severity;
  /** Path relative to the config directory, e.g. "models.yaml". */
  file: string;
  /** 1-based; 0 when the problem has no single place (e.g. an empty directory). */
  line: number;
  col: number;
  message: string;
}

export function formatDiagnostic(d: Diagnostic): string {
  const where = d.line > 0 ? `${d.file}:${d.line}:${d.col}` : d.file;
  return `${where}: ${d.severity}: ${d.message}`;
}

/** Errors first, then by file and position, so output is stable for CI logs and tests. */
export function sortDiagnostics(list: Diagnostic[]): Diagnostic[] {
  return list.sort(
    (a, b) =>
      (a.severity === b.severity ? 0 : a.severity === 'error' ? -1 : 1) ||
      a.file.localeCompare(b.file) ||
      a.line - b.line ||
      a.col - b.col,
  );
}

export class ConfigError extends Error {
  readonly diagnostics: readonly Diagnostic[];
  constructor(diagnostics: readonly Diagnostic[]) {
    const errors = diagnostics.filter((d) => d.severity === 'error');
    super(
      `config has ${errors.length} error(s):\n` + errors.map((d) => formatDiagnostic(d)).join('\n'),
    );
    this.name = 'ConfigError';
    this.diagnostics = diagnostics;
  }
}
