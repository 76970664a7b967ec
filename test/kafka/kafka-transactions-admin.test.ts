import { execFile } from "node:child_process";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import { abortKafkaTransactions, listKafkaTransactions } from "@onceflow/connector-kafka";
import { describe, expect, it } from "vitest";
import { createTopic, kafkaBrokers, kafkaClient, readAll, uniqueName } from "./helpers/kafka.js";

const execFileAsync = promisify(execFile);

/** A transactional producer that writes `value` in a transaction and commits it, or leaves it open (a crash). */
async function writeInTransaction(
  transactionalId: string,
  topic: string,
  value: string,
  end: "commit" | "leave-open",
) {
  const producer = kafkaClient().producer({ transactionalId, idempotent: true, maxInFlightRequests: 1 });
  await producer.connect();
  const transaction = await producer.transaction();
  await transaction.send({ topic, messages: [{ value }] });
  if (end === "commit") await transaction.commit();
  await producer.disconnect();
}

describe("finding and aborting lingering Kafka transactions", { timeout: 60_000 }, () => {
  it("lists the open transaction a crashed writer left, aborts it, and read_committed readers move on", async () => {
    const topic = await createTopic(uniqueName("lingering"), 1);
    const prefix = uniqueName("old-prefix");
    const brokers = kafkaBrokers();
    await writeInTransaction(`${prefix}-0-0`, topic, "lingering", "leave-open");
    await writeInTransaction(`${prefix}-1-0`, topic, "committed", "commit");
    await writeInTransaction(uniqueName("other"), topic, "after", "commit");

    // The open transaction holds the last stable offset: nothing after it is readable.
    expect(await readAll(topic, { timeoutMs: 2000 })).toEqual([]);

    const all = await listKafkaTransactions({ brokers, prefix });
    expect(all.map((t) => [t.transactionalId, t.state])).toEqual([
      [`${prefix}-0-0`, "Ongoing"],
      [`${prefix}-1-0`, "CompleteCommit"],
    ]);
    const lingering = await listKafkaTransactions({ brokers, prefix, olderThanMs: 0 });
    expect(lingering).toHaveLength(1);
    const [open] = lingering;
    expect(open?.transactionalId).toBe(`${prefix}-0-0`);
    expect(open?.topics).toEqual([{ topic, partitions: [0] }]);
    expect(open?.startedAt).toBeLessThanOrEqual(Date.now());
    expect(await listKafkaTransactions({ brokers, prefix, olderThanMs: 3_600_000 })).toEqual([]);

    await abortKafkaTransactions({ brokers, transactionalIds: lingering.map((t) => t.transactionalId) });
    const values = (await readAll(topic, { expected: 2 })).map((record) => record.value);
    expect(values).toEqual(["committed", "after"]);
    expect(await listKafkaTransactions({ brokers, prefix, olderThanMs: 0 })).toEqual([]);
  });
});

describe("onceflow-kafka transactions (the CLI, on the real broker)", { timeout: 60_000 }, () => {
  const cli = fileURLToPath(new URL("../../packages/connector-kafka/dist/cli.js", import.meta.url));
  const run = async (...args: string[]) =>
    (
      await execFileAsync(process.execPath, [
        cli,
        "transactions",
        ...args,
        "--brokers",
        kafkaBrokers().join(","),
      ])
    ).stdout;

  it("lists a lingering transaction, shows it in a dry run, aborts it", async () => {
    const topic = await createTopic(uniqueName("lingering-cli"), 1);
    const prefix = uniqueName("cli-prefix");
    await writeInTransaction(`${prefix}-0-0`, topic, "lingering", "leave-open");
    await writeInTransaction(uniqueName("other"), topic, "after", "commit");

    const listed = JSON.parse(await run("list", "--prefix", prefix, "--older-than", "0", "--json")) as Array<{
      transactionalId: string;
    }>;
    expect(listed.map((t) => t.transactionalId)).toEqual([`${prefix}-0-0`]);
    expect(await run("list", "--prefix", prefix)).toMatch(new RegExp(`${prefix}-0-0\\s+Ongoing`));
    expect(await run("abort", "--prefix", prefix, "--older-than", "0", "--dry-run")).toBe(
      `would abort 1: ${prefix}-0-0\n`,
    );
    expect(await readAll(topic, { timeoutMs: 1000 })).toEqual([]); // the dry run aborted nothing
    expect(await run("abort", "--prefix", prefix, "--older-than", "0")).toBe(`aborted 1: ${prefix}-0-0\n`);
    expect((await readAll(topic, { expected: 1 })).map((record) => record.value)).toEqual(["after"]);
  });

  it("refuses a prefix of no transactional id the brokers know, listing the prefixes they know", async () => {
    const topic = await createTopic(uniqueName("known-prefixes"), 1);
    // Ending in digits of its own, as a prefix may: only the ids' last three numbers are not its.
    const prefix = `${uniqueName("known-prefix")}-2026`;
    await writeInTransaction(`${prefix}-0-1-0`, topic, "committed", "commit");
    const wrong = `${prefix}x`;
    for (const args of [
      ["list", "--prefix", wrong],
      ["list", "--prefix", wrong, "--older-than", "0"],
      ["abort", "--prefix", wrong, "--older-than", "0"],
    ]) {
      const failure = (await run(...args).then(
        () => undefined,
        (error: unknown) => error,
      )) as { code?: number; stderr?: string } | undefined;
      expect(failure?.code, args.join(" ")).toBe(1);
      expect(failure?.stderr).toMatch(
        new RegExp(
          `^error \\[CONFIGURATION\\]: --prefix: no transactional id the brokers know starts with "${wrong}"`,
        ),
      );
      expect(failure?.stderr).toMatch(new RegExp(`the prefixes they know are .*\\b${prefix}\\b`));
      // Claims of a prefix (<prefix>-claim.<jobId>) are not prefixes of their own.
      expect(failure?.stderr).not.toMatch(/-claim\./);
    }
    // A known prefix with nothing open for that long is a true all-clear.
    expect(await run("list", "--prefix", prefix, "--older-than", "3600000")).toBe("no transaction found\n");
    expect(await run("abort", "--prefix", prefix, "--older-than", "3600000")).toBe(
      "no open transaction to abort\n",
    );
  });
});
