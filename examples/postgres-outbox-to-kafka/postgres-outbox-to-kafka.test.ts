import { sharedKafka, usePrivatePostgres } from "@onceflow/testkit/vitest";
import { describe, expect, it } from "vitest";
import { runOutboxExample } from "./main.js";

describe("examples/postgres-outbox-to-kafka", () => {
  const postgres = usePrivatePostgres({ walLevel: "logical", provider: "local" });

  it("puts every outbox event in Kafka once, in commit order per aggregate", async () => {
    const run = await runOutboxExample([...sharedKafka().brokers], postgres().connectionString, 20);
    expect(run.result.endedBy).toBe("stop");
    const ids = run.records.map((record) => Number((JSON.parse(record.value ?? "{}") as { id: string }).id));
    expect(ids).toHaveLength(run.events);
    expect([...ids].sort((a, b) => a - b)).toEqual(Array.from({ length: run.events }, (_, i) => i + 1));
    const byKey = new Map<string, number[]>();
    for (const record of run.records) {
      const id = Number((JSON.parse(record.value ?? "{}") as { id: string }).id);
      byKey.set(record.key ?? "", [...(byKey.get(record.key ?? "") ?? []), id]);
    }
    for (const [key, list] of byKey) expect(list, key).toEqual([...list].sort((a, b) => a - b));
  });
});
