import { setTimeout as sleep } from "node:timers/promises";
import { usePrivatePostgres } from "@onceflow/testkit/vitest";
import pg from "pg";
import { describe, expect, it } from "vitest";
import { type FixtureRun, runFixture } from "./crash-helpers.js";

/**
 * Change data capture exactly once under SIGKILL: a PostgresChangesSource → PostgresSink job is
 * killed again and again (and PostgreSQL crashed once) while a writer changes the captured table;
 * every committed change must be in the sink's table exactly once, checked against a history that a
 * trigger writes in the same transactions (read with a fresh connection, independent of the job).
 */

const KILLS = 7;

async function query<R extends pg.QueryResultRow>(
  url: string,
  text: string,
  values: unknown[] = [],
): Promise<R[]> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    return (await client.query<R>(text, values)).rows;
  } finally {
    await client.end();
  }
}

/**
 * Random transactions of 1–5 inserts, updates and deletes until `stop()` is called. A failing
 * connection (the server restarting) is replaced; whether its last transaction committed does not
 * matter, since the trigger's history is the oracle.
 */
function startWriter(url: string): { stop(): Promise<number> } {
  let running = true;
  let transactions = 0;
  const writeUntilFailure = async () => {
    const client = new pg.Client({ connectionString: url });
    client.on("error", () => undefined);
    await client.connect();
    try {
      const ids = (await client.query<{ id: number }>("select id from orders")).rows.map((row) => row.id);
      let nextId = Math.max(0, ...ids) + 1;
      const live = [...ids];
      while (running) {
        await client.query("begin");
        const operations = 1 + Math.floor(Math.random() * 5);
        for (let i = 0; i < operations; i++) {
          const choice = Math.random();
          if (live.length === 0 || choice < 0.5) {
            const id = nextId++;
            await client.query("insert into orders values ($1, $2)", [id, id]);
            live.push(id);
          } else if (choice < 0.85) {
            const id = live[Math.floor(Math.random() * live.length)] as number;
            await client.query("update orders set v = v + 1 where id = $1", [id]);
          } else {
            const id = live.splice(Math.floor(Math.random() * live.length), 1)[0] as number;
            await client.query("delete from orders where id = $1", [id]);
          }
        }
        await client.query("commit");
        transactions += 1;
        await sleep(5);
      }
    } finally {
      await client.end().catch(() => undefined);
    }
  };
  const done = (async () => {
    while (running) {
      await writeUntilFailure().catch(() => sleep(200));
    }
  })();
  return {
    async stop() {
      running = false;
      await done;
      return transactions;
    },
  };
}

async function kill(run: FixtureRun): Promise<void> {
  run.child.kill("SIGKILL");
  await run.exited;
}

describe("PostgreSQL changes → PostgreSQL, exactly once across SIGKILLs", () => {
  const postgres = usePrivatePostgres({ walLevel: "logical", provider: "local" });

  it(`keeps every committed change once through ${KILLS - 1} kills of the job and a PostgreSQL crash`, async () => {
    const url = postgres().connectionString;
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
    await query(
      url,
      "create table order_changes (xid bigint, commit_lsn text, change_index int, kind text, id int, v int)",
    );
    const env = {
      PG_URL: url,
      JOB_ID: "orders-changes",
      ORDERS: "public.orders",
      CHANGES_TABLE: "order_changes",
    };

    let run = runFixture(env, "changes-to-postgres.ts");
    try {
      // The slot exists and a checkpoint completed: from here on no committed change may be missed.
      await run.waitFor("ONCEFLOW-COMMITTED");
      const writer = startWriter(url);
      for (let k = 0; k < KILLS; k++) {
        await sleep(300 + Math.floor(Math.random() * 900));
        if (k === Math.floor(KILLS / 2)) {
          // A PostgreSQL crash instead of a kill: the job fails on its lost connections and restarts
          // in its process, from the latest checkpoint.
          await postgres().restart({ immediate: true });
          continue;
        }
        await kill(run);
        run = runFixture(env, "changes-to-postgres.ts");
        await run.waitFor("ONCEFLOW-COMMITTED", 120_000);
      }
      const transactions = await writer.stop();
      expect(transactions).toBeGreaterThan(0);

      const expected = Number(
        (await query<{ n: string }>(url, "select count(*) as n from orders_history"))[0]?.n,
      );
      for (let i = 0; i < 600; i++) {
        const got = Number(
          (await query<{ n: string }>(url, "select count(*) as n from order_changes"))[0]?.n,
        );
        if (got >= expected) break;
        await sleep(200);
      }
      // Several more checkpoint intervals: a duplicate written late would show up in them.
      await sleep(1500);
      await kill(run);

      const history = await query<{ xid: string; op: string; id: number; v: number | null }>(
        url,
        "select xid::text, op, id, v from orders_history order by seq",
      );
      const changes = await query<{
        xid: string;
        kind: string;
        id: number;
        v: number | null;
        commit_lsn: string;
        change_index: number;
      }>(
        url,
        "select xid::text, kind, id, v, commit_lsn, change_index from order_changes order by commit_lsn::pg_lsn, change_index",
      );
      const key = (row: { xid: string; id: number; v: number | null }, kind: string) =>
        `${row.xid}|${kind}|${row.id}|${row.v}`;
      const positions = changes.map((row) => `${row.commit_lsn}#${row.change_index}`);
      expect(new Set(positions).size, "no change twice").toBe(positions.length);
      expect(changes.map((row) => key(row, row.kind)).sort()).toEqual(
        history.map((row) => key(row, row.op)).sort(),
      );
      // In commit order per key: the sink's rows by (commit LSN, index) give each id's history in order.
      const perId = (rows: Array<{ id: number; text: string }>) => {
        const map = new Map<number, string[]>();
        for (const row of rows) map.set(row.id, [...(map.get(row.id) ?? []), row.text]);
        return map;
      };
      expect(perId(changes.map((row) => ({ id: row.id, text: key(row, row.kind) })))).toEqual(
        perId(history.map((row) => ({ id: row.id, text: key(row, row.op) }))),
      );
    } finally {
      if (run.child.exitCode === null && run.child.signalCode === null) await kill(run);
    }
  });
});
