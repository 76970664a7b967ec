import { setTimeout as sleep } from "node:timers/promises";
import pg from "pg";

// The captured tables of the change data capture chaos runs, the applications that write them,
// and their histories: what an independent reader compares the job's output with.

export async function query<R extends pg.QueryResultRow = pg.QueryResultRow>(
  url: string,
  text: string,
  values: unknown[] = [],
): Promise<R[]> {
  const client = new pg.Client({ connectionString: url });
  client.on("error", () => undefined);
  await client.connect();
  try {
    return (await client.query<R>(text, values)).rows;
  } finally {
    await client.end().catch(() => undefined);
  }
}

/** A writer running until `stop()`, which resolves with the transactions it saw committed. */
export interface TableWriter {
  stop(): Promise<number>;
}

/**
 * Runs `transaction` again and again on one connection, a short pause between, until stopped. A
 * failing connection (the server crashing) is replaced; whether its last transaction committed
 * does not matter, since the history in the database is the oracle, not this count.
 */
function writeInLoop(
  url: string,
  random: () => number,
  transaction: (client: pg.Client) => Promise<void>,
  prepare: (client: pg.Client) => Promise<void> = async () => undefined,
): TableWriter {
  let running = true;
  let committed = 0;
  const writeUntilFailure = async () => {
    const client = new pg.Client({ connectionString: url });
    client.on("error", () => undefined);
    await client.connect();
    try {
      await prepare(client);
      while (running) {
        await client.query("begin");
        await transaction(client);
        await client.query("commit");
        committed += 1;
        await sleep(2 + Math.floor(random() * 6));
      }
    } finally {
      await client.end().catch(() => undefined);
    }
  };
  const done = (async () => {
    while (running) await writeUntilFailure().catch(() => sleep(200));
  })();
  return {
    async stop() {
      running = false;
      await done;
      return committed;
    },
  };
}

/** The outbox: rows the application inserts in its transactions, keyed by `aggregate_id`. */
export async function createOutbox(url: string): Promise<void> {
  await query(
    url,
    "create table outbox (id bigserial primary key, aggregate_id text not null, payload jsonb not null)",
  );
}

/**
 * Transactions of 1–4 outbox rows for random aggregates, one connection: ids (bigserial) then
 * follow commit order, which the per-key order check relies on.
 */
export function startOutboxApplication(url: string, random: () => number): TableWriter {
  return writeInLoop(url, random, async (client) => {
    const rows = 1 + Math.floor(random() * 4);
    for (let i = 0; i < rows; i++) {
      await client.query("insert into outbox (aggregate_id, payload) values ($1, $2)", [
        `order-${Math.floor(random() * 20)}`,
        JSON.stringify({ at: Date.now(), n: i }),
      ]);
    }
  });
}

/**
 * Table `orders` and its history: a trigger writes every row change, with its transaction id, into
 * `orders_history` in the same transaction — committed exactly when the change is.
 */
export async function createOrdersWithHistory(url: string): Promise<void> {
  await query(url, "create table orders (id int primary key, v int not null)");
  await query(
    url,
    "create table orders_history (seq bigserial primary key, xid bigint, op text, id int, v int)",
  );
  await query(
    url,
    `create function record_order_change() returns trigger language plpgsql as $$
     begin
       insert into orders_history (xid, op, id, v)
         values (txid_current() % 4294967296, lower(TG_OP), coalesce(NEW.id, OLD.id), case when TG_OP = 'DELETE' then null else NEW.v end);
       return null;
     end $$`,
  );
  await query(
    url,
    "create trigger orders_history after insert or update or delete on orders for each row execute function record_order_change()",
  );
}

/** Random transactions of 1–5 inserts, updates and deletes of `orders`. */
export function startOrdersWriter(url: string, random: () => number): TableWriter {
  let nextId = 1;
  let live: number[] = [];
  return writeInLoop(
    url,
    random,
    async (client) => {
      const operations = 1 + Math.floor(random() * 5);
      for (let i = 0; i < operations; i++) {
        const choice = random();
        if (live.length === 0 || choice < 0.5) {
          const id = nextId++;
          await client.query("insert into orders values ($1, $2)", [id, id]);
          live.push(id);
        } else if (choice < 0.85) {
          const id = live[Math.floor(random() * live.length)] as number;
          await client.query("update orders set v = v + 1 where id = $1", [id]);
        } else {
          const id = live.splice(Math.floor(random() * live.length), 1)[0] as number;
          await client.query("delete from orders where id = $1", [id]);
        }
      }
    },
    // After a lost connection the last transaction may or may not have committed: ask the table.
    async (client) => {
      live = (await client.query<{ id: number }>("select id from orders")).rows.map((row) => row.id);
      nextId = Math.max(nextId, ...live.map((id) => id + 1));
      const [max] = (await client.query<{ id: number | null }>("select max(id) as id from orders_history"))
        .rows;
      nextId = Math.max(nextId, (max?.id ?? 0) + 1);
    },
  );
}
