import { describe, expect, it } from "vitest";
import { KafkaPrefixClaimedError } from "../errors/prefix-claimed-error.js";
import { checkPrefixClaims, jobsClaimingPrefix, prefixClaimId } from "./prefix-claims.js";
import { TransactionalIdPool } from "./transactional-id-pool.js";

describe("claims of a transactionalIdPrefix by jobs, kept in Kafka", () => {
  it("a claim id names its job and is never taken for a pooled id", () => {
    expect(prefixClaimId("orders-out", "orders-enrich")).toBe("orders-out-claim.orders-enrich");
    expect(TransactionalIdPool.parse("orders-out", prefixClaimId("orders-out", "7"))).toBeUndefined();
  });

  it("reads the claiming jobs from the listed ids of the prefix", () => {
    expect(
      jobsClaimingPrefix("orders-out", [
        "orders-out-0-3-1",
        "orders-out-claim.orders-enrich",
        "orders-out-claim.orders",
        "orders-out-claim.orders",
        "orders-out-extra-claim.other",
      ]),
    ).toEqual(["orders", "orders-enrich"]);
  });

  it("refuses a job when another one claimed the prefix, naming both", () => {
    expect(() => checkPrefixClaims("orders-out", "orders", ["orders"])).not.toThrow();
    const error = (() => {
      try {
        checkPrefixClaims("orders-out", "orders-archive", ["orders", "orders-archive"]);
      } catch (caught) {
        return caught;
      }
      return undefined;
    })();
    expect(error).toBeInstanceOf(KafkaPrefixClaimedError);
    expect(error).toMatchObject({
      code: "CONFIGURATION",
      setting: "transactionalIdPrefix",
      jobId: "orders-archive",
      claimedBy: ["orders"],
    });
    expect((error as Error).message).toContain('job "orders"');
    expect((error as Error).message).toContain('job "orders-archive"');
  });
});
