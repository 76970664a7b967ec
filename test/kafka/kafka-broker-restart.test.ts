import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { usePrivateKafka } from "@onceflow/testkit/vitest";
import { afterEach, describe, expect, it } from "vitest";
import { ChildJob, produceSlowly } from "./helpers/child-job.js";
import { readAll, sleep, uniqueName } from "./helpers/kafka.js";

// This test kills the broker: it gets a private one, never the shared one.
const kafka = usePrivateKafka();
const cleanup: Array<() => Promise<unknown>> = [];

afterEach(async () => {
  for (const step of cleanup.splice(0).reverse()) await step();
});

describe("Kafka → Kafka exactly-once across a broker crash", { timeout: 360_000 }, () => {
  it("the broker is SIGKILLed and restarted mid-run: the job recovers and every input appears once", async () => {
    const brokers = [...kafka().brokers];
    const input = uniqueName("restart-in");
    const output = uniqueName("restart-out");
    await kafka().createTopic(input, { partitions: 2 });
    await kafka().createTopic(output, { partitions: 2 });
    const dir = await mkdtemp(join(tmpdir(), "onceflow-broker-restart-"));
    cleanup.push(() => rm(dir, { recursive: true, force: true }));
    const inputs = Array.from({ length: 3000 }, (_, i) => `in-${i}`);

    // Input goes in before and after the outage (not during it, so that it is written exactly once).
    const before = inputs.slice(0, 1500);
    const after = inputs.slice(1500);
    const producing = produceSlowly(input, before, { perTick: 50, tickMs: 100, partitions: 2, brokers });
    const job = ChildJob.start({
      BROKERS: brokers.join(","),
      INPUT_TOPIC: input,
      OUTPUT_TOPIC: output,
      JOB_ID: uniqueName("restart"),
      CHECKPOINT_DIR: dir,
      TXN_PREFIX: uniqueName("restart-txn"),
      GROUP_ID: uniqueName("restart-group"),
      RESTART_ATTEMPTS: "60",
      // Far longer than the broker's outage, even on a loaded machine. A checkpoint whose commit
      // (EndTxn) had not reached the broker when it died is committed by the restarted job; if the
      // broker came back after the transaction timeout, it has aborted that transaction on loading
      // it, and the job ends with TRANSACTION_TIMED_OUT (data lost), as Kafka's contract says. On a
      // loaded machine the kill and restart took over 120 s, twice the fixture's default of 60 s.
      TRANSACTION_TIMEOUT: "600000",
    });
    cleanup.push(async () => {
      if (job.process.exitCode === null && job.process.signalCode === null) await job.kill("SIGKILL");
    });
    await job.waitFor(/^COMMITTED 2 /);
    await producing;
    await kafka().kill();
    await sleep(3000);
    await kafka().start();
    await produceSlowly(input, after, { perTick: 50, tickMs: 50, partitions: 2, brokers });
    // Generous: on a loaded machine the broker's restart and the job's restarts take a while.
    const records = await readAll(output, { expected: inputs.length, timeoutMs: 200_000, brokers });
    const values = records.map((r) => r.value ?? "");
    if (values.length < inputs.length) {
      // Say what the job was doing, so that a stuck job and a slow one can be told apart.
      const state = job.process.exitCode === null ? "still running" : `exited with ${job.process.exitCode}`;
      throw new Error(
        `${values.length} of ${inputs.length} records committed; the job is ${state}. Its last lines:\n${job.lines.slice(-20).join("\n")}\nstderr:\n${job.stderr.slice(-4000)}`,
      );
    }
    expect(new Set(values).size).toBe(values.length);
    expect(new Set(values)).toEqual(new Set(inputs));
    await job.kill("SIGTERM");
    expect((await job.exited).code).toBe(0);
  });
});
