import { describe, expect, it } from "vitest";
import { runPostgresCli } from "./program.js";

async function run(...args: string[]) {
  const out: string[] = [];
  const err: string[] = [];
  const code = await runPostgresCli(args, {
    stdout: (text) => out.push(text),
    stderr: (text) => err.push(text),
  });
  return { code, out: out.join(""), err: err.join("") };
}

// Everything here fails before any connection: the address is never dialled.
const target = ["--url", "postgresql://nobody@127.0.0.1:1/none", "--sink-id", "orders.out"];

describe("onceflow-postgres (no server needed)", () => {
  it("describes the transactions commands and their flags", async () => {
    const group = await run("transactions", "--help");
    expect(group.code).toBe(0);
    expect(group.out).toContain("list");
    expect(group.out).toContain("rollback");
    const rollback = await run("transactions", "rollback", "--help");
    expect(rollback.code).toBe(0);
    for (const flag of ["--url", "--sink-id", "--checkpoint-below", "--all", "--job-stopped", "--dry-run"]) {
      expect(rollback.out).toContain(flag);
    }
  });

  it("refuses a rollback that does not say what to roll back", async () => {
    const { code, err } = await run("transactions", "rollback", ...target);
    expect(code).toBe(1);
    expect(err).toMatch(/^error \[CONFIGURATION\]: --all: say what to roll back/);
  });

  it("refuses --all together with --checkpoint-below", async () => {
    const { code, err } = await run(
      "transactions",
      "rollback",
      ...target,
      "--all",
      "--checkpoint-below",
      "3",
    );
    expect(code).toBe(1);
    expect(err).toContain("not both");
  });

  it("rejects a malformed --checkpoint-below, a bad sink id and a missing --url", async () => {
    const below = await run("transactions", "list", ...target, "--checkpoint-below", "soon");
    expect(below.code).toBe(1);
    expect(below.err).toContain("--checkpoint-below: must be a whole checkpoint id");
    const sinkId = await run(
      "transactions",
      "list",
      "--url",
      "postgresql://127.0.0.1:1/x",
      "--sink-id",
      "orders-out",
    );
    expect(sinkId.code).toBe(1);
    expect(sinkId.err).toContain("error [CONFIGURATION]: sinkId:");
    const missing = await run("transactions", "list", "--sink-id", "orders.out");
    expect(missing.code).toBe(1);
    expect(missing.err).toContain("--url");
  });
});
