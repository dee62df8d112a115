// COPY … FROM STDIN on a node-postgres client, as a Submittable (the query interface pg-cursor and
// pg-query-stream use): the statement goes out by the simple query protocol, the data as one
// CopyData message when the server asks for it, then CopyDone. The whole batch is one string
// already, so there is nothing to stream, and no package for it (decision 0045).

import type pg from 'pg';

/** The parts of pg's Connection a COPY uses (lib/connection.js). */
interface CopyConnection {
  query(text: string): void;
  sendCopyFromChunk(chunk: Buffer): void;
  endCopyFrom(): void;
}

type Callback = (err: Error | null) => void;

/**
 * pg's client calls `submit` when the connection is free and hands it each backend message of
 * the query; `callback` is called once: at ReadyForQuery, or at the error (the client then detaches
 * the query and holds the connection until the server's ReadyForQuery).
 */
class CopyIn {
  callback: Callback;
  private readonly text: string;
  private readonly data: Buffer;

  constructor(text: string, data: string, callback: Callback) {
    this.text = text;
    this.data = Buffer.from(data, 'utf8');
    this.callback = callback;
  }

  submit(connection: CopyConnection): null {
    connection.query(this.text);
    return null;
  }

  handleCopyInResponse(connection: CopyConnection): void {
    if (this.data.length > 0) connection.sendCopyFromChunk(this.data);
    connection.endCopyFrom();
  }

  handleError(err: Error): void {
    this.callback(err);
  }

  handleReadyForQuery(): void {
    this.callback(null);
  }

  handleCopyData(): void {}
  handleCommandComplete(): void {}
  handleEmptyQuery(): void {}
  handleRowDescription(): void {}
  handleDataRow(): void {}
  handlePortalSuspended(): void {}
}

/**
 * Runs `text` (a `COPY … FROM STDIN` statement) on `client` with `data` as its input in text
 * format. Rejects with the server's error (a unique violation keeps its SQLSTATE in `code`).
 */
export function copyFromStdin(client: pg.ClientBase, text: string, data: string): Promise<void> {
  return new Promise<void>((resolve, reject) => {
    let settled = false;
    const copy = new CopyIn(text, data, (err) => {
      if (settled) return;
      settled = true;
      if (err === null) resolve();
      else reject(err);
    });
    // pg's typings know submittables only through QueryConfig; this is the same call.
    (client as unknown as { query(q: CopyIn): void }).query(copy);
  });
}
