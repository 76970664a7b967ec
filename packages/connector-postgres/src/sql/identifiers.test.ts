import fc from "fast-check";
import pg from "pg";
import { describe, expect, it } from "vitest";
import { literal, quote, tableName } from "./identifiers.js";

// Quoting is written out in identifiers.ts so that naming a table does not load pg; it must stay
// exactly what pg's own functions give, for any string.
const awkward = fc.oneof(
  fc.string(),
  fc.string({ unit: fc.constantFrom('"', "'", "\\", ".", " ", "a", "É", "😀", "\u0000") }),
);

describe("quote and literal match pg's escapeIdentifier and escapeLiteral", () => {
  it("quote(identifier) is pg.escapeIdentifier(identifier)", () => {
    fc.assert(
      fc.property(awkward, (identifier) => {
        expect(quote(identifier)).toBe(pg.escapeIdentifier(identifier));
      }),
      { numRuns: 500 },
    );
  });

  it("literal(value) is pg.escapeLiteral(value)", () => {
    fc.assert(
      fc.property(awkward, (value) => {
        expect(literal(value)).toBe(pg.escapeLiteral(value));
      }),
      { numRuns: 500 },
    );
  });

  it("quotes the cases that matter", () => {
    expect(tableName("public", 'we"ird').sql).toBe('"public"."we""ird"');
    expect(literal("it's")).toBe("'it''s'");
    expect(literal("a\\b")).toBe(" E'a\\\\b'");
  });
});
