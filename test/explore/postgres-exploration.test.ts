import { describe, expect, it } from "vitest";
import { preparedPostgresUrl } from "../../packages/connector-postgres/test/helpers/postgres.js";
import { explorationFromEnvironment, explore } from "../../packages/core/test/explore/exploration.js";
import { namedScenarios, runScenario } from "../../packages/core/test/explore/named-scenarios.js";
import { postgresSinkUnderTest } from "./postgres-sink-under-test.js";

// The exploration's model against the real PostgresSink (prepared mode) and a real PostgreSQL:
// fewer cases than in memory, each on a fresh table. Replay a failure by its seed and path.
const url = preparedPostgresUrl();
const replay = {
  ...explorationFromEnvironment(20_261_130),
  replayFile: "test/explore/postgres-exploration.test.ts -t random",
};

describe("exploring the checkpoint protocol with PostgresSink (prepared)", () => {
  for (const scenario of namedScenarios) {
    it(`named scenario: ${scenario.name}`, async () => {
      expect((await runScenario(await postgresSinkUnderTest(url), scenario)).problems).toEqual([]);
    }, 60_000);
  }

  it("random operation lists: every id exactly once in the table, no gid left prepared", async () => {
    const result = await explore({
      target: () => postgresSinkUnderTest(url),
      runs: 15,
      ...replay,
      timeLimitMs: 60_000,
    });
    expect(result.failed, result.report).toBe(false);
  }, 180_000);
});
