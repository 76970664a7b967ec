import { describe, expect, it } from "vitest";
import { decodeColumnValue, parseArray } from "./column-values.js";
import { bigIntToLsn, lsnToBigInt, postgresMicrosToIso } from "./lsn.js";

describe("decodeColumnValue (PostgreSQL text format)", () => {
  it.each([
    ["bigint beyond 2^53 as a bigint", 20, "9223372036854775807", 9223372036854775807n],
    [
      "numeric exactly, as a string",
      1700,
      "-0.000000000000000000000000001",
      "-0.000000000000000000000000001",
    ],
    ["numeric NaN", 1700, "NaN", "NaN"],
    [
      "timestamptz with microseconds in UTC",
      1184,
      "2024-01-02 03:04:05.000006+00",
      "2024-01-02T03:04:05.000006Z",
    ],
    ["timestamptz infinity as it is", 1184, "infinity", "infinity"],
    ["timestamp without zone", 1114, "1999-12-31 23:59:59", "1999-12-31T23:59:59"],
    ["jsonb parsed", 3802, '{"a": [1, "x"]}', { a: [1, "x"] }],
    ["bytea hex", 17, "\\x0001ff", Buffer.from([0, 1, 255])],
    ["bytea escape form", 17, "a\\000\\\\", Buffer.from([0x61, 0, 0x5c])],
    ["float8 -Infinity", 701, "-Infinity", Number.NEGATIVE_INFINITY],
    ["bool", 16, "f", false],
    ["int8[] with NULL", 1016, "{1,NULL,-9007199254740993}", [1n, null, -9007199254740993n]],
    [
      "2-d int4[]",
      1007,
      "{{1,2},{3,4}}",
      [
        [1, 2],
        [3, 4],
      ],
    ],
    [
      "text[] with quotes, commas and backslashes",
      1009,
      '{"a,b","c\\"d","e\\\\f",""}',
      ["a,b", 'c"d', "e\\f", ""],
    ],
    ["an array with lower bounds", 1007, "[0:1]={5,6}", [5, 6]],
    ["uuid as text", 2950, "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11", "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11"],
    ["an unknown type (enum) as text", 99999, "shipped", "shipped"],
  ])("%s", (_what, oid, text, expected) => {
    expect(decodeColumnValue(oid, text)).toEqual(expected);
  });

  it("parses an empty array and rejects a malformed one", () => {
    expect(parseArray("{}", (s) => s)).toEqual([]);
    expect(() => parseArray("{1,2", (s) => s)).toThrow(/malformed array/);
  });
});

describe("log sequence numbers and protocol timestamps", () => {
  it("round-trips LSNs and orders them as numbers", () => {
    expect(bigIntToLsn(lsnToBigInt("16/B374D848"))).toBe("16/B374D848");
    expect(lsnToBigInt("1/0") > lsnToBigInt("0/FFFFFFFF")).toBe(true);
    expect(() => lsnToBigInt("nope")).toThrow(/log sequence number/);
  });

  it("keeps microseconds of a commit time", () => {
    expect(postgresMicrosToIso(1n)).toBe("2000-01-01T00:00:00.000001Z");
    expect(postgresMicrosToIso(-1n)).toBe("1999-12-31T23:59:59.999999Z");
  });
});
