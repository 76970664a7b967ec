import { sharedKafka } from "@onceflow/testkit/vitest";
import { describe, expect, it } from "vitest";
import { explorationFromEnvironment, explore } from "../../packages/core/test/explore/exploration.js";
import { namedScenarios, runScenario } from "../../packages/core/test/explore/named-scenarios.js";
import { kafkaSinkUnderTest } from "./kafka-sink-under-test.js";

// The exploration's model against the real KafkaSink and broker, checked by a read_committed
// reader: few cases (each on a fresh topic). Replay a failure by its seed and paths.
const replay = {
  ...explorationFromEnvironment(20_261_130),
  replayFile: "test/explore/kafka-exploration.test.ts -t random",
};

describe("exploring the checkpoint protocol with KafkaSink (exactly-once)", () => {
  const brokers = () => [...sharedKafka().brokers];

  for (const scenario of namedScenarios) {
    it(`named scenario: ${scenario.name}`, async () => {
      expect((await runScenario(await kafkaSinkUnderTest(brokers()), scenario)).problems).toEqual([]);
    }, 90_000);
  }

  it("random operation lists: every value exactly once for a read_committed reader", async () => {
    const result = await explore({
      target: () => kafkaSinkUnderTest(brokers()),
      runs: 6,
      ...replay,
      timeLimitMs: 90_000,
    });
    expect(result.failed, result.report).toBe(false);
  }, 240_000);
});
