import { Kafka, logLevel } from "kafkajs";
import { describe, expect, it } from "vitest";
import { clientRetryOf } from "../internal/kafkajs/internals.js";
import { PRODUCER_DEFAULTS, producerStartSettings, resolveProducerSettings } from "./producer-settings.js";

describe("resolveProducerSettings", () => {
  it("fills in the Java producer's defaults (batchSize excepted)", () => {
    expect(resolveProducerSettings({}, 5, undefined)).toEqual({
      batchSize: 256 * 1024,
      maxRequestSize: 1024 * 1024,
      maxInFlightRequestsPerConnection: 5,
      requestTimeoutMs: 30_000,
      deliveryTimeoutMs: 120_000,
      retry: {
        retries: Number.MAX_SAFE_INTEGER,
        initialRetryTime: PRODUCER_DEFAULTS.retryBackoffMs,
        maxRetryTime: PRODUCER_DEFAULTS.retryBackoffMaxMs,
        multiplier: 2,
      },
    });
  });

  it("takes the kafkajs client's retry where the sink sets none; the sink's own settings win", () => {
    const clientRetry = { retries: 3, initialRetryTime: 250, maxRetryTime: 4_000, multiplier: 3 };
    expect(resolveProducerSettings({}, 0, clientRetry).retry).toEqual(clientRetry);
    expect(resolveProducerSettings({ retries: 7, retryBackoffMs: 50 }, 0, clientRetry).retry).toEqual({
      retries: 7,
      initialRetryTime: 50,
      maxRetryTime: 4_000,
      multiplier: 3,
    });
  });

  it("a smaller maxRequestSize lowers the default batch size with it", () => {
    expect(resolveProducerSettings({ maxRequestSize: 100_000 }, 0, undefined).batchSize).toBe(100_000);
  });
});

describe("producerStartSettings", () => {
  it("hands every setting to the produce path under its own name", () => {
    expect(
      producerStartSettings(
        {
          batchSize: 1_000,
          maxRequestSize: 2_000,
          maxInFlightRequestsPerConnection: 2,
          requestTimeoutMs: 3_000,
          deliveryTimeoutMs: 9_000,
          retries: 4,
          retryBackoffMs: 10,
          retryBackoffMaxMs: 20,
        },
        5,
        undefined,
      ),
    ).toEqual({
      batchBytes: 1_000,
      maxRequestBytes: 2_000,
      maxInFlightRequestsPerBroker: 2,
      requestTimeoutMs: 3_000,
      deliveryTimeoutMs: 9_000,
      retry: { retries: 4, initialRetryTime: 10, maxRetryTime: 20, multiplier: 2 },
    });
  });
});

describe("clientRetryOf", () => {
  it("reads the retry option a kafkajs client was made with", () => {
    const retry = { retries: 2, initialRetryTime: 10 };
    expect(clientRetryOf(new Kafka({ brokers: ["127.0.0.1:1"], retry, logLevel: logLevel.NOTHING }))).toEqual(
      retry,
    );
    expect(
      clientRetryOf(new Kafka({ brokers: ["127.0.0.1:1"], logLevel: logLevel.NOTHING })),
    ).toBeUndefined();
  });
});
