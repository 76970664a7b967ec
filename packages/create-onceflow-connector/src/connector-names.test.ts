import { describe, expect, it } from "vitest";
import { connectorNames } from "./connector-names.js";

describe("connectorNames", () => {
  it.each([
    ["onceflow-connector-acme", "onceflow-connector-acme", "AcmeSink", "acme-sink"],
    ["@acme/onceflow-connector-ledger", "onceflow-connector-ledger", "LedgerSink", "ledger-sink"],
    ["onceflow-acme-ledger", "onceflow-acme-ledger", "AcmeLedgerSink", "acme-ledger-sink"],
    ["s3-connector", "s3-connector", "S3Sink", "s3-sink"],
    [
      "onceflow-connector-redis.orders",
      "onceflow-connector-redis.orders",
      "RedisOrdersSink",
      "redis-orders-sink",
    ],
    ["onceflow-connector", "onceflow-connector", "CustomSink", "custom-sink"],
    ["3d-store", "3d-store", "Connector3dStoreSink", "connector-3d-store-sink"],
  ])("%s → folder %s, class %s, file %s", (name, directory, sinkClass, sinkFile) => {
    expect(connectorNames(name)).toEqual({ packageName: name, directory, sinkClass, sinkFile });
  });

  it.each(["", "Acme", "acme connector", "@acme", "@acme/", "../escape", ".hidden", "a".repeat(215)])(
    "refuses the invalid npm name %j with a CONFIGURATION error",
    (name) => {
      expect(() => connectorNames(name)).toThrow(expect.objectContaining({ code: "CONFIGURATION" }));
    },
  );
});
