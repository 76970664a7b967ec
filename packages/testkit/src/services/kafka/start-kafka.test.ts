import { ConfigurationError } from "@onceflow/core";
import { describe, expect, it } from "vitest";
import { startKafka } from "./start-kafka.js";

describe("startKafka's options", () => {
  it("a SASL listener with a provider other than local is a configuration error, before anything starts", async () => {
    for (const provider of ["environment", "testcontainers"] as const) {
      const starting = startKafka({ saslPlain: true, provider, env: {} });
      await expect(starting).rejects.toBeInstanceOf(ConfigurationError);
      await expect(starting).rejects.toMatchObject({
        code: "CONFIGURATION",
        message: expect.stringContaining(`not by the ${provider} provider`),
      });
    }
  });
});
