// The PGlite thread's queries as named prepared statements (decision 0073). PGlite's own
// `db.query` sends each call as six protocol messages, each its own pass into the WASM (parse,
// describe the statement, bind, describe the portal, execute, sync), and Postgres parses and
// plans the text every time. Here a text is parsed and described once per session; each call
// after that is one pass: bind, execute and sync in one message, its rows read with the row
// description kept from the prepare. Values are serialized by the parameter types Postgres
// described, with PGlite's own serializers, and rows parsed with its parsers: the same values
// in and out as `db.query`.
// Plain JavaScript, as the worker that loads it (decision 0023); types in pglite-statements.d.ts.
import { parse, protocol } from '@electric-sql/pglite';

const { serialize } = protocol;

/** Texts kept prepared; past it the least recently used is closed (the store's are ~40). */
export const MAX_PREPARED = 256;

/**
 * A prepared statement's result type changed under it (a migration): SQLSTATE 0A000 raised by
 * the plan cache's revalidation, not any other 0A000 (which a function may raise).
 */
function resultTypeChanged(err) {
  return err?.code === '0A000' && err?.routine === 'RevalidateCachedQuery';
}

const EXECUTE_SYNC = concat([serialize.execute({}), serialize.sync()]);

function concat(parts) {
  let length = 0;
  for (const p of parts) length += p.length;
  const out = new Uint8Array(length);
  let at = 0;
  for (const p of parts) {
    out.set(p, at);
    at += p.length;
  }
  return out;
}

export class PreparedStatements {
  #db;
  /** text → { name, paramTypes, rowDescription (null when the statement returns no rows) } */
  #byText = new Map();
  /** Names no longer used, closed with the next prepare outside a transaction block. */
  #stale = [];
  #counter = 0;

  constructor(db) {
    this.#db = db;
  }

  /** How many texts are prepared now (tests). */
  get size() {
    return this.#byText.size;
  }

  /**
   * The rows of `text` run with `params`, as `db.query(text, params)` returns them. It takes
   * PGlite's query lock only, not its transaction lock first as `db.query`, `db.exec` and COPY
   * do: the worker's driver sends one message at a time, so nothing waits on both.
   */
  query(text, params) {
    return this.#db.runExclusive(() => this.#query(text, params));
  }

  async #query(text, params) {
    const statement = this.#byText.get(text) ?? (await this.#prepare(text));
    try {
      return await this.#run(statement, params);
    } catch (err) {
      // Its result type changed since it was prepared: forget it and, outside a transaction
      // block (where the error has not aborted anything), prepare it again and run it once more.
      if (!resultTypeChanged(err)) throw err;
      this.#forget(text);
      if (this.#db.isInTransaction()) throw err;
      return await this.#run(await this.#prepare(text), params);
    }
  }

  async #run(statement, params) {
    const serializers = this.#db.serializers;
    const values = params.map((value, i) => {
      if (value === null || value === undefined) return null;
      const serialize = serializers[statement.paramTypes[i]];
      return serialize ? serialize(value) : value.toString();
    });
    const bind = serialize.bind({ statement: statement.name, values });
    // The Stream form parses the answer as it comes, where execProtocol copies it whole first.
    const messages = await this.#db.execProtocolStream(concat([bind, EXECUTE_SYNC]), {
      syncToFs: true,
    });
    // The least recently used text goes first when the map is full.
    this.#byText.delete(statement.text);
    this.#byText.set(statement.text, statement);
    const all =
      statement.rowDescription === null ? messages : [statement.rowDescription, ...messages];
    return parse.parseResults(all, this.#db.parsers)[0].rows;
  }

  async #prepare(text) {
    const name = `sy_${++this.#counter}`;
    const parts = [];
    if (this.#stale.length > 0 && !this.#db.isInTransaction()) {
      for (const old of this.#stale) parts.push(serialize.close({ type: 'S', name: old }));
      this.#stale = [];
    }
    parts.push(
      serialize.parse({ name, text }),
      serialize.describe({ type: 'S', name }),
      serialize.sync(),
    );
    const messages = await this.#db.execProtocolStream(concat(parts), { syncToFs: false });
    const params = messages.find((m) => m.name === 'parameterDescription');
    const rows = messages.find((m) => m.name === 'rowDescription');
    const statement = {
      name,
      text,
      paramTypes: params?.dataTypeIDs ?? [],
      rowDescription: rows ?? null,
    };
    if (this.#byText.size >= MAX_PREPARED) {
      const oldest = this.#byText.keys().next().value;
      this.#forget(oldest);
    }
    this.#byText.set(text, statement);
    return statement;
  }

  #forget(text) {
    const statement = this.#byText.get(text);
    if (statement === undefined) return;
    this.#byText.delete(text);
    this.#stale.push(statement.name);
  }
}
