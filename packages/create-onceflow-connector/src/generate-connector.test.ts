import { mkdir, mkdtemp, readdir, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { connectorKindNames } from "./connector-kinds.js";
import { generateConnector } from "./generate-connector.js";
import { builtOnceflowVersion } from "./onceflow-version.js";

let work = "";

beforeEach(async () => {
  work = await mkdtemp(join(tmpdir(), "create-onceflow-connector-"));
});

afterEach(async () => {
  await rm(work, { recursive: true, force: true });
});

describe("generateConnector", () => {
  it("writes the custom skeleton with the names put in", async () => {
    const written = await generateConnector({
      packageName: "@acme/onceflow-connector-ledger",
      kind: "custom",
      directory: join(work, "ledger"),
    });
    expect(written.files).toEqual([
      ".changeset/README.md",
      ".changeset/config.json",
      ".github/workflows/ci.yml",
      ".gitignore",
      "LICENSE",
      "README.md",
      "package.json",
      "src/index.ts",
      "src/ledger-sink.ts",
      "test/ledger-sink.contract.test.ts",
      "tsconfig.json",
      "tsup.config.ts",
      "vitest.config.ts",
    ]);
    const sink = await readFile(join(written.directory, "src/ledger-sink.ts"), "utf8");
    expect(sink).toContain(
      "export class LedgerSink<IN> extends TwoPhaseCommitSink<IN, LedgerSinkTransaction>",
    );
    // The rules are in the skeleton as comments.
    for (const rule of [
      "MUST be IDEMPOTENT",
      "keep it SMALL",
      "DURABLE",
      "INVISIBLE",
      "recoveredSubtaskIndexes",
    ]) {
      expect(sink).toContain(rule);
    }
    expect(await readFile(join(written.directory, "README.md"), "utf8")).toContain(
      "npm install @acme/onceflow-connector-ledger",
    );
  });

  it("writes package.json: dual exports with types first, core as a peer, the keyword", async () => {
    const written = await generateConnector({
      packageName: "onceflow-connector-acme",
      kind: "custom",
      directory: join(work, "acme"),
      onceflowVersion: "1.2.3",
    });
    const json = JSON.parse(await readFile(join(written.directory, "package.json"), "utf8"));
    expect(json.exports["."]).toEqual({
      import: { types: "./dist/index.d.ts", default: "./dist/index.js" },
      require: { types: "./dist/index.d.cts", default: "./dist/index.cjs" },
    });
    expect(json.peerDependencies).toEqual({ "@onceflow/core": "^1.2.3" });
    expect(json.devDependencies).toMatchObject({ "@onceflow/core": "^1.2.3", "@onceflow/testkit": "^1.2.3" });
    expect(json.dependencies).toBeUndefined();
    expect(json.keywords).toContain("onceflow-connector");
    expect(json.license).toBe("Apache-2.0");
    expect(json.files).toEqual(["dist", "README.md", "LICENSE"]);
  });

  it.each(connectorKindNames())("leaves no __TOKEN__ in any file of the %s kind", async (kind) => {
    const written = await generateConnector({
      packageName: "onceflow-connector-acme",
      kind,
      directory: join(work, kind),
    });
    for (const file of written.files) {
      expect(file).not.toMatch(/__[A-Z_]+__/);
      expect(await readFile(join(written.directory, file), "utf8"), file).not.toMatch(/__[A-Z][A-Z_]+__/);
    }
    expect(written.onceflowVersion).toBe(builtOnceflowVersion());
  });

  it("the redis kind writes the Redis sink and depends on node-redis", async () => {
    const written = await generateConnector({
      packageName: "onceflow-connector-redis-orders",
      kind: "redis",
      directory: join(work, "redis"),
    });
    expect(written.files).toContain("src/redis-sink.ts");
    const json = JSON.parse(await readFile(join(written.directory, "package.json"), "utf8"));
    expect(Object.keys(json.dependencies)).toContain("redis");
    expect(json.keywords).toContain("redis");
  });

  it("the source kind writes the Redis Streams source with its source contract test", async () => {
    const written = await generateConnector({
      packageName: "onceflow-connector-redis-streams",
      kind: "source",
      directory: join(work, "source"),
    });
    expect(written.files).toEqual(
      expect.arrayContaining(["src/redis-streams-source.ts", "test/redis-streams-source.contract.test.ts"]),
    );
    expect(written.files.some((file) => file.includes("sink"))).toBe(false);
    expect(
      await readFile(join(written.directory, "test/redis-streams-source.contract.test.ts"), "utf8"),
    ).toContain("describeSource(");
    const json = JSON.parse(await readFile(join(written.directory, "package.json"), "utf8"));
    expect(Object.keys(json.dependencies)).toContain("redis");
    expect(json.keywords).toEqual(expect.arrayContaining(["redis", "source", "onceflow-connector"]));
    expect(json.description).toContain("Redis Streams source");
  });

  it("refuses a folder that holds files, and writes nothing into it", async () => {
    const folder = join(work, "taken");
    await mkdir(folder);
    await writeFile(join(folder, "notes.txt"), "mine");
    await expect(
      generateConnector({ packageName: "onceflow-connector-acme", kind: "custom", directory: folder }),
    ).rejects.toMatchObject({ code: "CONFIGURATION", message: expect.stringContaining("is not empty") });
    expect(await readdir(folder)).toEqual(["notes.txt"]);
  });

  it("writes into an empty folder", async () => {
    const folder = join(work, "empty");
    await mkdir(folder);
    const written = await generateConnector({
      packageName: "onceflow-connector-acme",
      kind: "custom",
      directory: folder,
    });
    expect(written.files).toContain("src/acme-sink.ts");
  });
});
