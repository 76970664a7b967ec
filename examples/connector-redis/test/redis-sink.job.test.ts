import { GeneratorSource, Job } from "@onceflow/core";
import { redisService } from "@onceflow/testkit";
import { useService } from "@onceflow/testkit/vitest";
import { createClient } from "redis";
import { expect, it } from "vitest";
import { listStagedTransactions, RedisSink } from "../src/index.js";

// A whole job into a real Redis: a generator of orders, two sink subtasks, checkpoints every 50 ms.
const redis = useService(redisService());

it("a job writes every record exactly once and leaves nothing staged", async () => {
  const job = new Job({
    jobId: "redis-example",
    parallelism: 2,
    checkpointing: { interval: 50, storage: "memory" },
  });
  job
    .fromSource(
      new GeneratorSource({
        count: 2_000,
        splits: 2,
        generate: (index) => ({ id: index, total: index % 97 }),
      }),
      { uid: "orders" },
    )
    .sinkTo(() => new RedisSink<{ id: number; total: number }>({ url: redis().url, key: "orders-out" }), {
      uid: "redis",
    });
  await job.execute();

  const client = await createClient({ url: redis().url }).connect();
  try {
    const written = (await client.lRange("orders-out", 0, -1)).map(
      (element) => JSON.parse(element).id as number,
    );
    expect(written.length).toBe(2_000);
    expect(new Set(written).size).toBe(2_000);
    expect(await listStagedTransactions(client, { sinkId: "orders-out" })).toEqual([]);
  } finally {
    await client.close();
  }
});
