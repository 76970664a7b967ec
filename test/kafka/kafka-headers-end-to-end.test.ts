import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Deserializers, type KafkaRecord, KafkaSink, KafkaSource } from "@onceflow/connector-kafka";
import { filesystem, Job } from "@onceflow/core";
import { describe, expect, it } from "vitest";
import { SinkDriver } from "./helpers/drive-sink.js";
import { createTopic, kafkaBrokers, uniqueName } from "./helpers/kafka.js";
import { type JavaRecord, javaConsume, javaProduce } from "./java-client/java-client.js";

type Passed = KafkaRecord<string, string, Buffer>;

// Written by the Java producer: a repeated name interleaved with another, null values.
const written: JavaRecord[] = [
  {
    key: "k1",
    value: "v1",
    headers: [
      ["rep", "1"],
      ["other", "x"],
      ["rep", null],
      ["rep", "3"],
    ],
  },
  { key: "k2", value: "v2", headers: [["only-null", null]] },
  { key: "k3", value: "v3" },
];

describe("Kafka headers end to end", { timeout: 180_000 }, () => {
  it("Java producer → KafkaSource → KafkaSink → Java consumer: headers keep their order, repetition and nulls", async () => {
    const input = await createTopic(uniqueName("headers-in"), 1);
    const output = await createTopic(uniqueName("headers-out"), 1);
    await javaProduce(kafkaBrokers(), input, written);
    const dir = await mkdtemp(join(tmpdir(), "onceflow-headers-"));
    const seen: Passed[] = [];
    try {
      const job = new Job({
        jobId: uniqueName("headers"),
        parallelism: 1,
        checkpointing: { interval: 200, storage: filesystem(dir) },
        restartStrategy: { type: "none" },
      });
      job
        .fromSource(
          new KafkaSource<string, string, Buffer>({
            brokers: kafkaBrokers(),
            topics: [input],
            startingOffsets: "earliest",
            stoppingOffsets: "latest",
            headers: Deserializers.buffer(),
          }),
          { uid: "in" },
        )
        .map((record) => {
          seen.push(record);
          return record;
        })
        .sinkTo(
          () =>
            new KafkaSink<Passed>({
              brokers: kafkaBrokers(),
              topic: output,
              key: { serialize: (record) => record.key },
              value: { serialize: (record) => record.value },
              headers: (record) => record.headerList,
              deliveryGuarantee: "exactly-once",
              transactionalIdPrefix: uniqueName("headers-out"),
            }),
          { uid: "out" },
        );
      expect((await job.execute()).endedBy).toBe("end-of-input");
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
    // The source's ordered list, and its name map (a repeated name's values in order) beside it.
    const text = (value: Buffer | null | undefined) => value?.toString() ?? null;
    expect(seen[0]?.headerList.map(([name, value]) => [name, text(value)])).toEqual(written[0]?.headers);
    const byName = seen[0]?.headers ?? {};
    expect((byName.rep as Array<Buffer | null>).map(text)).toEqual(["1", null, "3"]);
    expect(text(byName.other as Buffer)).toBe("x");
    expect(seen[1]?.headers).toEqual({ "only-null": null });
    expect(seen[2]?.headerList).toEqual([]);
    const read = await javaConsume(kafkaBrokers(), output);
    expect(read.map(({ key, value, headers }) => ({ key, value, headers }))).toEqual(
      written.map(({ key, value, headers }) => ({ key, value, headers: headers ?? [] })),
    );
  });

  it("the sink writes headers by name with null values and repeated names as Kafka headers", async () => {
    const topic = await createTopic(uniqueName("headers-by-name"), 1);
    const driver = await SinkDriver.start(
      new KafkaSink<string>({
        brokers: kafkaBrokers(),
        topic,
        headers: () => ({ empty: null, tag: ["a", null, "b"] }),
      }),
    );
    try {
      await driver.write(["v"]);
      await driver.checkpoint(1);
    } finally {
      await driver.close();
    }
    const [record] = await javaConsume(kafkaBrokers(), topic);
    expect(record?.headers).toEqual([
      ["empty", null],
      ["tag", "a"],
      ["tag", null],
      ["tag", "b"],
    ]);
  });
});
