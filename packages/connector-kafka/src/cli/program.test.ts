import { describe, expect, it } from "vitest";
import { runKafkaCli } from "./program.js";

async function run(...args: string[]) {
  const out: string[] = [];
  const err: string[] = [];
  const code = await runKafkaCli(args, {
    stdout: (text) => out.push(text),
    stderr: (text) => err.push(text),
  });
  return { code, out: out.join(""), err: err.join("") };
}

// Everything here fails before any connection: the broker address is never dialled.
const brokers = ["--brokers", "127.0.0.1:1"];

describe("onceflow-kafka (no broker needed)", () => {
  it("describes the transactions commands", async () => {
    const { code, out } = await run("transactions", "--help");
    expect(code).toBe(0);
    expect(out).toContain("list");
    expect(out).toContain("abort");
  });

  it("refuses an abort that does not say what to abort", async () => {
    const { code, err } = await run("transactions", "abort", ...brokers);
    expect(code).toBe(1);
    expect(err).toMatch(/^error \[CONFIGURATION\]: --id: say what to abort/);
  });

  it("refuses --prefix without --older-than, so a running job's young transactions are never aborted by prefix alone", async () => {
    const { code, err } = await run("transactions", "abort", ...brokers, "--prefix", "orders");
    expect(code).toBe(1);
    expect(err).toContain("--older-than");
  });

  it("refuses --id together with --prefix", async () => {
    const { code, err } = await run("transactions", "abort", ...brokers, "--id", "a", "--prefix", "b");
    expect(code).toBe(1);
    expect(err).toContain("not both");
  });

  it("rejects a malformed --older-than and a missing --brokers", async () => {
    const age = await run("transactions", "list", ...brokers, "--older-than", "soon");
    expect(age.code).toBe(1);
    expect(age.err).toContain("--older-than: must be a number of milliseconds");
    const missing = await run("transactions", "list");
    expect(missing.code).toBe(1);
    expect(missing.err).toContain("--brokers");
  });
});
