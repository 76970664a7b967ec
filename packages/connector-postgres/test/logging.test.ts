import { inspect } from "node:util";
import { PostgresCheckpointStorage } from "@onceflow/connector-postgres";
import { createMemoryLogger } from "@onceflow/core";
import { describe, expect, it } from "vitest";
import { preparedPostgresUrl, sql, uniqueName } from "./helpers/postgres.js";

/**
 * The warning about an idle connection that failed used to carry the driver's
 * error, which references the whole pg Client — its password and the backend's secret key. Only
 * the error's name, message and code may be logged.
 */

const url = preparedPostgresUrl();

describe("what the connector logs about a failed idle connection", () => {
  it("names the error, and never the client, its password or the backend's secret key", async () => {
    const logger = createMemoryLogger();
    const applicationName = uniqueName("log");
    const password = `pw-${applicationName}`;
    // A role of its own with this password: the server may trust local logins or check passwords.
    const role = applicationName.replaceAll(/[^a-z0-9_]/gi, "_").toLowerCase();
    await sql(url, `CREATE ROLE ${role} LOGIN SUPERUSER PASSWORD '${password}'`);
    const address = new URL(url);
    address.username = role;
    address.password = password;
    const storage = new PostgresCheckpointStorage({
      connection: { connectionString: address.toString(), application_name: applicationName },
      table: uniqueName("ck"),
      logger,
    });
    try {
      await storage.list("job"); // leaves an idle connection in the pool
      await sql(url, "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = $1", [
        applicationName,
      ]);
      const deadline = Date.now() + 10_000;
      while (!logger.entries.some((entry) => entry.level === "warn") && Date.now() < deadline) {
        await new Promise((resolve) => setTimeout(resolve, 50));
      }
      const warnings = logger.entries.filter((entry) => entry.level === "warn");
      expect(warnings.map((entry) => entry.message)).toEqual([
        "an idle PostgreSQL connection failed; the pool replaces it",
      ]);
      expect(warnings[0]?.fields).toEqual({
        error: {
          name: "error",
          message: "terminating connection due to administrator command",
          code: "57P01",
        },
      });
      const everything = inspect(logger.entries, { depth: 20 });
      expect(everything).not.toContain(password);
      expect(everything).not.toMatch(/secretKey/i);
      expect(everything.length).toBeLessThan(1_000);
    } finally {
      await storage.close();
      await sql(url, `DROP OWNED BY ${role}`);
      await sql(url, `DROP ROLE ${role}`);
    }
  });
});
