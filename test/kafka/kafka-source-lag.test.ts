import { KafkaSource } from "@onceflow/connector-kafka";
import { MetricNames } from "@onceflow/core";
import { prometheusMetrics } from "@onceflow/core/prometheus";
import { describe, expect, it } from "vitest";
import { openReader, pollRecords } from "./helpers/drive-source.js";
import {
  createTopic,
  kafkaBrokers,
  produce,
  sleep,
  uniqueName,
  writeInTransaction,
} from "./helpers/kafka.js";

/** `onceflow_source_lag_records` per split, as Prometheus scrapes it. */
async function lagBySplit(metrics: ReturnType<typeof prometheusMetrics>): Promise<Record<string, number>> {
  const text = await metrics.registry.metrics();
  const lags: Record<string, number> = {};
  for (const line of text.split("\n")) {
    const match = new RegExp(
      `^${MetricNames.sourceLagRecords}\\{job="test",subtask="0",source="kafka-in",split="([^"]+)"\\} (\\d+)$`,
    ).exec(line);
    if (match) lags[match[1]!] = Number(match[2]);
  }
  return lags;
}

/** Waits until the lags equal `expected` (the reader fetches in the background). */
async function lagsBecome(
  metrics: ReturnType<typeof prometheusMetrics>,
  expected: Record<string, number>,
): Promise<void> {
  let last: Record<string, number> = {};
  for (let round = 0; round < 300; round++) {
    last = await lagBySplit(metrics);
    if (JSON.stringify(Object.entries(last).sort()) === JSON.stringify(Object.entries(expected).sort()))
      return;
    await sleep(100);
  }
  expect(last).toEqual(expected);
}

describe("KafkaSource lag metric", () => {
  it("reports end offset − position per partition, and reaches 0 once the input is read", async () => {
    const topic = await createTopic(uniqueName("src-lag"), 3);
    for (const [partition, count] of [
      [0, 5],
      [1, 7],
      [2, 9],
    ] as const) {
      await produce(
        topic,
        Array.from({ length: count }, (_, i) => ({ value: `v${partition}-${i}`, partition })),
      );
    }
    const metrics = prometheusMetrics();
    const source = new KafkaSource({ brokers: kafkaBrokers(), topics: [topic], startingOffsets: "earliest" });
    const { reader } = await openReader(source, { context: { metrics } });
    try {
      // Fetched but not handed out yet: the whole partition is lag.
      await lagsBecome(metrics, { [`${topic}-0`]: 5, [`${topic}-1`]: 7, [`${topic}-2`]: 9 });
      await pollRecords(reader, 21);
      await lagsBecome(metrics, { [`${topic}-0`]: 0, [`${topic}-1`]: 0, [`${topic}-2`]: 0 });
      // New records raise it again until they are read.
      await produce(
        topic,
        [1, 2, 3, 4].map((i) => ({ value: `late-${i}`, partition: 1 })),
      );
      await lagsBecome(metrics, { [`${topic}-0`]: 0, [`${topic}-1`]: 4, [`${topic}-2`]: 0 });
      await pollRecords(reader, 4);
      await lagsBecome(metrics, { [`${topic}-0`]: 0, [`${topic}-1`]: 0, [`${topic}-2`]: 0 });
    } finally {
      await reader.close();
    }
  });

  it("reaches 0 past transaction markers when reading committed transactional input", async () => {
    const topic = await createTopic(uniqueName("src-lag-txn"), 1);
    for (let i = 0; i < 3; i++) await writeInTransaction(uniqueName("lag-writer"), topic, `t${i}`, "commit");
    const metrics = prometheusMetrics();
    const source = new KafkaSource({ brokers: kafkaBrokers(), topics: [topic], startingOffsets: "earliest" });
    const { reader } = await openReader(source, { context: { metrics } });
    try {
      // Three records and three commit markers.
      await lagsBecome(metrics, { [`${topic}-0`]: 6 });
      expect((await pollRecords(reader, 3)).map((record) => record.value)).toEqual(["t0", "t1", "t2"]);
      await lagsBecome(metrics, { [`${topic}-0`]: 0 });
    } finally {
      await reader.close();
    }
  });
});
