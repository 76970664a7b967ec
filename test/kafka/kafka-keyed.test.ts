import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { KafkaSource } from "@onceflow/connector-kafka";
import {
  CollectedOutput,
  type Collector,
  filesystem,
  Job,
  type KeyedProcessContext,
  type KeyedProcessFunction,
  type KeyedRuntimeContext,
  type ValueState,
} from "@onceflow/core";
import { describe, expect, it } from "vitest";
import { createTopic, kafkaBrokers, produce, uniqueName } from "./helpers/kafka.js";

/** Emits each record's key with how many records of that key came before and including it. */
class RunningCount implements KeyedProcessFunction<string, unknown, string> {
  private count!: ValueState<number>;
  open(context: KeyedRuntimeContext): void {
    this.count = context.getState<number>({ name: "count" });
  }
  processElement(_record: unknown, context: KeyedProcessContext<string>, out: Collector<string>): void {
    const count = (this.count.value() ?? 0) + 1;
    this.count.update(count);
    out.collect(`${context.getCurrentKey()}=${count}`);
  }
}

describe("keyBy over a Kafka topic", { timeout: 120_000 }, () => {
  it.each([1, 2])(
    "a key on two partitions has one count for the whole job at parallelism %i",
    async (parallelism) => {
      const input = await createTopic(uniqueName("keyed-in"), 2);
      for (const partition of [0, 1]) {
        await produce(
          input,
          [1, 2, 3].map((value) => ({ key: "a", value: String(value), partition })),
        );
      }
      const dir = await mkdtemp(join(tmpdir(), "onceflow-kafka-keyed-"));
      try {
        const output = new CollectedOutput<string>();
        const job = new Job({
          jobId: uniqueName("keyed"),
          parallelism,
          checkpointing: { interval: 200, storage: filesystem(dir) },
          restartStrategy: { type: "none" },
        });
        job
          .fromSource(
            new KafkaSource({
              brokers: kafkaBrokers(),
              topics: [input],
              groupId: uniqueName("keyed-group"),
              startingOffsets: "earliest",
              stoppingOffsets: "latest",
            }),
            { uid: "in" },
          )
          .keyBy((record) => record.key?.toString() ?? "")
          .process(() => new RunningCount(), { uid: "count" })
          .sinkTo(output.sinkFactory(), { uid: "out" });
        await job.execute();
        expect([...output.committed].sort()).toEqual(["a=1", "a=2", "a=3", "a=4", "a=5", "a=6"]);
      } finally {
        await rm(dir, { recursive: true, force: true });
      }
    },
  );
});
