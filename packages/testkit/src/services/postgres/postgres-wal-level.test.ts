import pg from "pg";
import { describe, expect, it } from "vitest";
import { usePrivatePostgres } from "../../vitest/shared-services.js";

describe('a private PostgreSQL started with walLevel: "logical"', () => {
  const postgres = usePrivatePostgres({ walLevel: "logical", provider: "local" });

  it("runs with wal_level=logical and can create a pgoutput replication slot", async () => {
    const server = postgres();
    expect(server.walLevel).toBe("logical");
    const client = new pg.Client({ connectionString: server.connectionString });
    await client.connect();
    try {
      const level = await client.query<{ wal_level: string }>(
        "select current_setting('wal_level') as wal_level",
      );
      expect(level.rows[0]?.wal_level).toBe("logical");
      await client.query("select pg_create_logical_replication_slot('testkit_probe', 'pgoutput')");
      const slots = await client.query<{ plugin: string }>(
        "select plugin from pg_replication_slots where slot_name = 'testkit_probe'",
      );
      expect(slots.rows[0]?.plugin).toBe("pgoutput");
      await client.query("select pg_drop_replication_slot('testkit_probe')");
    } finally {
      await client.end();
    }
  });
});
