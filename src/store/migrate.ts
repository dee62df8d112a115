// Applies the plain-SQL migrations in src/store/migrations in name order, each recorded with a
// sha256 checksum. One transaction under an advisory lock, so two instances starting together
// apply each migration once; a migration edited after it was applied is an error.

import { createHash } from 'node:crypto';
import { readdir, readFile } from 'node:fs/promises';
import type { Driver } from './driver.ts';
import type { MigrationReport } from './store.ts';
import { StoreError } from './store.ts';

export interface Migration {
  /** File name, e.g. '0001_init.sql'; applied in ascending order. */
  name: string;
  sql: string;
}

const MIGRATIONS_DIR = new URL('./migrations/', import.meta.url);

/** Line endings are normalized so a checkout with CRLF does not look like an edited migration. */
export function migrationChecksum(sql: string): string {
  return createHash('sha256').update(sql.replace(/\r\n/g, '\n')).digest('hex');
}

export async function loadMigrations(dir: URL = MIGRATIONS_DIR): Promise<Migration[]> {
  const names = (await readdir(dir)).filter((n) => n.endsWith('.sql')).sort();
  const migrations: Migration[] = [];
  for (const name of names) {
    migrations.push({ name, sql: await readFile(new URL(name, dir), 'utf8') });
  }
  return migrations;
}

export async function runMigrations(
  driver: Driver,
  migrations: readonly Migration[],
): Promise<MigrationReport> {
  return driver.transaction(async (tx) => {
    // Keyed by schema, so test runs in separate schemas of one database do not wait on each other.
    await tx.query(
      `SELECT pg_advisory_xact_lock(hashtext('switchyard.migrate.' || current_schema()))`,
    );
    await tx.exec(`CREATE TABLE IF NOT EXISTS schema_migrations (
      name text PRIMARY KEY,
      checksum text NOT NULL,
      applied_at timestamptz NOT NULL DEFAULT now()
    )`);
    const rows = await tx.query<{ name: string; checksum: string }>(
      'SELECT name, checksum FROM schema_migrations',
    );
    const applied = new Map(rows.map((r) => [r.name, r.checksum]));
    const report: MigrationReport = { applied: [] };
    for (const m of migrations) {
      const checksum = migrationChecksum(m.sql);
      const recorded = applied.get(m.name);
      if (recorded !== undefined) {
        if (recorded !== checksum) {
          throw new StoreError(
            'migration_changed',
            `migration ${m.name} was changed after it was applied (recorded checksum ` +
              `${recorded.slice(0, 12)}…, file ${checksum.slice(0, 12)}…); add a new migration instead`,
          );
        }
        continue;
      }
      try {
        await tx.exec(m.sql);
      } catch (err) {
        const reason = err instanceof Error ? err.message : String(err);
        throw new StoreError('migration_failed', `migration ${m.name} failed: ${reason}`);
      }
      await tx.query('INSERT INTO schema_migrations (name, checksum) VALUES ($1, $2)', [
        m.name,
        checksum,
      ]);
      report.applied.push(m.name);
    }
    // Migrations recorded but absent from `migrations` belong to a newer release running beside
    // this one during a rolling deploy; they are left alone.
    return report;
  });
}
