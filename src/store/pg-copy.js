// COPY … FROM STDIN on a node-postgres client, as a Submittable (the query interface pg-cursor and
// pg-query-stream use): the statement goes out by the simple query protocol, the data as one
// CopyData message when the server asks for it, then CopyDone. The whole batch is one string
// already, so there is nothing to stream, and no package for it (decision 0045).
// Plain JavaScript so the Postgres worker thread (pg-worker.js) loads no TypeScript (decisions
// 0023, 0053); its types are in pg-copy.d.ts.

/**
 * pg's client calls `submit` when the connection is free and hands it each backend message of
 * the query; `callback` is called once: at ReadyForQuery, or at the error (the client then detaches
 * the query and holds the connection until the server's ReadyForQuery).
 */
class CopyIn {
  constructor(text, data, callback) {
    this.text = text;
    this.data = Buffer.from(data, 'utf8');
    this.callback = callback;
  }

  submit(connection) {
    connection.query(this.text);
    return null;
  }

  handleCopyInResponse(connection) {
    if (this.data.length > 0) connection.sendCopyFromChunk(this.data);
    connection.endCopyFrom();
  }

  handleError(err) {
    this.callback(err);
  }

  handleReadyForQuery() {
    this.callback(null);
  }

  handleCopyData() {}
  handleCommandComplete() {}
  handleEmptyQuery() {}
  handleRowDescription() {}
  handleDataRow() {}
  handlePortalSuspended() {}
}

export function copyFromStdin(client, text, data) {
  return new Promise((resolve, reject) => {
    let settled = false;
    const copy = new CopyIn(text, data, (err) => {
      if (settled) return;
      settled = true;
      if (err === null) resolve();
      else reject(err);
    });
    client.query(copy);
  });
}
