// `switchyard validate DIR` and `switchyard compile DIR [--json]`: what CI runs before a rollout.
import { formatDiagnostic, sortDiagnostics } from '../config/diagnostics.ts';
import { compileDir } from '../config/source.ts';
import { printTable } from '../table/print.ts';

/** Prints every problem at once; exit code 1 on any error. */
export async function validateCommand(dir: string): Promise<number> {
  const { table, diagnostics } = await compileDir(dir, 'validate');
  for (const d of sortDiagnostics(diagnostics)) console.error(formatDiagnostic(d));
  const errors = diagnostics.filter((d) => d.severity === 'error').length;
  const warnings = diagnostics.length - errors;
  if (table === null) {
    console.error(`${dir}: ${errors} error(s), ${warnings} warning(s)`);
    return 1;
  }
  console.log(
    `${dir}: ok — ${table.models.size} models, ${table.channels.size} channels, version ${table.version}` +
      (warnings > 0 ? `, ${warnings} warning(s)` : ''),
  );
  return 0;
}

export async function compileCommand(dir: string, json: boolean): Promise<number> {
  const { table, diagnostics } = await compileDir(dir, 'validate');
  for (const d of sortDiagnostics(diagnostics)) console.error(formatDiagnostic(d));
  if (table === null) return 1;
  if (json) {
    console.log(JSON.stringify(printTable(table), null, 2));
    return 0;
  }
  console.log(`version ${table.version}`);
  for (const m of table.modelList) {
    const routes = [...m.routes.values()]
      .map(
        (r) =>
          `${r.endpoint}→${r.tiers.map((t) => t.candidates.map((c) => c.channel.id).join('|')).join(' > ')}`,
      )
      .join(', ');
    console.log(`  ${m.name}: ${routes}`);
  }
  return 0;
}
