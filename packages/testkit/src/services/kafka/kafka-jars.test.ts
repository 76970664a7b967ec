import { chmodSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { OnceflowError } from "@onceflow/core";
import { describe, expect, it, onTestFinished } from "vitest";
import { ensureKafkaJars, hasCachedKafkaJars } from "./kafka-jars.js";

// A stand-in for Maven: counts its runs, waits a little (so two fetches overlap), and writes the jars
// copy-dependencies would write into -DoutputDirectory.
function scratch(): string {
  const dir = mkdtempSync(join(tmpdir(), "onceflow-jars-test-"));
  onTestFinished(() => rmSync(dir, { recursive: true, force: true }));
  return dir;
}

function fakeMaven(dir: string, behaviour: "ok" | "fail"): string {
  const script = join(dir, "mvn");
  writeFileSync(
    script,
    `#!/bin/sh
echo run >> "${dir}/runs"
out=""
for a in "$@"; do case "$a" in -DoutputDirectory=*) out="\${a#-DoutputDirectory=}";; esac; done
${behaviour === "fail" ? 'echo "[ERROR] Could not resolve dependencies: org.apache.kafka:kafka_2.13:jar:3.9.1"; exit 1' : ""}
sleep 1
mkdir -p "$out"
touch "$out/kafka_2.13-3.9.1.jar" "$out/kafka-clients-3.9.1.jar"
`,
  );
  chmodSync(script, 0o755);
  return script;
}

describe("ensureKafkaJars", () => {
  it("two fetches at once (as from two processes) both end with one complete cache folder and no leftovers", async () => {
    const dir = scratch();
    const cacheDir = join(dir, "cache");
    const mavenCommand = fakeMaven(dir, "ok");
    const [a, b] = await Promise.all([
      ensureKafkaJars("3.9.1", { cacheDir, mavenCommand }),
      ensureKafkaJars("3.9.1", { cacheDir, mavenCommand }),
    ]);
    expect(a.libDir).toBe(join(cacheDir, "kafka-3.9.1", "libs"));
    expect(b.libDir).toBe(a.libDir);
    expect(readdirSync(a.libDir).sort()).toEqual(["kafka-clients-3.9.1.jar", "kafka_2.13-3.9.1.jar"]);
    expect(readdirSync(cacheDir)).toEqual(["kafka-3.9.1"]); // no .partial folders left behind
    expect(await hasCachedKafkaJars("3.9.1", cacheDir)).toBe(true);
    expect(readFileSync(join(dir, "runs"), "utf8").trim().split("\n")).toHaveLength(2);

    const again = await ensureKafkaJars("3.9.1", { cacheDir, mavenCommand: join(dir, "no-such-mvn") });
    expect(again).toMatchObject({ fetched: false, fetchMs: 0, libDir: a.libDir });
  });

  it("a failing Maven gives SERVICE_UNAVAILABLE with Maven's output, and leaves no cache folder", async () => {
    const dir = scratch();
    const cacheDir = join(dir, "cache");
    const error = await ensureKafkaJars("3.9.1", { cacheDir, mavenCommand: fakeMaven(dir, "fail") }).then(
      () => undefined,
      (caught: unknown) => caught,
    );
    expect(error).toBeInstanceOf(OnceflowError);
    expect((error as OnceflowError).code).toBe("SERVICE_UNAVAILABLE");
    expect((error as Error).message).toContain("Could not resolve dependencies");
    expect(readdirSync(cacheDir)).toEqual([]);
  });

  it("a missing Maven says what to install", async () => {
    const cacheDir = scratch();
    await expect(ensureKafkaJars("3.9.1", { cacheDir, mavenCommand: "/nonexistent/mvn" })).rejects.toThrow(
      /Install Maven/,
    );
  });
});
