import { existsSync } from "node:fs";
import pg from "pg";
import { describe, expect, it } from "vitest";
import { isProcessAlive, runCommand } from "../../runtime/processes.js";
import { sharedPostgres, usePrivatePostgres } from "../../vitest/shared-services.js";
import { startPostgres } from "./start-postgres.js";

async function withClient<T>(connectionString: string, use: (client: pg.Client) => Promise<T>): Promise<T> {
  const client = new pg.Client({ connectionString });
  await client.connect();
  try {
    return await use(client);
  } finally {
    await client.end();
  }
}

async function setting(connectionString: string, name: string): Promise<string> {
  return withClient(connectionString, async (client) => {
    const result = await client.query<{ value: string }>("select current_setting($1) as value", [name]);
    return result.rows[0]?.value ?? "";
  });
}

/** Child processes of `pid` (PostgreSQL's backends and helpers of a postmaster). */
async function childPids(pid: number): Promise<number[]> {
  const { stdout } = await runCommand("ps", ["-A", "-o", "pid=,ppid="], { timeoutMs: 10_000 });
  return stdout
    .trim()
    .split("\n")
    .map((line) => line.trim().split(/\s+/).map(Number))
    .filter(([, parent]) => parent === pid)
    .map(([child]) => child as number);
}

describe("the run's shared PostgreSQL", () => {
  it("has max_prepared_transactions of at least 64", async () => {
    const postgres = sharedPostgres();
    expect(postgres.maxPreparedTransactions).toBeGreaterThanOrEqual(64);
    expect(
      Number(await setting(postgres.connectionString, "max_prepared_transactions")),
    ).toBeGreaterThanOrEqual(64);
  });
});

describe("a private PostgreSQL for crash tests", () => {
  const postgres = usePrivatePostgres();

  it("keeps a prepared transaction through an immediate restart; COMMIT PREPARED from a new connection makes its rows visible", async () => {
    const server = postgres();
    const url = server.connectionString;
    const gid = `testkit-${Date.now()}`;
    await withClient(url, async (client) => {
      await client.query("create table orders (id int primary key)");
      await client.query("begin");
      await client.query("insert into orders values (1), (2), (3)");
      const prepared = await client.query(`prepare transaction '${gid}'`);
      expect(prepared.command).toBe("PREPARE");
    });

    const pidBefore = server.pid;
    await server.restart({ immediate: true });
    if (pidBefore !== undefined) {
      expect(isProcessAlive(pidBefore)).toBe(false);
      expect(server.pid).not.toBe(pidBefore);
    }

    await withClient(url, async (client) => {
      const pending = await client.query("select gid from pg_prepared_xacts where gid = $1", [gid]);
      expect(pending.rowCount).toBe(1);
      expect((await client.query("select count(*)::int as n from orders")).rows[0]).toEqual({ n: 0 });
      await client.query(`commit prepared '${gid}'`);
      expect((await client.query("select count(*)::int as n from orders")).rows[0]).toEqual({ n: 3 });
    });
  });

  it("restart without immediate keeps committed data too", async () => {
    const server = postgres();
    await withClient(server.connectionString, (client) =>
      client.query("create table kept (v text); insert into kept values ('x')"),
    );
    await server.restart();
    const rows = await withClient(server.connectionString, (client) => client.query("select v from kept"));
    expect(rows.rows).toEqual([{ v: "x" }]);
  });

  it("stop() leaves no server process behind and deletes its folder", async () => {
    const server = postgres();
    const { pid, workDir } = server;
    const children = pid === undefined ? [] : await childPids(pid);
    if (server.provider === "local") {
      expect(isProcessAlive(pid!)).toBe(true);
      expect(children.length).toBeGreaterThan(0); // checkpointer, walwriter …
      expect(existsSync(workDir!)).toBe(true);
    }
    await server.stop();
    if (server.provider === "local") {
      expect(isProcessAlive(pid!)).toBe(false);
      expect(children.filter(isProcessAlive)).toEqual([]);
      expect(existsSync(workDir!)).toBe(false);
    }
  });
});

describe("a PostgreSQL without two-phase commit", () => {
  const postgres = usePrivatePostgres({ maxPreparedTransactions: 0 });

  it("has max_prepared_transactions = 0, and PREPARE TRANSACTION fails on it", async () => {
    const url = postgres().connectionString;
    expect(postgres().maxPreparedTransactions).toBe(0);
    expect(await setting(url, "max_prepared_transactions")).toBe("0");
    await withClient(url, async (client) => {
      await client.query("begin");
      await expect(client.query("prepare transaction 'nope'")).rejects.toThrow(
        /prepared transactions are disabled/,
      );
      await client.query("rollback");
    });
  });
});

describe("ONCEFLOW_POSTGRES_URL", () => {
  it("names a server that is used as is; restart is refused with a clear error", async () => {
    const shared = sharedPostgres();
    const postgres = await startPostgres({
      env: { ONCEFLOW_POSTGRES_URL: shared.connectionString },
      writer: () => {},
    });
    expect(postgres.provider).toBe("environment");
    expect(postgres.port).toBe(shared.port);
    await expect(postgres.restart({ immediate: true })).rejects.toThrow(
      /fault injection needs a provider the testkit controls/,
    );
    await postgres.stop();
  });

  it("is not used for a server that must have max_prepared_transactions = 0", async () => {
    const shared = sharedPostgres();
    const postgres = await startPostgres({
      env: { ...process.env, ONCEFLOW_POSTGRES_URL: shared.connectionString },
      maxPreparedTransactions: 0,
      writer: () => {},
    });
    try {
      expect(postgres.provider).not.toBe("environment");
      expect(postgres.maxPreparedTransactions).toBe(0);
    } finally {
      await postgres.stop();
    }
  });
});
