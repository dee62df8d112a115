// Types of pg-copy.js (plain JavaScript so the Postgres worker thread loads no TypeScript).
import type pg from 'pg';

/**
 * Runs `text` (a `COPY … FROM STDIN` statement) on `client` with `data` as its input in text
 * format. Rejects with the server's error (a unique violation keeps its SQLSTATE in `code`).
 */
export function copyFromStdin(client: pg.ClientBase, text: string, data: string): Promise<void>;
